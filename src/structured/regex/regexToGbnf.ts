/**
 * Regular expression → GBNF. Used for `guided_regex` (whole output, full-match semantics as vLLM/outlines),
 * for JSON Schema `pattern` (inside a JSON string, ECMA-262 search semantics: unanchored ends match any text),
 * and for `guided_whitespace_pattern`. Syntax and refusals: see `regexParser.ts`.
 */

import { ConstraintError } from "../errors.ts";
import { GbnfBuilder, gbnfCharClass, gbnfLiteral, group } from "../gbnf/gbnf.ts";
import { jsonCharRule } from "../gbnf/jsonPrimitives.ts";
import { LruCache } from "../worker/lru.ts";
import { CodePointSet } from "./codePointSet.ts";
import { AutomatonTooLarge, type Dfa, regexDfa } from "./regexAutomaton.ts";
import { ANY_TEXT, parseRegex, RegexError, type RegexNode, splitAnchors } from "./regexParser.ts";

/**
 * How matched characters are written: `raw` (the output text is the match) or `json` (the match is the
 * decoded content of a JSON string, so `"`, `\` and control characters are written as JSON escapes).
 */
export type RegexMode = "raw" | "json";

/** Largest pattern accepted, in UTF-16 code units. */
export const MAX_PATTERN_LENGTH = 10_000;

/** The code points a JSON string must escape: controls, `"` and `\`. */
export const JSON_ESCAPED = CodePointSet.of([
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
]);
const SHORT_ESCAPES: Record<number, string> = {
  8: "b",
  9: "t",
  10: "n",
  12: "f",
  13: "r",
  34: '"',
  92: "\\",
};

/** The JSON string text of one code point: itself, or its escape (`\"`, `\\`, `\n`, `\u001f`, ...). */
export function jsonEncoded(cp: number): string {
  const short = SHORT_ESCAPES[cp];
  if (short !== undefined) return `\\${short}`;
  if (cp < 0x20) return `\\u${cp.toString(16).padStart(4, "0")}`;
  return String.fromCodePoint(cp);
}

/**
 * A GBNF expression matching one code point of `set`: the code point itself in `raw` mode; in `json` mode its
 * JSON string text (plain, or the escape for `"`, `\\` and controls). Multi-part expressions become a rule
 * named after `hint`.
 */
export function charSetExpression(b: GbnfBuilder, set: CodePointSet, mode: RegexMode, hint: string): string {
  if (mode === "raw") {
    return set.size === 1 ? gbnfLiteral(String.fromCodePoint(set.ranges[0]![0])) : gbnfCharClass(set);
  }
  if (set.size === 1) return gbnfLiteral(jsonEncoded(set.ranges[0]![0]));
  const plain = set.subtract(JSON_ESCAPED);
  const escaped = set.intersect(JSON_ESCAPED);
  const alternatives: string[] = [];
  if (!plain.isEmpty) alternatives.push(gbnfCharClass(plain));
  if (escaped.size === JSON_ESCAPED.size) {
    alternatives.push('"\\\\" (["\\\\bfnrt] | "u00" [01] [0-9a-fA-F])');
  } else {
    for (const [low, high] of escaped.ranges) {
      for (let cp = low; cp <= high; cp++) alternatives.push(gbnfLiteral(jsonEncoded(cp)));
    }
  }
  if (alternatives.length === 1) return alternatives[0]!;
  return b.rule(`${hint}-char`, alternatives.join(" | "));
}

/** Compiles parsed regex trees into GBNF expressions inside one {@link GbnfBuilder}. */
class RegexEmitter {
  constructor(
    private readonly b: GbnfBuilder,
    private readonly mode: RegexMode,
    private readonly hint: string,
  ) {}

  /** Expression matching one code point of `set` (JSON-escaped in `json` mode). */
  private charSet(set: CodePointSet): string {
    return charSetExpression(this.b, set, this.mode, this.hint);
  }

  /** Expression for a whole tree. */
  emit(node: RegexNode): string {
    switch (node.type) {
      case "set":
        return this.charSet(node.set);
      case "start":
      case "end":
        return '""';
      case "look":
        throw new RegexError("unsupported", "lookahead", -1);
      case "alt":
        return `(${node.items.map((item) => this.emit(item)).join(" | ")})`;
      case "repeat":
        return this.b.repeat(group(this.emit(node.item)), node.min, node.max, `${this.hint}-rep`);
      case "seq": {
        const parts: string[] = [];
        let literal = "";
        const flush = (): void => {
          if (literal !== "") parts.push(gbnfLiteral(literal));
          literal = "";
        };
        for (const item of node.items) {
          if (item.type === "set" && item.set.size === 1) {
            const cp = item.set.ranges[0]![0];
            literal += this.mode === "json" ? jsonEncoded(cp) : String.fromCodePoint(cp);
          } else {
            flush();
            const expr = this.emit(item);
            if (expr !== '""') parts.push(expr.includes(" | ") && !expr.startsWith("(") ? `(${expr})` : expr);
          }
        }
        flush();
        return parts.length === 0 ? '""' : parts.join(" ");
      }
    }
  }
}

/**
 * Adds the rules for `pattern` to `b` and returns a GBNF expression for it.
 * `search: false` — full match (anchors at the ends are optional and stripped);
 * `search: true` — ECMA-262 `RegExp.test` semantics: a top-level alternative not anchored with `^`/`$`
 * may be preceded/followed by any text (only meaningful in `json` mode, where "any text" is `json-char*`).
 * Throws {@link RegexError}.
 */
export function regexExpression(
  b: GbnfBuilder,
  pattern: string,
  options: { mode: RegexMode; search: boolean; hint: string },
): string {
  if (pattern.length > MAX_PATTERN_LENGTH) {
    throw new RegexError("unsupported", `a pattern longer than ${MAX_PATTERN_LENGTH} characters`, 0);
  }
  const tree = parseRegex(pattern);
  let alternatives: ReturnType<typeof splitAnchors>;
  try {
    alternatives = splitAnchors(tree);
  } catch (error) {
    if (!(error instanceof RegexError)) throw error;
    // A lookahead or an anchor away from the ends: only an automaton compiles it.
    let result: { expr: string } | null;
    try {
      result = automatonExpression(b, patternDfa(pattern, options.search), { ...options, min: 0, max: null });
    } catch (error) {
      if (error instanceof AutomatonTooLarge)
        throw new RegexError("unsupported", "a pattern this complex with anchors or lookaheads inside", -1);
      throw error;
    }
    if (result === null) throw new RegexError("unsupported", "a pattern that matches no string", -1);
    return result.expr;
  }
  const emitter = new RegexEmitter(b, options.mode, options.hint);
  const any = (): string =>
    `${options.mode === "json" ? jsonCharRule(b) : gbnfCharClass(CodePointSet.all())}*`;
  const exprs = alternatives.map(({ node, start, end }) => {
    const parts = [
      options.search && !start ? any() : "",
      emitter.emit(node),
      options.search && !end ? any() : "",
    ];
    const kept = parts.filter((part) => part !== "" && part !== '""');
    return kept.length === 0 ? '""' : kept.join(" ");
  });
  return exprs.length === 1 ? exprs[0]! : exprs.join(" | ");
}

const patternDfas = new LruCache<string, Dfa>(256);

/** Forgets the automata {@link patternDfa} cached (so a benchmark times every compilation cold). */
export function clearPatternCache(): void {
  patternDfas.clear();
}

/**
 * The trimmed, minimal DFA of the strings `pattern` matches: fully (`search: false`), or under ECMA-262
 * search semantics (`search: true`: any text before and after, anchors holding only at the ends of the
 * input), cached per pattern. Throws RegexError (bad or unsupported pattern) or AutomatonTooLarge.
 */
export function patternDfa(pattern: string, search: boolean): Dfa {
  const key = `${search ? "s" : "f"}${pattern}`;
  let dfa = patternDfas.get(key);
  if (dfa === undefined) {
    const tree = parseRegex(pattern);
    dfa = regexDfa(search ? searchTree(tree) : tree);
    patternDfas.set(key, dfa);
  }
  return dfa;
}

/**
 * The tree of the strings that contain a match of `tree` (ECMA-262 `test` semantics): any text around each
 * top-level alternative, except before one that starts with `^` or after one that ends with `$` (there any
 * text could only be empty; leaving it out keeps the automaton's subsets small).
 */
function searchTree(tree: RegexNode): RegexNode {
  const alternatives = tree.type === "alt" ? tree.items : [tree];
  const items = alternatives.map((alt): RegexNode => {
    const parts = alt.type === "seq" ? alt.items : [alt];
    const start = parts[0]?.type === "start";
    const end = parts[parts.length - 1]?.type === "end";
    if (start && end) return alt;
    return { type: "seq", items: [...(start ? [] : [ANY_TEXT]), alt, ...(end ? [] : [ANY_TEXT])] };
  });
  return items.length === 1 ? items[0]! : { type: "alt", items };
}

/**
 * Adds the rules for an already parsed tree to `b` and returns a GBNF expression matching exactly its strings
 * (full match; anchors must have been removed, e.g. by `splitAnchors`).
 */
export function regexTreeExpression(
  b: GbnfBuilder,
  tree: RegexNode,
  options: { mode: RegexMode; hint: string },
): string {
  return new RegexEmitter(b, options.mode, options.hint).emit(tree);
}

/** Most characters of client input (a pattern, a value) echoed in an error message. */
export const MAX_ECHOED_CHARS = 200;

/** `text` as echoed in an error: its first {@link MAX_ECHOED_CHARS} characters, then `…` if cut. */
export function echoed(text: string): string {
  return text.length > MAX_ECHOED_CHARS ? `${text.slice(0, MAX_ECHOED_CHARS)}…` : text;
}

/** Turns a {@link RegexError} into the client error: 400 naming the construct and its position (pattern echoed capped). */
export function regexBadRequest(error: RegexError, pattern: string, param: string, where = ""): Error {
  const position = error.position >= 0 ? ` at position ${error.position}` : "";
  const label = error.kind === "invalid" ? "Invalid regular expression" : "Unsupported regular expression";
  return new ConstraintError(
    `${label}${where} ${JSON.stringify(echoed(pattern))}: ${error.message}${position}.`,
    param,
  );
}

/**
 * A complete GBNF grammar whose language is the set of strings `pattern` fully matches (vLLM's
 * `guided_regex`; a leading `^` and trailing `$` are allowed and ignored). Throws `ConstraintError` (`param`,
 * default `"guided_regex"`) for unsupported or invalid patterns, naming the construct.
 * Example: `[a-c]{2}x|y` → `root ::= [a-c]{2} "x" | "y"`.
 */
export function regexToGbnf(pattern: string, param = "guided_regex"): string {
  if (typeof pattern !== "string")
    throw new ConstraintError("The regular expression must be a string.", param);
  const b = new GbnfBuilder();
  b.reserveExact("root");
  try {
    b.define("root", regexExpression(b, pattern, { mode: "raw", search: false, hint: "re" }));
  } catch (error) {
    if (error instanceof RegexError) throw regexBadRequest(error, pattern, param);
    if (error instanceof RangeError)
      throw new ConstraintError(
        error.message.includes("call stack")
          ? "The regular expression is nested too deeply to compile."
          : `Unsupported regular expression: ${error.message}.`,
        param,
      );
    throw error;
  }
  return b.render();
}

/** Most GBNF rules one automaton with length bounds is written as (a state per length reached). */
export const MAX_AUTOMATON_RULES = 1_000;

/**
 * Writes the strings `dfa` accepts whose length in code points lies in `[min, max]` (`max` null: unbounded)
 * as GBNF rules in `b` (one rule per state, or per state and length reached while a bound still matters) and
 * returns the expression, or null when no such string exists. `dfa` must be trimmed (`Dfa.trim`).
 *
 * When `max` would need more than {@link MAX_AUTOMATON_RULES} rules it is lowered to the largest length that
 * fits, a narrowing reported as `max` in the result (every string written is still accepted and within the
 * client's bounds). Throws {@link AutomatonTooLarge} when even the lengths up to `min` do not fit, or when
 * the narrowed maximum falls below `min`.
 */
export function automatonExpression(
  b: GbnfBuilder,
  dfa: Dfa,
  options: { mode: RegexMode; hint: string; min: number; max: number | null },
): { expr: string; max: number | null } | null {
  const { mode, hint, min } = options;
  let max = options.max;
  if (dfa.isEmpty || (max !== null && max < min)) return null;
  const exprs = new Map<string, string>();
  const charExpr = (set: CodePointSet): string => {
    const key = set.ranges.join(";");
    let expr = exprs.get(key);
    if (expr === undefined) {
      expr = charSetExpression(b, set, mode, hint);
      exprs.set(key, expr);
    }
    return expr;
  };
  const moves = Array.from({ length: dfa.size }, (_, q) =>
    dfa.transitionsOf(q).map(({ set, target }) => ({ expr: charExpr(set), target })),
  );
  // Plain rules, one per state: the language without length bounds (and the tail once `min` is passed).
  const plainNames: string[] = [];
  const plain = (): string[] => {
    if (plainNames.length > 0) return plainNames;
    for (let q = 0; q < dfa.size; q++) plainNames.push(b.reserve(`${hint}-s${q}`));
    for (let q = 0; q < dfa.size; q++) {
      const alternatives = moves[q]!.map(({ expr, target }) => `${expr} ${plainNames[target]}`);
      if (dfa.accept[q] === 1) alternatives.push('""');
      b.define(plainNames[q]!, alternatives.join(" | "));
    }
    return plainNames;
  };
  if (min === 0 && max === null) return { expr: plain()[0]!, max };

  if (max !== null) {
    // Lower `max` to the deepest layer whose states (reachable, bounds aside) still fit the rule budget.
    let layer = new Set([0]);
    let total = 1;
    for (let n = 0; n < max; n++) {
      const nextLayer = new Set<number>();
      for (const q of layer) for (const { target } of moves[q]!) nextLayer.add(target);
      if (total + nextLayer.size > MAX_AUTOMATON_RULES) {
        max = n;
        break;
      }
      total += nextLayer.size;
      layer = nextLayer;
    }
    if (max < min) throw new AutomatonTooLarge(`more than ${MAX_AUTOMATON_RULES} rules for the lengths`);
  }
  // Layers 0..top: state q after n code points. With no maximum, layer `min` is the plain rule.
  const top = max ?? min;
  const live: Uint8Array[] = [];
  for (let n = top; n >= 0; n--) {
    const row = new Uint8Array(dfa.size);
    for (let q = 0; q < dfa.size; q++) {
      if (max === null && n === top) row[q] = 1;
      else if (dfa.accept[q] === 1 && n >= min) row[q] = 1;
      else if (n < top) row[q] = moves[q]!.some(({ target }) => live[n + 1]![target] === 1) ? 1 : 0;
    }
    live[n] = row;
  }
  if (live[0]![0] !== 1) return null;
  const names = new Map<number, string>();
  const nameOf = (q: number, n: number): string => {
    if (max === null && n === top) return plain()[q]!;
    const key = n * dfa.size + q;
    let name = names.get(key);
    if (name === undefined) {
      if (names.size >= MAX_AUTOMATON_RULES)
        throw new AutomatonTooLarge(`more than ${MAX_AUTOMATON_RULES} rules for the lengths`);
      name = b.reserve(`${hint}-s${q}-${n}`);
      names.set(key, name);
      pending.push([q, n]);
    }
    return name;
  };
  const pending: [number, number][] = [];
  const start = nameOf(0, 0);
  while (pending.length > 0) {
    const [q, n] = pending.pop()!;
    const alternatives: string[] = [];
    if (n < top) {
      for (const { expr, target } of moves[q]!) {
        if (live[n + 1]![target] === 1) alternatives.push(`${expr} ${nameOf(target, n + 1)}`);
      }
    }
    if (dfa.accept[q] === 1 && n >= min) alternatives.push('""');
    b.define(names.get(n * dfa.size + q)!, alternatives.join(" | "));
  }
  return { expr: start, max };
}

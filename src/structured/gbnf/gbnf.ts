/**
 * Helpers to write GBNF text (llama.cpp's grammar format, `grammars/README.md` of llama.cpp as vendored by
 * node-llama-cpp 3.21.1): escaping literals and character classes, and a {@link GbnfBuilder} that collects
 * named rules and writes bounded repetitions that stay inside llama.cpp's parser limits.
 */
import { type CodePointSet, MAX_CODE_POINT } from "../regex/codePointSet.ts";

/**
 * llama.cpp's parser (`llama-grammar.cpp`, `MAX_REPETITION_THRESHOLD = 2000`) silently turns `x{m,n}` with
 * `n > 2000` into `x{m,}` and rejects `x{m}` with `m > 2000`; repetitions above this bound are split into
 * chunks of this many items.
 */
export const REPETITION_CHUNK = 1000;

/** Largest repetition count we write at all (a million items); larger counts are refused by the callers. */
export const MAX_REPETITION = REPETITION_CHUNK * REPETITION_CHUNK;

/** Escapes one code point for use inside a GBNF literal or class (`\"`, `\\`, `\n`, `\xHH`, `\uHHHH`, `\UHHHHHHHH`). */
function escapeCodePoint(cp: number, specials: string): string {
  const ch = String.fromCodePoint(cp);
  if (cp === 0x0a) return "\\n";
  if (cp === 0x0d) return "\\r";
  if (cp === 0x09) return "\\t";
  if (cp < 0x20 || cp === 0x7f) return `\\x${cp.toString(16).toUpperCase().padStart(2, "0")}`;
  if (cp > 0x7e) {
    return cp > 0xffff
      ? `\\U${cp.toString(16).toUpperCase().padStart(8, "0")}`
      : `\\u${cp.toString(16).toUpperCase().padStart(4, "0")}`;
  }
  if (specials.includes(ch)) return ch === "^" ? "\\x5E" : `\\${ch}`;
  return ch;
}

/** Text that a GBNF literal holds unescaped: printable ASCII except `"` and `\`. */
const PLAIN_LITERAL = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * A GBNF string literal matching exactly `text` (code point by code point), e.g. `he said "hi"` →
 * `"he said \"hi\""`. Non-ASCII and control characters are written as `\xHH`/`\uHHHH`/`\UHHHHHHHH` escapes,
 * which llama.cpp's `parse_char` decodes to the same code points.
 */
export function gbnfLiteral(text: string): string {
  // Printable ASCII other than `"` and `\` is written as it is (most names and values).
  if (PLAIN_LITERAL.test(text)) return `"${text}"`;
  let out = '"';
  for (const ch of text) out += escapeCodePoint(ch.codePointAt(0)!, '"\\');
  return `${out}"`;
}

/** Longest text (in code points) {@link literalTrie} nests; longer lists are written as alternatives. */
const MAX_TRIE_TEXT = 2_000;

/**
 * Fewest literals (an `enum`'s strings, `guided_choice`'s choices) worth writing as {@link literalTrie}
 * rather than as plain alternatives.
 */
export const MIN_TRIE_LITERALS = 16;

/** A trie of code points: a node's children by the next code point; `end` where a string ends. */
export type CodePointTrie = { children: Map<number, CodePointTrie>; end: boolean };

/** The trie of `strings`, by code point. */
export function codePointTrie(strings: readonly string[]): CodePointTrie {
  const root: CodePointTrie = { children: new Map(), end: false };
  for (const text of strings) {
    let node = root;
    for (const ch of text) {
      const cp = ch.codePointAt(0) as number;
      let next = node.children.get(cp);
      if (next === undefined) {
        next = { children: new Map(), end: false };
        node.children.set(cp, next);
      }
      node = next;
    }
    node.end = true;
  }
  return root;
}

/**
 * A GBNF expression matching exactly the distinct `texts`, with shared prefixes written once:
 * `"\"word" ("0" | "1" ...) "\""` for `"word0"`, `"word1"`, ... llama.cpp's matcher then keeps one stack per
 * distinct next character, where a plain alternation keeps one per text (a 20,000-value `enum` held each
 * decode step for seconds). Chains of single children are one literal. Texts longer than 2,000 code points
 * are written as a plain alternation.
 */
export function literalTrie(texts: readonly string[]): string {
  if (texts.some((text) => text.length > MAX_TRIE_TEXT && [...text].length > MAX_TRIE_TEXT))
    return texts.map(gbnfLiteral).join(" | ");
  return writeTrie(codePointTrie(texts), true);
}

/** The alternatives below `node` (see {@link literalTrie}), grouped unless `top`. */
function writeTrie(node: CodePointTrie, top: boolean): string {
  const alternatives: string[] = [];
  if (node.end) alternatives.push('""');
  for (const [cp, child] of node.children) {
    let chunk = String.fromCodePoint(cp);
    let at = child;
    while (!at.end && at.children.size === 1) {
      const [next, below] = at.children.entries().next().value as [number, CodePointTrie];
      chunk += String.fromCodePoint(next);
      at = below;
    }
    alternatives.push(
      at.children.size === 0 ? gbnfLiteral(chunk) : `${gbnfLiteral(chunk)} ${writeTrie(at, false)}`,
    );
  }
  if (alternatives.length === 1) return alternatives[0]!;
  return top ? alternatives.join(" | ") : `(${alternatives.join(" | ")})`;
}

/**
 * A GBNF character class matching one code point of `set`, e.g. `{a..z, _}` → `[_a-z]`. Writes the negated
 * form `[^...]` when it is shorter. Throws RangeError for an empty set (GBNF has no empty class).
 */
export function gbnfCharClass(set: CodePointSet): string {
  if (set.isEmpty) throw new RangeError("Cannot write an empty character class");
  const complement = set.complement();
  const write = (ranges: readonly (readonly [number, number])[]): string =>
    ranges
      .map(([low, high]) => {
        const a = escapeCodePoint(low, "]-\\[^");
        if (low === high) return a;
        const b = escapeCodePoint(high, "]-\\[^");
        return high === low + 1 ? `${a}${b}` : `${a}-${b}`;
      })
      .join("");
  if (complement.isEmpty) return `[\\x00-\\U${MAX_CODE_POINT.toString(16).toUpperCase().padStart(8, "0")}]`;
  const positive = `[${write(set.ranges)}]`;
  const negative = `[^${write(complement.ranges)}]`;
  return negative.length < positive.length ? negative : positive;
}

/** True when `expr` is one GBNF symbol that a postfix operator applies to as a whole (name, literal, class, group). */
export function isAtomicExpression(expr: string): boolean {
  if (/^[a-zA-Z0-9-]+$/.test(expr)) return true;
  if (/^"(?:[^"\\]|\\.)*"$/.test(expr)) return true;
  if (/^\[(?:[^\]\\]|\\.)*\]$/.test(expr)) return true;
  if (expr.startsWith("(") && expr.endsWith(")")) {
    let depth = 0;
    let inLiteral = false;
    let inClass = false;
    for (let i = 0; i < expr.length; i++) {
      const ch = expr[i];
      if (ch === "\\") {
        i++;
        continue;
      }
      if (inLiteral) {
        if (ch === '"') inLiteral = false;
      } else if (inClass) {
        if (ch === "]") inClass = false;
      } else if (ch === '"') inLiteral = true;
      else if (ch === "[") inClass = true;
      else if (ch === "(") depth++;
      else if (ch === ")") {
        depth--;
        if (depth === 0 && i !== expr.length - 1) return false;
      }
    }
    return depth === 0;
  }
  return false;
}

/** Wraps `expr` in parentheses unless it already is a single symbol. */
export function group(expr: string): string {
  return isAtomicExpression(expr) ? expr : `(${expr})`;
}

/** A hint that is a rule name as it is: name characters, not starting or ending with `-`. */
const PLAIN_NAME = /^[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?$/;

/**
 * Collects GBNF rules under unique names and renders the grammar with `root` first.
 * Names are sanitised to llama.cpp's rule-name alphabet `[a-zA-Z0-9-]`; a taken name gets a numeric suffix.
 */
export class GbnfBuilder {
  private readonly rules = new Map<string, string | null>();
  /** Rule names in reservation order (what {@link rollback} undoes from the end). */
  private readonly order: string[] = [];
  private readonly byBody = new Map<string, string>();
  /** Per name base, the numeric suffix {@link reserve} tries first. */
  private readonly suffixes = new Map<string, number>();
  /** Symbols made by {@link once}, by key. */
  private readonly made = new Map<string, string>();
  /** The keys of {@link made} in the order made, with the rule count when each was made. */
  private readonly madeOrder: { key: string; rules: number }[] = [];

  /**
   * Reserves a fresh rule name derived from `hint` (defined later with {@link define}). Names of fixed rules
   * (`root`, `ws`, `json-*`, `integral-part`) are never handed out: such hints get an `x-` prefix.
   */
  reserve(hint: string): string {
    let base = PLAIN_NAME.test(hint)
      ? hint
      : hint.replace(/[^a-zA-Z0-9-]+/g, "-").replace(/^-+|-+$/g, "") || "r";
    // Long hints (nested paths, `$ref`s with long common prefixes) keep their distinctive end.
    if (base.length > 32) {
      const tail = base.slice(-32);
      base = tail.slice(tail.indexOf("-") + 1) || tail;
    }
    if (/^(root|ws|integral-part|json-.*|fmt-.*)$/.test(base)) base = `x-${base}`;
    let name = base;
    // Suffixes continue from the last one handed out for this base (a linear scan made many equal hints quadratic).
    for (let i = this.suffixes.get(base) ?? 1; this.rules.has(name); i++) {
      name = `${base}-${i}`;
      this.suffixes.set(base, i + 1);
    }
    this.rules.set(name, null);
    this.order.push(name);
    return name;
  }

  /** Reserves exactly `name` (e.g. `root`); throws Error if it is taken. */
  reserveExact(name: string): string {
    if (this.rules.has(name)) throw new Error(`Rule ${name} is already defined`);
    this.rules.set(name, null);
    this.order.push(name);
    return name;
  }

  /** Sets the body of a reserved rule. */
  define(name: string, body: string): string {
    this.rules.set(name, body);
    if (!this.byBody.has(body)) this.byBody.set(body, name);
    return name;
  }

  /** A rule with this body: an existing rule with the identical body, or a new one named after `hint`. */
  rule(hint: string, body: string): string {
    const existing = this.byBody.get(body);
    if (existing !== undefined) return existing;
    return this.define(this.reserve(hint), body);
  }

  /**
   * A rule with a fixed name (e.g. `ws`, `json-char`), defined by `body` (or the result of calling it) the
   * first time it is asked for; later calls just return the name.
   */
  fixed(name: string, body: string | (() => string)): string {
    if (!this.rules.has(name)) {
      this.rules.set(name, null);
      this.order.push(name);
      this.define(name, typeof body === "string" ? body : body());
    }
    return name;
  }

  /**
   * The symbol `make` returns for `key` (e.g. a rule built from a list of names), made on the first call
   * only; a {@link rollback} of any rule reserved before it was made forgets it.
   */
  once(key: string, make: () => string): string {
    const known = this.made.get(key);
    if (known !== undefined) return known;
    const symbol = make();
    this.made.set(key, symbol);
    this.madeOrder.push({ key, rules: this.order.length });
    return symbol;
  }

  /** A mark for {@link rollback}: the rules defined so far. */
  checkpoint(): number {
    return this.order.length;
  }

  /**
   * Forgets every rule reserved after `mark` (a {@link checkpoint}), e.g. of a subschema that was dropped.
   * Costs only the dropped rules, however many were defined before.
   */
  rollback(mark: number): void {
    while (this.madeOrder.length > 0 && this.madeOrder[this.madeOrder.length - 1]!.rules > mark)
      this.made.delete(this.madeOrder.pop()!.key);
    while (this.order.length > mark) {
      const name = this.order.pop()!;
      const body = this.rules.get(name);
      this.rules.delete(name);
      if (body !== undefined && body !== null && this.byBody.get(body) === name) this.byBody.delete(body);
    }
  }

  /** True when a rule of this name was reserved or defined. */
  has(name: string): boolean {
    return this.rules.has(name);
  }

  /**
   * `item` repeated between `min` and `max` times (`max = null`: unbounded), as a GBNF expression. Counts up
   * to {@link REPETITION_CHUNK} use `{m,n}` directly; larger counts are split into chunk rules so llama.cpp's
   * 2000-repetition limit neither rejects nor silently widens them (like llama.cpp's `build_repetition`,
   * with chunking added). Non-atomic items are hoisted into a rule first. Throws RangeError above
   * {@link MAX_REPETITION}.
   */
  repeat(item: string, min: number, max: number | null, hint = "rep"): string {
    if (max !== null && max < min) throw new RangeError(`Bad repetition {${min},${max}}`);
    if (min > MAX_REPETITION || (max !== null && max > MAX_REPETITION)) {
      throw new RangeError(`Repetition counts above ${MAX_REPETITION} are not supported`);
    }
    if (max === 0) return '""';
    const body = item.startsWith("(") && isAtomicExpression(item) ? item.slice(1, -1) : item;
    const atom = isAtomicExpression(item) && !item.startsWith("(") ? item : this.rule(hint, body);
    if (min <= REPETITION_CHUNK && (max === null || max <= REPETITION_CHUNK))
      return simpleRepeat(atom, min, max);
    const chunk = this.rule(`${hint}-chunk`, `${atom}{${REPETITION_CHUNK}}`);
    const parts: string[] = [];
    if (min > REPETITION_CHUNK) {
      parts.push(simpleRepeat(chunk, Math.floor(min / REPETITION_CHUNK), Math.floor(min / REPETITION_CHUNK)));
      if (min % REPETITION_CHUNK > 0)
        parts.push(simpleRepeat(atom, min % REPETITION_CHUNK, min % REPETITION_CHUNK));
    } else if (min > 0) parts.push(simpleRepeat(atom, min, min));
    if (max === null) parts.push(`${atom}*`);
    else {
      const rest = max - min;
      if (rest > 0 && rest <= REPETITION_CHUNK) parts.push(simpleRepeat(atom, 0, rest));
      else if (rest > REPETITION_CHUNK) {
        const q = Math.floor(rest / REPETITION_CHUNK);
        const r = rest % REPETITION_CHUNK;
        const below = `${simpleRepeat(chunk, 0, q - 1)} ${simpleRepeat(atom, 0, REPETITION_CHUNK - 1)}`;
        const top = `${simpleRepeat(chunk, q, q)}${r > 0 ? ` ${simpleRepeat(atom, 0, r)}` : ""}`;
        parts.push(this.rule(`${hint}-tail`, `${below.replace(/^"" /, "")} | ${top}`));
      }
    }
    return parts.join(" ");
  }

  /** The grammar text: `root` first, then the other rules in definition order, one per line. */
  render(): string {
    const lines: string[] = [];
    const root = this.rules.get("root");
    if (root === undefined || root === null) throw new Error("The grammar has no root rule");
    lines.push(`root ::= ${root}`);
    for (const [name, body] of this.rules) {
      if (name === "root") continue;
      if (body === null) throw new Error(`Rule ${name} was reserved but never defined`);
      lines.push(`${name} ::= ${body}`);
    }
    return `${lines.join("\n")}\n`;
  }
}

/** `atom{min,max}` in the shortest GBNF spelling (`?`, `*`, `+`, `{m}`, `{m,}`, `{m,n}`). */
function simpleRepeat(atom: string, min: number, max: number | null): string {
  if (max === 0) return '""';
  if (min === 0 && max === 1) return `${atom}?`;
  if (min === 0 && max === null) return `${atom}*`;
  if (min === 1 && max === null) return `${atom}+`;
  if (min === 1 && max === 1) return atom;
  if (max === min) return `${atom}{${min}}`;
  return `${atom}{${min},${max === null ? "" : max}}`;
}

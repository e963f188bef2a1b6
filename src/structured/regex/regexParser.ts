/**
 * A parser for the regular-expression subset guided decoding can compile to a grammar: the syntax vLLM and
 * outlines accept for `guided_regex` and JSON Schema `pattern` (Python `re` / ECMA-262 common ground), with
 * ECMA-262 meanings for `.`, `\d`, `\w`, `\s` (ASCII `\d`/`\w`; `.` excludes `\n`, `\r`, U+2028, U+2029).
 * Constructs whose meaning a context-free grammar cannot express (backreferences, lookaround, word
 * boundaries, possessive quantifiers, atomic groups, inline flags, Unicode properties) are refused.
 */
import { CodePointSet } from "./codePointSet.ts";

/**
 * A regex syntax tree. `set` matches one code point; `start`/`end` are the anchors `^`/`$` (`\A`, `\Z`,
 * `\z`); `look` is a lookahead `(?=item)` (or `(?!item)` when `negate`), which only the automata of
 * `regexAutomaton.ts` compile.
 */
export type RegexNode =
  | { type: "set"; set: CodePointSet }
  | { type: "seq"; items: RegexNode[] }
  | { type: "alt"; items: RegexNode[] }
  | { type: "repeat"; item: RegexNode; min: number; max: number | null }
  | { type: "start" }
  | { type: "end" }
  | { type: "look"; negate: boolean; item: RegexNode };

/** Why a pattern cannot be compiled: `unsupported` (valid regex, no grammar equivalent) or `invalid` syntax. */
export class RegexError extends Error {
  readonly kind: "unsupported" | "invalid";
  readonly position: number;
  /** The pattern at fault, where the thrower knows it among several. */
  pattern?: string;
  constructor(kind: "unsupported" | "invalid", message: string, position: number) {
    super(message);
    this.name = "RegexError";
    this.kind = kind;
    this.position = position;
  }
}

/** Any text (`[\s\S]*` over every code point): what an unanchored end admits under search semantics. */
export const ANY_TEXT: RegexNode = {
  type: "repeat",
  item: { type: "set", set: CodePointSet.all() },
  min: 0,
  max: null,
};

/** Largest `{m,n}` bound accepted in a pattern. */
export const MAX_REGEX_REPEAT = 100_000;

const DIGIT = CodePointSet.of([[0x30, 0x39]]);
const WORD = CodePointSet.of([
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]);
const SPACE = CodePointSet.of([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
]);
/** ECMA-262 `.` without the `s` flag: anything but line terminators. */
export const DOT = CodePointSet.of([
  [0x0a, 0x0a],
  [0x0d, 0x0d],
  [0x2028, 0x2029],
]).complement();

const CLASS_ESCAPES: Record<string, CodePointSet> = {
  d: DIGIT,
  D: DIGIT.complement(),
  w: WORD,
  W: WORD.complement(),
  s: SPACE,
  S: SPACE.complement(),
};
const SIMPLE_ESCAPES: Record<string, number> = { t: 9, n: 10, v: 11, f: 12, r: 13 };

const single = (cp: number): RegexNode => ({ type: "set", set: CodePointSet.of([[cp, cp]]) });

/** Parses `pattern` into a {@link RegexNode}. Throws {@link RegexError} naming the construct and its index. */
export function parseRegex(pattern: string): RegexNode {
  let pos = 0;
  const unsupported = (what: string, at = pos): never => {
    throw new RegexError("unsupported", `${what} is not supported in guided decoding`, at);
  };
  const invalid = (what: string, at = pos): never => {
    throw new RegexError("invalid", what, at);
  };
  const peek = (offset = 0): string | undefined => pattern[pos + offset];

  const readHex = (digits: number): number => {
    const text = pattern.slice(pos, pos + digits);
    if (text.length !== digits || !/^[0-9a-fA-F]+$/.test(text)) invalid(`expected ${digits} hex digits`);
    pos += digits;
    return Number.parseInt(text, 16);
  };

  /** Reads an escape after the backslash; returns a code point set (one char) or an anchor marker. */
  const readEscape = (inClass: boolean): CodePointSet | "start" | "end" => {
    const at = pos - 1;
    const c = pattern[pos];
    if (c === undefined) return invalid("trailing backslash", at);
    pos++;
    if (c in CLASS_ESCAPES) return CLASS_ESCAPES[c]!;
    if (c in SIMPLE_ESCAPES) return CodePointSet.of([[SIMPLE_ESCAPES[c]!, SIMPLE_ESCAPES[c]!]]);
    if (c === "b") return inClass ? CodePointSet.of([[8, 8]]) : unsupported("word boundary \\b", at);
    if (c === "B") return unsupported("non-word boundary \\B", at);
    if (c === "0") {
      if (/[0-9]/.test(peek() ?? "")) return unsupported("octal escape", at);
      return CodePointSet.of([[0, 0]]);
    }
    if (/[1-9]/.test(c)) return unsupported(`backreference \\${c}`, at);
    if (c === "k") return unsupported("named backreference \\k", at);
    if (c === "p" || c === "P") return unsupported(`Unicode property escape \\${c}`, at);
    if (c === "N") return unsupported("named character escape \\N", at);
    if (c === "A" && !inClass) return "start";
    if ((c === "Z" || c === "z") && !inClass) return "end";
    if (c === "x") {
      const cp = readHex(2);
      return CodePointSet.of([[cp, cp]]);
    }
    if (c === "u") {
      let cp: number;
      if (peek() === "{") {
        const close = pattern.indexOf("}", pos);
        if (close < 0) return invalid("unterminated \\u{...}", at);
        const text = pattern.slice(pos + 1, close);
        if (!/^[0-9a-fA-F]{1,6}$/.test(text)) return invalid("bad \\u{...} escape", at);
        cp = Number.parseInt(text, 16);
        if (cp > 0x10ffff) return invalid("code point out of range", at);
        pos = close + 1;
      } else {
        cp = readHex(4);
        // A surrogate pair written as two escapes is one code point (ECMA-262 with the `u` flag).
        const low = /^\\u([dD][c-fC-F][0-9a-fA-F]{2})/.exec(pattern.slice(pos));
        if (cp >= 0xd800 && cp <= 0xdbff && low !== null) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (Number.parseInt(low[1]!, 16) - 0xdc00);
          pos += 6;
        }
      }
      return CodePointSet.of([[cp, cp]]);
    }
    if (c === "U") {
      const cp = readHex(8);
      if (cp > 0x10ffff) return invalid("code point out of range", at);
      return CodePointSet.of([[cp, cp]]);
    }
    if (c === "c") {
      const letter = peek();
      if (letter === undefined || !/[a-zA-Z]/.test(letter)) return invalid("bad control escape \\c", at);
      pos++;
      const cp = letter.toUpperCase().charCodeAt(0) % 32;
      return CodePointSet.of([[cp, cp]]);
    }
    if (/[a-zA-Z0-9]/.test(c)) return unsupported(`unknown escape \\${c}`, at);
    const cp = pattern.codePointAt(pos - 1)!;
    if (cp > 0xffff) pos++;
    return CodePointSet.of([[cp, cp]]);
  };

  const readClass = (): RegexNode => {
    const at = pos;
    pos++; // [
    let negate = false;
    if (peek() === "^") {
      negate = true;
      pos++;
    }
    if (peek() === "]") {
      if (negate) {
        pos++;
        return { type: "set", set: CodePointSet.all() };
      }
      return unsupported("empty character class '[]' (write '\\]' for a literal ']')", at);
    }
    let set = CodePointSet.empty();
    const readItem = (): CodePointSet => {
      if (peek() === undefined) return invalid("unterminated character class", at);
      if (peek() === "[" && (peek(1) === ":" || peek(1) === "=" || peek(1) === ".")) {
        return unsupported("POSIX character class [[:...:]]");
      }
      if (peek() === "\\") {
        pos++;
        const escaped = readEscape(true);
        if (typeof escaped === "string") return invalid("anchor in character class");
        return escaped;
      }
      const cp = pattern.codePointAt(pos)!;
      pos += cp > 0xffff ? 2 : 1;
      return CodePointSet.of([[cp, cp]]);
    };
    while (peek() !== "]") {
      if (peek() === undefined) return invalid("unterminated character class", at);
      const itemStart = pos;
      const first = readItem();
      if (peek() === "-" && peek(1) !== "]" && peek(1) !== undefined) {
        pos++;
        const second = readItem();
        if (
          first.size === 1 &&
          second.size === 1 &&
          first.ranges.length === 1 &&
          second.ranges.length === 1
        ) {
          const low = first.ranges[0]![0];
          const high = second.ranges[0]![0];
          if (low > high) return invalid("character range out of order", itemStart);
          set = set.union(CodePointSet.of([[low, high]]));
        } else {
          // `[\d-z]`: a class escape cannot bound a range, so `-` is literal (ECMA-262 Annex B, Python).
          set = set.union(first).union(second).union(CodePointSet.chars("-"));
        }
      } else set = set.union(first);
    }
    pos++; // ]
    if (negate) set = set.complement();
    if (set.isEmpty) return unsupported("a character class that matches nothing", at);
    return { type: "set", set };
  };

  /** Reads `{m}`, `{m,}`, `{m,n}`, `{,n}` at pos if present; null (pos unchanged) when `{` is a literal. */
  const readBraces = (): [number, number | null] | null => {
    const match = /^\{(\d*)(,(\d*))?\}/.exec(pattern.slice(pos));
    if (!match || (match[1] === "" && (match[2] === undefined || match[3] === ""))) return null;
    const min = match[1] === "" ? 0 : Number(match[1]);
    const max = match[2] === undefined ? min : match[3] === "" ? null : Number(match[3]);
    if (min > MAX_REGEX_REPEAT || (max !== null && max > MAX_REGEX_REPEAT)) {
      unsupported(`a repetition count above ${MAX_REGEX_REPEAT}`);
    }
    if (max !== null && max < min) invalid("numbers out of order in {} quantifier");
    pos += match[0].length;
    return [min, max];
  };

  const parseAtom = (): RegexNode => {
    const c = peek()!;
    const at = pos;
    if (c === "(") {
      pos++;
      if (peek() === "?") {
        const next = peek(1);
        if (next === ":") pos += 2;
        else if (next === "=" || next === "!") {
          pos += 2;
          const inner = parseAlternation();
          if (peek() !== ")") invalid("missing closing parenthesis", at);
          pos++;
          return { type: "look", negate: next === "!", item: inner };
        } else if (next === "<" && (peek(2) === "=" || peek(2) === "!"))
          unsupported(`lookbehind (?<${peek(2)}`, at);
        else if (next === "<" || (next === "P" && peek(2) === "<")) {
          const close = pattern.indexOf(">", pos);
          if (close < 0) invalid("unterminated group name", at);
          pos = close + 1;
        } else if (next === "P" && peek(2) === "=") unsupported("named backreference (?P=", at);
        else if (next === ">") unsupported("atomic group (?>", at);
        else if (next === "#") unsupported("comment group (?#", at);
        else if (next === "(") unsupported("conditional group (?(", at);
        else unsupported("inline flags (?...)", at);
      }
      const inner = parseAlternation();
      if (peek() !== ")") invalid("missing closing parenthesis", at);
      pos++;
      // A group is one atom: `(a+)?` quantifies the group, which is not a "multiple repeat", and
      // `(?:^)*` or `(?:(?=a))?` quantify a group, which ECMA-262 allows (unlike `^*` and `(?=a)*`).
      const bare =
        inner.type === "repeat" || inner.type === "start" || inner.type === "end" || inner.type === "look";
      return bare ? { type: "seq", items: [inner] } : inner;
    }
    if (c === ")") return invalid("unbalanced parenthesis", at);
    if (c === "[") return readClass();
    if (c === ".") {
      pos++;
      return { type: "set", set: DOT };
    }
    if (c === "^") {
      pos++;
      return { type: "start" };
    }
    if (c === "$") {
      pos++;
      return { type: "end" };
    }
    if (c === "*" || c === "+" || c === "?") return invalid("nothing to repeat", at);
    if (c === "{" && readBraces() !== null) return invalid("nothing to repeat", at);
    if (c === "\\") {
      pos++;
      const escaped = readEscape(false);
      if (escaped === "start" || escaped === "end") return { type: escaped };
      return { type: "set", set: escaped };
    }
    const cp = pattern.codePointAt(pos)!;
    pos += cp > 0xffff ? 2 : 1;
    return single(cp);
  };

  const parseQuantified = (): RegexNode => {
    let node = parseAtom();
    for (;;) {
      const c = peek();
      const at = pos;
      let bounds: [number, number | null] | null = null;
      if (c === "*") bounds = [0, null];
      else if (c === "+") bounds = [1, null];
      else if (c === "?") bounds = [0, 1];
      if (bounds !== null) pos++;
      else if (c === "{") bounds = readBraces();
      if (bounds === null) return node;
      if (node.type === "start" || node.type === "end" || node.type === "look")
        invalid("nothing to repeat", at);
      if (node.type === "repeat") invalid("multiple repeat", at);
      if (peek() === "+") unsupported("possessive quantifier", pos);
      if (peek() === "?") pos++; // lazy: same language under full-match and search semantics
      node = repeatOf(node, bounds[0], bounds[1]);
      if (
        peek() === "*" ||
        peek() === "+" ||
        peek() === "?" ||
        (peek() === "{" && /^\{\d*,?\d*\}/.test(pattern.slice(pos)))
      ) {
        invalid("multiple repeat", pos);
      }
    }
  };

  const parseSequence = (): RegexNode => {
    const items: RegexNode[] = [];
    while (pos < pattern.length && peek() !== "|" && peek() !== ")") items.push(parseQuantified());
    return items.length === 1 ? items[0]! : { type: "seq", items };
  };

  const parseAlternation = (): RegexNode => {
    const items = [parseSequence()];
    while (peek() === "|") {
      pos++;
      items.push(parseSequence());
    }
    return items.length === 1 ? items[0]! : { type: "alt", items };
  };

  const tree = parseAlternation();
  if (pos < pattern.length) invalid("unbalanced parenthesis", pos);
  return generatableSets(tree);
}

const SURROGATES = CodePointSet.of([[0xd800, 0xdfff]]);
/** The code points UTF-8's lead byte ED reaches besides surrogates. */
const BELOW_SURROGATES = CodePointSet.of([[0xd000, 0xd7ff]]);

/**
 * `node` with the lone surrogates (U+D800-U+DFFF) taken out of each set that has no U+D000-U+D7FF, since
 * UTF-8 output cannot contain them: the grammar would otherwise allow the lead byte ED for them and then
 * no continuation (sets such as `.` or `[^a]` keep them; their other members follow ED). Throws RegexError
 * "unsupported" for a set of surrogates only.
 */
function generatableSets(node: RegexNode): RegexNode {
  switch (node.type) {
    case "set": {
      if (node.set.intersect(SURROGATES).isEmpty || !node.set.intersect(BELOW_SURROGATES).isEmpty)
        return node;
      const set = node.set.subtract(SURROGATES);
      if (set.isEmpty)
        throw new RegexError(
          "unsupported",
          "a character or class of lone surrogates only (UTF-8 output cannot contain them)",
          -1,
        );
      return { type: "set", set };
    }
    case "seq":
    case "alt": {
      const items = node.items.map(generatableSets);
      return items.every((item, i) => item === node.items[i]) ? node : { ...node, items };
    }
    case "repeat":
    case "look": {
      const item = generatableSets(node.item);
      return item === node.item ? node : { ...node, item };
    }
    default:
      return node;
  }
}

/**
 * `item{min,max}`, with a quantified group of one quantified item flattened where the language stays the
 * same (`(x+)+` → `x+`, `(x+)?` → `x*`, `(x?)*` → `x*`), so nested quantifiers do not make the grammar
 * ambiguous; other nestings (`(x{2,3}){4}`) stay nested.
 */
function repeatOf(item: RegexNode, min: number, max: number | null): RegexNode {
  const inner = item.type === "seq" && item.items.length === 1 ? item.items[0]! : item;
  if (inner.type === "repeat") {
    if (inner.max === null && min >= 1) return { ...inner, min: inner.min * min };
    if (inner.max === null && inner.min <= 1 && (max === null || max >= 1)) return { ...inner, min: 0 };
    if (inner.min === 0 && inner.max === 1 && (max === null || max >= 1)) return { ...inner, max };
  }
  return { type: "repeat", item, min, max };
}

/**
 * Splits a parsed pattern into top-level alternatives with their anchors: `^a|b$` → `[{a, start}, {b, end}]`.
 * Anchors anywhere else are refused (RegexError "unsupported"), since guided decoding matches whole outputs.
 */
export function splitAnchors(tree: RegexNode): { node: RegexNode; start: boolean; end: boolean }[] {
  const alternatives = tree.type === "alt" ? tree.items : [tree];
  return alternatives.map((alt) => {
    const items = alt.type === "seq" ? [...alt.items] : [alt];
    let start = false;
    let end = false;
    while (items[0]?.type === "start") {
      items.shift();
      start = true;
    }
    while (items[items.length - 1]?.type === "end") {
      items.pop();
      end = true;
    }
    for (const item of items) assertNoAnchor(item);
    return { node: items.length === 1 ? items[0]! : { type: "seq", items }, start, end };
  });
}

function assertNoAnchor(node: RegexNode): void {
  if (node.type === "look") throw new RegexError("unsupported", "lookahead", -1);
  if (node.type === "start" || node.type === "end") {
    throw new RegexError(
      "unsupported",
      `anchor '${node.type === "start" ? "^" : "$"}' inside the pattern is not supported in guided decoding (anchors are allowed only at its ends)`,
      -1,
    );
  }
  if (node.type === "seq" || node.type === "alt") for (const item of node.items) assertNoAnchor(item);
  if (node.type === "repeat") assertNoAnchor(node.item);
}

const lengthBoundsCache = new WeakMap<RegexNode, { min: number; max: number | null }>();

/** Shortest and longest match length of `node` in code points (`max` null: unbounded). Anchors count 0. */
export function regexLengthBounds(node: RegexNode): { min: number; max: number | null } {
  let bounds = lengthBoundsCache.get(node);
  if (bounds === undefined) {
    bounds = computeLengthBounds(node);
    lengthBoundsCache.set(node, bounds);
  }
  return bounds;
}

function computeLengthBounds(node: RegexNode): { min: number; max: number | null } {
  switch (node.type) {
    case "set":
      return { min: 1, max: 1 };
    case "start":
    case "end":
    case "look":
      return { min: 0, max: 0 };
    case "seq":
      return node.items
        .map(regexLengthBounds)
        .reduce(
          (a, b) => ({ min: a.min + b.min, max: a.max === null || b.max === null ? null : a.max + b.max }),
          { min: 0, max: 0 },
        );
    case "alt": {
      const all = node.items.map(regexLengthBounds);
      return {
        min: Math.min(...all.map((b) => b.min)),
        max: all.some((b) => b.max === null) ? null : Math.max(...all.map((b) => b.max!)),
      };
    }
    case "repeat": {
      const inner = regexLengthBounds(node.item);
      return {
        min: inner.min * node.min,
        max: inner.max === 0 ? 0 : node.max === null || inner.max === null ? null : inner.max * node.max,
      };
    }
  }
}

/**
 * The matches of `node` whose length in code points lies in `[min, max]` (`max` null: unbounded), as a tree:
 * `node` itself when all its matches already fit, null when none does, or undefined when this function
 * cannot express the intersection exactly. Exact cases: alternatives (each restricted), a sequence in which
 * at most one item has a variable length (that item gets the remaining bounds), and a repetition of an item
 * of fixed width (its count is bounded). Example: `[a-z][a-z0-9]*` with lengths 3..8 → `[a-z][a-z0-9]{2,7}`.
 */
export function restrictLength(
  node: RegexNode,
  min: number,
  max: number | null,
): RegexNode | null | undefined {
  const own = regexLengthBounds(node);
  if (own.min >= min && max !== null && own.max !== null && own.max <= max) return node;
  if (own.min >= min && max === null) return node;
  if ((max !== null && own.min > max) || (own.max !== null && own.max < min)) return null;
  switch (node.type) {
    case "alt": {
      const items: RegexNode[] = [];
      for (const item of node.items) {
        const restricted = restrictLength(item, min, max);
        if (restricted === undefined) return undefined;
        if (restricted !== null) items.push(restricted);
      }
      if (items.length === 0) return null;
      return items.length === 1 ? items[0]! : { type: "alt", items };
    }
    case "seq": {
      const bounds = node.items.map(regexLengthBounds);
      const variable = bounds.flatMap((b, i) => (b.min === b.max ? [] : [i]));
      if (variable.length !== 1) return undefined;
      const v = variable[0]!;
      const fixed = bounds.reduce((sum, b, i) => (i === v ? sum : sum + b.min), 0);
      const restricted = restrictLength(
        node.items[v]!,
        Math.max(0, min - fixed),
        max === null ? null : max - fixed,
      );
      if (restricted === undefined || restricted === null) return restricted;
      return { type: "seq", items: node.items.map((item, i) => (i === v ? restricted : item)) };
    }
    case "repeat": {
      const width = regexLengthBounds(node.item);
      if (width.max !== width.min || width.min === 0) return undefined;
      const w = width.min;
      const low = Math.max(node.min, Math.ceil(min / w));
      const high =
        max === null ? node.max : Math.min(node.max ?? Number.POSITIVE_INFINITY, Math.floor(max / w));
      if (high !== null && low > high) return null;
      return { type: "repeat", item: node.item, min: low, max: high };
    }
    default:
      return undefined;
  }
}

/**
 * A narrowing of `node` whose matches all have lengths in `[min, max]` (code points; `max` null: unbounded):
 * a tree matching a subset of `node`'s strings. For `max`, each unbounded repetition is first bounded by
 * `max`; then, one step at a time, the repetition that has kept the largest share of its free count
 * (`max - min`) loses a quarter of it (ties: the one adding most to the longest match), so counts shrink
 * evenly; a repetition of repetitions keeps at least one free count while others can shrink. For `min`, the
 * minimum of the repetition with the most room is raised until the shortest match reaches `min`. Null when
 * it cannot (e.g. a fixed part longer than `max`). Used where {@link restrictLength} cannot intersect
 * exactly; the result is checked with {@link regexLengthBounds}, so it never admits a string outside the
 * bounds.
 */
export function narrowLength(node: RegexNode, min: number, max: number | null): RegexNode | null {
  let tree = max === null ? node : boundRepeats(node, max);
  if (max !== null) {
    // The free count each repetition started with, to shrink them evenly in relative terms.
    const original = new Map<RegexNode, number>();
    for (const r of repeatsOf(tree)) original.set(r, (r.max ?? r.min) - r.min);
    for (let step = 0; ; step++) {
      const own = regexLengthBounds(tree);
      if (own.min > max || step > 2_000) return null;
      if (own.max !== null && own.max <= max) break;
      const picked = mostRetained(tree, original);
      if (picked.length === 0) return null;
      // A quarter of each free count, or half while the longest match is still over twice the maximum.
      const part = own.max === null || own.max > 2 * max ? 2 : 4;
      const replacements = new Map<RegexNode, RepeatNode>();
      for (const r of picked) {
        const cut = Math.max(1, Math.ceil(((r.max as number) - r.min) / part));
        replacements.set(r, { ...r, max: (r.max as number) - cut });
      }
      tree = replaceRepeats(tree, replacements, original);
    }
  }
  if (regexLengthBounds(tree).min < min) {
    const raised = raiseMin(tree, min);
    if (raised === null) return null;
    tree = raised;
  }
  const own = regexLengthBounds(tree);
  if (own.min < min || (max !== null && (own.max === null || own.max > max))) return null;
  return tree;
}

type RepeatNode = Extract<RegexNode, { type: "repeat" }>;

/** `node` with each unbounded repetition bounded by `limit` (a narrowing that keeps matches up to `limit`). */
function boundRepeats(node: RegexNode, limit: number): RegexNode {
  switch (node.type) {
    case "seq":
      return { type: "seq", items: node.items.map((item) => boundRepeats(item, limit)) };
    case "alt": {
      // An alternative longer than the limit at its shortest never fits: dropping it is exact.
      const items = node.items.filter((item) => regexLengthBounds(item).min <= limit);
      return {
        type: "alt",
        items: (items.length > 0 ? items : node.items).map((i) => boundRepeats(i, limit)),
      };
    }
    case "repeat":
      return {
        ...node,
        item: boundRepeats(node.item, limit),
        max: node.max === null ? Math.max(node.min, limit) : node.max,
      };
    default:
      return node;
  }
}

/**
 * The repetitions to shrink next (see {@link narrowLength}): among those with a free count, the ones with the
 * largest share of their `original` free count left (with a single one, ties go to the largest share of the
 * longest match); repetitions of repetitions down to one free count only when nothing else can shrink.
 * Empty when none can.
 */
function mostRetained(tree: RegexNode, original: Map<RegexNode, number>): RepeatNode[] {
  const free: { r: RepeatNode; kept: number; nested: boolean }[] = [];
  const visit = (n: RegexNode): void => {
    if (n.type === "repeat") {
      const width = regexLengthBounds(n.item).max ?? 0;
      if (n.max !== null && n.max > n.min && width > 0) {
        free.push({
          r: n,
          kept: (n.max - n.min) / Math.max(1, original.get(n) ?? n.max - n.min),
          nested: hasRepeat(n.item) && n.max - n.min <= 1,
        });
      }
      visit(n.item);
    } else if (n.type === "seq" || n.type === "alt") for (const item of n.items) visit(item);
  };
  visit(tree);
  const preferred = free.filter((f) => !f.nested);
  const pool = preferred.length > 0 ? preferred : free;
  const most = Math.max(...pool.map((f) => f.kept));
  return pool.filter((f) => f.kept >= most - 1e-9).map((f) => f.r);
}

/** `tree` with the repetitions in `replacements` replaced; each replacement inherits its entry in `original`. */
function replaceRepeats(
  tree: RegexNode,
  replacements: Map<RegexNode, RepeatNode>,
  original: Map<RegexNode, number>,
): RegexNode {
  for (const [target, replacement] of replacements) original.set(replacement, original.get(target) ?? 0);
  const swap = (n: RegexNode): RegexNode => {
    const replaced = replacements.get(n);
    if (n.type === "seq" || n.type === "alt") {
      const items = n.items.map(swap);
      return items.every((item, i) => item === n.items[i]) ? n : { type: n.type, items };
    }
    if (n.type === "repeat") {
      const base = replaced ?? n;
      const item = swap(n.item);
      if (item === n.item) return base;
      const rebuilt = { ...base, item };
      original.set(rebuilt, original.get(n) ?? 0);
      return rebuilt;
    }
    return n;
  };
  return swap(tree);
}

/**
 * A narrowing of `node` whose shortest match is at least `need` code points, or null: alternatives are raised
 * each (those that cannot be are dropped), a sequence raises its items with the most room first, and a
 * repetition raises its count (or, for an item of variable width, the item).
 */
function raiseMin(node: RegexNode, need: number): RegexNode | null {
  const own = regexLengthBounds(node);
  if (own.min >= need) return node;
  if (own.max !== null && own.max < need) return null;
  switch (node.type) {
    case "alt": {
      const items = node.items.flatMap((item) => raiseMin(item, need) ?? []);
      return items.length === 0 ? null : items.length === 1 ? items[0]! : { type: "alt", items };
    }
    case "seq": {
      const items = [...node.items];
      const room = (n: RegexNode): number => {
        const b = regexLengthBounds(n);
        return b.max === null ? Number.POSITIVE_INFINITY : b.max - b.min;
      };
      const order = items.map((_, i) => i).sort((a, b) => room(items[b]!) - room(items[a]!));
      let deficit = need - own.min;
      for (const i of order) {
        if (deficit <= 0) break;
        const item = items[i]!;
        const b = regexLengthBounds(item);
        const target = b.max === null ? b.min + deficit : Math.min(b.max, b.min + deficit);
        const raised = raiseMin(item, target);
        if (raised === null) continue;
        deficit -= regexLengthBounds(raised).min - b.min;
        items[i] = raised;
      }
      return deficit > 0 ? null : { type: "seq", items };
    }
    case "repeat": {
      const width = regexLengthBounds(node.item);
      if (width.min > 0) {
        const count = Math.ceil(need / width.min);
        if (node.max === null || count <= node.max) return { ...node, min: Math.max(node.min, count) };
      }
      const times = Math.max(node.min, 1);
      if (node.max !== null && node.max < times) return null;
      const item = raiseMin(node.item, Math.ceil(need / (node.max ?? times)));
      if (item === null) return null;
      const raised: RegexNode = { ...node, item, min: times };
      return regexLengthBounds(raised).min >= need ? raised : raiseMin(raised, need);
    }
    default:
      return null;
  }
}

const hasRepeatCache = new WeakMap<RegexNode, boolean>();

/** True when `node` contains a repetition (cached per node). */
function hasRepeat(node: RegexNode): boolean {
  let known = hasRepeatCache.get(node);
  if (known === undefined) {
    known =
      node.type === "repeat" || ((node.type === "seq" || node.type === "alt") && node.items.some(hasRepeat));
    hasRepeatCache.set(node, known);
  }
  return known;
}

/** Every repetition in `node`, outermost first. */
function repeatsOf(node: RegexNode, out: RepeatNode[] = []): RepeatNode[] {
  if (node.type === "repeat") {
    out.push(node);
    repeatsOf(node.item, out);
  } else if (node.type === "seq" || node.type === "alt") for (const item of node.items) repeatsOf(item, out);
  return out;
}

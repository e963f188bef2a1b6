/**
 * A TypeScript port of llama.cpp's GBNF parser (`llama_grammar_parser::parse` in `src/llama-grammar.cpp`, the
 * version node-llama-cpp 3.21.1 builds) plus the checks `llama_grammar_init_impl` runs after parsing (root
 * present, no undefined rule, no left recursion). It reproduces the parser's messages ("expecting ')' at
 * ...", "Undefined rule identifier 'x'", ...).
 *
 * Why a port when the native check (`engine/grammar.ts` `checkGrammar`) returns llama.cpp's own message:
 * the bounds that keep llama.cpp's sampler from freezing (`maxFanOut`, the nullable-rules fixpoint,
 * `GBNF_LIMITS` in `validateGbnf.ts`) need the parsed rules, which the native check does not expose, and
 * the port runs on the compiler's worker thread, which does not load the addon. The native check stays the
 * final judge of validity (`confirmGbnf`, once per distinct grammar, cached). Measured (issue 30) over the
 * 209 grammars the fixtures compile to (test/fixtures/schemas, regex.json, grammars; 141 KiB): this port,
 * bounds included, 151 µs a grammar; the native check 70 µs; the two agree on all 209 (a 22 kB grammar:
 * 0.49 ms vs 0.36 ms). Neither cost matters beside compilation, so both stay: the port for bounds and
 * positioned messages, the native parser as the judge.
 */

/** llama.cpp's `MAX_REPETITION_THRESHOLD`. */
const MAX_REPETITION_THRESHOLD = 2000;

/** A GBNF text that llama.cpp would reject; `message` is llama.cpp's, `offset` the UTF-16 index where it failed. */
export class GbnfSyntaxError extends Error {
  readonly offset: number;
  constructor(message: string, offset: number) {
    super(message);
    this.name = "GbnfSyntaxError";
    this.offset = offset;
  }
}

/**
 * One parsed grammar element: {@link TERMINAL} (a literal char, class, token or `.`) or the id (>= 0) of the
 * rule it references. Plain numbers, so that parsing a large grammar allocates no object per element.
 */
type Element = number;
/** The element of every terminal. */
const TERMINAL = -1;
/** A rule: its alternatives, each a sequence of elements. */
type Rule = Element[][];
/** The empty alternative (shared: alternatives are not changed once their rule is added). */
const EMPTY: Element[] = [];
/** An alternative cut after its first element, a terminal (shared, like {@link EMPTY}). */
const FIRST_TERMINAL: Element[] = [TERMINAL];

/** `alt` up to its first terminal (its whole self when it has none, or that is its last element). */
function leading(alt: Element[]): Element[] {
  if (alt.length === 0) return EMPTY;
  if (alt[0] === TERMINAL) return FIRST_TERMINAL;
  const end = alt.indexOf(TERMINAL);
  return end < 0 || end === alt.length - 1 ? alt : alt.slice(0, end + 1);
}

/** What {@link checkGbnf} learned about a valid grammar. */
export type GbnfInfo = {
  /** Number of rules after llama.cpp's rewriting of groups and repetitions. */
  ruleCount: number;
  /** Names of the rules written in the text. */
  ruleNames: string[];
  /** Alternatives of every rule together (llama.cpp's rewriting included). */
  alternativeCount: number;
  /**
   * The most parse stacks one rule reference expands to (see {@link stackFanOut}): what llama.cpp's
   * sampler walks for every candidate token at that point, its cost per step. Saturates at 2^31.
   */
  maxFanOut: number;
};

const SPACE = 32;
const TAB = 9;
const LF = 10;
const CR = 13;
const HASH = 35;
const QUOTE = 34;
const BACKSLASH = 92;

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9";
/** Whether UTF-16 unit `code` is in llama.cpp's rule-name alphabet `[a-zA-Z0-9-]` (NaN past the end: no). */
const isWordCode = (code: number): boolean =>
  (code >= 97 && code <= 122) || (code >= 65 && code <= 90) || (code >= 48 && code <= 57) || code === 45;
const isHexCode = (code: number): boolean =>
  (code >= 48 && code <= 57) || (code >= 97 && code <= 102) || (code >= 65 && code <= 70);

/**
 * Parses and checks a GBNF grammar the way llama.cpp 's parser does, with no vocabulary (as node-llama-cpp's
 * `AddonGrammar` does: token references are accepted only as `<[123]>`). Returns rule counts; throws
 * {@link GbnfSyntaxError} with llama.cpp's message on any error.
 */
export function checkGbnf(text: string, rootRule = "root"): GbnfInfo {
  return parseGbnf(text, rootRule, false);
}

/**
 * {@link checkGbnf}. Without `whole`, each alternative is kept only up to its first terminal (all that the
 * left-recursion check reads), so that a large grammar leaves little for the garbage collector to copy; an
 * undefined rule is then found again with whole alternatives, for llama.cpp's message naming the same rule.
 */
function parseGbnf(text: string, rootRule: string, whole: boolean): GbnfInfo {
  const src = text;
  /**
   * Per id, the rule's name, or for a rule llama.cpp generates (groups, repetitions) the name it derives it
   * from: llama.cpp names those `<base>_<id>`, which no written name can equal (`_` is not in the name
   * alphabet), so only the count of ids matters and the names are spelled out only for an error message.
   */
  const idNames: string[] = [];
  const generated: boolean[] = [];
  const rules: (Rule | undefined)[] = [];
  const written: string[] = [];
  const nameOf = (id: number): string => (generated[id] ? `${idNames[id]}_${id}` : idNames[id]!);

  const at = (pos: number): string => {
    const rest = src.slice(pos);
    if (rest.trim() === "") return "end of input";
    return rest.length > 60 ? `${rest.slice(0, 60)}...` : rest;
  };
  const fail = (message: string, pos: number): never => {
    throw new GbnfSyntaxError(message, pos);
  };
  /** Ids of written names by a hash of their text (so that a name seen before is found without slicing). */
  const byHash = new Map<number, number[]>();
  /** Where the name {@link symbolAt} read last ends. */
  let nameEnd = 0;
  /**
   * The id of the name written at `start` (in llama.cpp's name alphabet; its end is left in `nameEnd`),
   * made on first sight (as llama.cpp's `get_symbol_id`). Fails "expecting name" where there is none.
   */
  const symbolAt = (start: number): number => {
    let end = start;
    let hash = 0;
    for (let code = src.charCodeAt(end); isWordCode(code); code = src.charCodeAt(++end))
      hash = (Math.imul(hash, 31) + code) | 0;
    if (end === start) fail(`expecting name at ${at(start)}`, start);
    nameEnd = end;
    let ids = byHash.get(hash);
    if (ids !== undefined) {
      for (const id of ids) {
        const name = idNames[id]!;
        if (name.length === end - start && src.startsWith(name, start)) return id;
      }
    } else {
      ids = [];
      byHash.set(hash, ids);
    }
    const name = src.slice(start, end);
    const id = idNames.length;
    idNames.push(name);
    generated.push(false);
    ids.push(id);
    return id;
  };
  const generateSymbolId = (base: string): number => {
    const id = idNames.length;
    idNames.push(base);
    generated.push(true);
    return id;
  };
  const addRule = (id: number, rule: Rule): void => {
    if (!whole) for (let i = 0; i < rule.length; i++) rule[i] = leading(rule[i]!);
    rules[id] = rule;
  };

  const parseSpace = (pos: number, newlineOk: boolean): number => {
    let p = pos;
    for (;;) {
      const c = src.charCodeAt(p);
      if (c === SPACE || c === TAB) p++;
      else if (c === HASH) {
        while (p < src.length && src.charCodeAt(p) !== CR && src.charCodeAt(p) !== LF) p++;
      } else if (newlineOk && (c === CR || c === LF)) p++;
      else return p;
    }
  };
  const parseInteger = (pos: number): number => {
    let p = pos;
    while (isDigit(src[p])) p++;
    if (p === pos) fail(`expecting integer at ${at(pos)}`, pos);
    return p;
  };
  const parseHex = (pos: number, size: number): number => {
    let p = pos;
    while (p < pos + size && isHexCode(src.charCodeAt(p))) p++;
    if (p !== pos + size) fail(`expecting ${size} hex chars at ${at(pos)}`, pos);
    return p;
  };
  /** Returns the position after one (possibly escaped) character. */
  const parseChar = (pos: number): number => {
    if (src[pos] === "\\") {
      const e = src[pos + 1];
      if (e === "x") return parseHex(pos + 2, 2);
      if (e === "u") return parseHex(pos + 2, 4);
      if (e === "U") return parseHex(pos + 2, 8);
      if (e !== undefined && 'trn\\"[]-'.includes(e)) return pos + 2;
      return fail(`unknown escape at ${at(pos)}`, pos);
    }
    if (pos < src.length) return pos + (src.codePointAt(pos)! > 0xffff ? 2 : 1);
    return fail("unexpected end of input", pos);
  };
  const parseToken = (pos: number): number => {
    let p = pos;
    if (src[p] !== "<") fail(`expecting '<' at ${at(p)}`, p);
    p++;
    if (src[p] === "[") {
      p = parseInteger(p + 1);
      if (src[p] !== "]") fail(`expecting ']' at ${at(p)}`, p);
      p++;
      if (src[p] !== ">") fail(`expecting '>' at ${at(p)}`, p);
      return p + 1;
    }
    return fail(`no vocab to parse token at ${at(pos)}`, pos);
  };

  /**
   * llama.cpp's `handle_repetitions`: the symbol of `alt` from `lastSymStart` repeated `minTimes` to
   * `maxTimes` (null: unbounded) times, as generated rules; returns the new `nPrevRules`.
   */
  const repeat = (
    alt: Element[],
    lastSymStart: number,
    nPrevRules: number,
    ruleName: string,
    minTimes: number,
    maxTimes: number | null,
    pos: number,
  ): number => {
    if (lastSymStart === alt.length) fail(`expecting preceding item to */+/?/{ at ${at(pos)}`, pos);
    const prev = alt.slice(lastSymStart);
    let totalRules = 1;
    if (maxTimes !== null && maxTimes > 0) totalRules = maxTimes;
    else if (minTimes > 0) totalRules = minTimes;
    if (nPrevRules * totalRules >= MAX_REPETITION_THRESHOLD) {
      fail(
        "number of rules that are going to be repeated multiplied by the new repetition exceeds sane defaults, please reduce the number of repetitions or rule complexity",
        pos,
      );
    }
    if (minTimes === 0) alt.length = lastSymStart;
    else for (let i = 1; i < minTimes; i++) for (const el of prev) alt.push(el);
    const nOpt = maxTimes === null ? 1 : maxTimes - minTimes;
    let lastRecId = 0;
    for (let i = 0; i < nOpt; i++) {
      const recId = generateSymbolId(ruleName);
      // (Rules are not changed once added: the first one can be `prev` itself, all share the empty one.)
      let first = prev;
      if (i > 0 || maxTimes === null) {
        first = prev.slice();
        first.push(maxTimes === null ? recId : lastRecId);
      }
      addRule(recId, [first, EMPTY]);
      lastRecId = recId;
    }
    if (nOpt > 0) alt.push(lastRecId);
    return nPrevRules * totalRules;
  };

  const parseSequence = (start: number, ruleName: string, alt: Element[], nested: boolean): number => {
    let lastSymStart = alt.length;
    let pos = start;
    let nPrevRules = 1;

    while (pos < src.length) {
      const code = src.charCodeAt(pos);
      if (code === QUOTE) {
        pos++;
        lastSymStart = alt.length;
        nPrevRules = 1;
        // One element for the whole literal: only whether an alternative starts with a terminal (and
        // whether it is empty) matters to the checks, and a literal of n characters is n terminals in a row.
        // (Characters other than `\` advance one UTF-16 unit: a surrogate is never `"` or `\`.)
        const literalStart = pos;
        for (let unit = src.charCodeAt(pos); unit !== QUOTE; unit = src.charCodeAt(pos)) {
          if (pos >= src.length) fail("unexpected end of input", pos);
          pos = unit === BACKSLASH ? parseChar(pos) : pos + 1;
        }
        if (pos > literalStart) alt.push(TERMINAL);
        pos = parseSpace(pos + 1, nested);
        continue;
      }
      if (isWordCode(code)) {
        const id = symbolAt(pos);
        pos = parseSpace(nameEnd, nested);
        lastSymStart = alt.length;
        nPrevRules = 1;
        alt.push(id);
        continue;
      }
      const c = src[pos];
      if (c === "[") {
        pos++;
        if (src[pos] === "^") pos++;
        lastSymStart = alt.length;
        nPrevRules = 1;
        while (src[pos] !== "]") {
          if (pos >= src.length) fail("unexpected end of input", pos);
          pos = parseChar(pos);
          if (alt.length === lastSymStart) alt.push(TERMINAL);
          if (src[pos] === "-" && src[pos + 1] !== "]") {
            if (pos + 1 >= src.length) fail("unexpected end of input", pos);
            pos = parseChar(pos + 1);
          }
        }
        pos = parseSpace(pos + 1, nested);
      } else if (c === "<" || c === "!") {
        if (c === "!") pos++;
        const end = parseToken(pos);
        lastSymStart = alt.length;
        nPrevRules = 1;
        alt.push(TERMINAL);
        pos = parseSpace(end, nested);
      } else if (c === "(") {
        pos = parseSpace(pos + 1, true);
        const before = idNames.length;
        const subId = generateSymbolId(ruleName);
        pos = parseAlternates(pos, ruleName, subId, true);
        nPrevRules = Math.max(1, idNames.length - before);
        lastSymStart = alt.length;
        alt.push(subId);
        if (src[pos] !== ")") fail(`expecting ')' at ${at(pos)}`, pos);
        pos = parseSpace(pos + 1, nested);
      } else if (c === ".") {
        lastSymStart = alt.length;
        nPrevRules = 1;
        alt.push(TERMINAL);
        pos = parseSpace(pos + 1, nested);
      } else if (c === "*" || c === "+" || c === "?") {
        pos = parseSpace(pos + 1, nested);
        nPrevRules = repeat(
          alt,
          lastSymStart,
          nPrevRules,
          ruleName,
          c === "+" ? 1 : 0,
          c === "?" ? 1 : null,
          pos,
        );
      } else if (c === "{") {
        pos = parseSpace(pos + 1, nested);
        if (!isDigit(src[pos])) fail(`expecting an int at ${at(pos)}`, pos);
        let intEnd = parseInteger(pos);
        const minTimes = Number(src.slice(pos, intEnd));
        pos = parseSpace(intEnd, nested);
        let maxTimes: number | null = null;
        if (src[pos] === "}") {
          maxTimes = minTimes;
          pos = parseSpace(pos + 1, nested);
        } else if (src[pos] === ",") {
          pos = parseSpace(pos + 1, nested);
          if (isDigit(src[pos])) {
            intEnd = parseInteger(pos);
            maxTimes = Number(src.slice(pos, intEnd));
            pos = parseSpace(intEnd, nested);
          }
          if (src[pos] !== "}") fail(`expecting '}' at ${at(pos)}`, pos);
          pos = parseSpace(pos + 1, nested);
        } else {
          fail(`expecting ',' at ${at(pos)}`, pos);
        }
        if (minTimes > MAX_REPETITION_THRESHOLD) {
          fail("number of repetitions exceeds sane defaults, please reduce the number of repetitions", pos);
        }
        if (maxTimes !== null && maxTimes > MAX_REPETITION_THRESHOLD) maxTimes = null;
        nPrevRules = repeat(alt, lastSymStart, nPrevRules, ruleName, minTimes, maxTimes, pos);
      } else break;
    }
    return pos;
  };

  const parseAlternates = (start: number, ruleName: string, ruleId: number, nested: boolean): number => {
    const rule: Rule = [];
    let alt: Element[] = [];
    let pos = parseSequence(start, ruleName, alt, nested);
    rule.push(alt);
    while (src[pos] === "|") {
      pos = parseSpace(pos + 1, true);
      alt = [];
      pos = parseSequence(pos, ruleName, alt, nested);
      rule.push(alt);
    }
    addRule(ruleId, rule);
    return pos;
  };

  const parseRule = (start: number): number => {
    const id = symbolAt(start);
    let pos = parseSpace(nameEnd, false);
    const name = idNames[id]!;
    written.push(name);
    if (src.slice(pos, pos + 3) !== "::=") fail(`expecting ::= at ${at(pos)}`, pos);
    pos = parseSpace(pos + 3, true);
    pos = parseAlternates(pos, name, id, false);
    if (src[pos] === "\r") pos += src[pos + 1] === "\n" ? 2 : 1;
    else if (src[pos] === "\n") pos++;
    else if (pos < src.length) fail(`expecting newline or end at ${at(pos)}`, pos);
    return parseSpace(pos, true);
  };

  let pos = parseSpace(0, true);
  while (pos < src.length) pos = parseRule(pos);

  // Every id without a rule was made by a reference to a name that is never defined: with none, every
  // element's rule exists (each id is made by a reference or a definition), and the scan below, which
  // names the first undefined one as llama.cpp does, is needed only on the second parse.
  if (!whole && (rules.length < idNames.length || rules.includes(undefined)))
    return parseGbnf(text, rootRule, true);
  for (let id = 0; whole && id < rules.length; id++) {
    const rule = rules[id];
    if (rule === undefined)
      throw new GbnfSyntaxError(`Undefined rule identifier '${nameOf(id)}'`, src.length);
    for (const alt of rule) {
      for (const el of alt) {
        if (el !== TERMINAL && rules[el] === undefined) {
          throw new GbnfSyntaxError(`Undefined rule identifier '${nameOf(el)}'`, src.length);
        }
      }
    }
  }
  const rootId = idNames.findIndex((name, id) => !generated[id] && name === rootRule);
  if (rootId < 0 || rules[rootId] === undefined) {
    throw new GbnfSyntaxError(`grammar does not contain a '${rootRule}' symbol`, src.length);
  }
  const leftRecursive = findLeftRecursion(rules as Rule[]);
  if (leftRecursive !== null) {
    throw new GbnfSyntaxError(
      `unsupported grammar, left recursion detected for nonterminal '${nameOf(leftRecursive)}'`,
      src.length,
    );
  }
  const fanOut = stackFanOut(rules as Rule[]);
  let maxFanOut = 0;
  let alternativeCount = 0;
  for (let id = 0; id < rules.length; id++) {
    maxFanOut = Math.max(maxFanOut, fanOut[id]!);
    alternativeCount += rules[id]!.length;
  }
  return { ruleCount: rules.length, ruleNames: written, alternativeCount, maxFanOut };
}

/** Where {@link stackFanOut} saturates. */
const FAN_OUT_CEILING = 2 ** 31;

/**
 * Per rule, the parse stacks llama.cpp's `llama_grammar_advance_stack` makes when it expands the rule:
 * one per alternative that starts with a terminal (or is empty), plus for an alternative that starts
 * with a reference that rule's fan-out (and, when that rule may be empty, the next element's too).
 * Nested alternations multiply: `a ::= b | b`, `b ::= c | c`, ... doubles per level. An upper
 * estimate (llama.cpp merges equal stacks); saturates at 2^31. The leftmost-reference graph is acyclic
 * (left recursion was refused), so one post-order walk over it computes every rule once.
 */
function stackFanOut(rules: Rule[]): Float64Array {
  const mayBeEmpty = nullableRules(rules);
  const fanOut = new Float64Array(rules.length).fill(-1);
  /** The fan-out of `alt` from element `index`, or the id of a rule still to compute first. */
  const sequence = (alt: Element[], index: number): number | { needs: number } => {
    let total = 0;
    for (let i = index; i < alt.length; i++) {
      const el = alt[i]!;
      if (el === TERMINAL) return total + 1;
      const known = fanOut[el]!;
      if (known < 0) return { needs: el };
      total += known;
      if (!mayBeEmpty[el]) return total;
    }
    return total + 1;
  };
  const stack: number[] = [];
  const onStack = new Uint8Array(rules.length);
  for (let start = 0; start < rules.length; start++) {
    if (fanOut[start]! >= 0) continue;
    stack.push(start);
    onStack[start] = 1;
    while (stack.length > 0) {
      const id = stack[stack.length - 1]!;
      let total = 0;
      let pending: number | undefined;
      for (const alt of rules[id]!) {
        const part = sequence(alt, 0);
        if (typeof part !== "number") {
          pending = part.needs;
          break;
        }
        total = Math.min(total + part, FAN_OUT_CEILING);
      }
      if (pending !== undefined && onStack[pending] === 0) {
        stack.push(pending);
        onStack[pending] = 1;
        continue;
      }
      // The walk follows the leftmost-reference edges, which have no cycle (left recursion was refused);
      // should one appear anyway, the rule on the stack counts as one stack, so the walk still ends.
      if (pending !== undefined) fanOut[pending] = 1;
      fanOut[id] = total + (pending !== undefined ? 1 : 0);
      stack.pop();
      onStack[id] = 0;
    }
  }
  return fanOut;
}

/**
 * Per rule, whether it can match the empty text: it has an alternative whose elements are all rules that
 * can (a fixpoint; `r ::= s s`, `s ::= "a" | ""` makes `r` nullable too). llama.cpp's stack expansion
 * passes through such rules to the next element, so nested nullable rules multiply its stacks.
 */
function nullableRules(rules: Rule[]): boolean[] {
  const nullable = rules.map((rule) => rule.some((alt) => alt.length === 0));
  for (let changed = true; changed; ) {
    changed = false;
    rules.forEach((rule, id) => {
      if (nullable[id]) return;
      if (rule.some((alt) => alt.every((el) => el !== TERMINAL && nullable[el]))) {
        nullable[id] = true;
        changed = true;
      }
    });
  }
  return nullable;
}

/**
 * The id of a rule on a left-recursive cycle, or null. Same criterion as llama.cpp's
 * `llama_grammar_detect_left_recursion` (a rule "may be empty" only if one of its alternatives is empty), but
 * as a linear-time DFS over the leftmost-reference graph instead of llama.cpp's re-traversal.
 */
function findLeftRecursion(rules: Rule[]): number | null {
  const mayBeEmpty = rules.map((rule) => rule.some((alt) => alt.length === 0));
  const none: number[] = [];
  const edges = rules.map((rule) => {
    let out = none;
    for (const alt of rule) {
      for (const el of alt) {
        if (el === TERMINAL) break;
        if (out === none) out = [];
        out.push(el);
        if (!mayBeEmpty[el]) break;
      }
    }
    return out;
  });
  const state = new Uint8Array(rules.length); // 0 new, 1 in progress, 2 done
  // The DFS stack: rule ids and, per entry, the index of its next edge.
  const stackNode = new Int32Array(rules.length);
  const stackEdge = new Int32Array(rules.length);
  for (let start = 0; start < rules.length; start++) {
    if (state[start] !== 0) continue;
    let depth = 0;
    stackNode[0] = start;
    stackEdge[0] = 0;
    state[start] = 1;
    while (depth >= 0) {
      const node = stackNode[depth]!;
      const next = edges[node]![stackEdge[depth]!];
      if (next === undefined) {
        state[node] = 2;
        depth--;
        continue;
      }
      stackEdge[depth]!++;
      if (state[next] === 1) return next;
      if (state[next] === 0) {
        state[next] = 1;
        depth++;
        stackNode[depth] = next;
        stackEdge[depth] = 0;
      }
    }
  }
  return null;
}

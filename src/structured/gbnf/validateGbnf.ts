/**
 * Validation of client GBNF grammars (`guided_grammar`, the `grammar` kind). Two layers:
 * {@link checkGbnfText} runs our port of llama.cpp's parser (pure, gives llama.cpp's own message), and
 * {@link validateGbnf} additionally asks llama.cpp's own parser, which is the final judge.
 */

import { ConstraintError } from "../errors.ts";
import { CodePointSet, MAX_CODE_POINT } from "../regex/codePointSet.ts";
import { checkGbnf, type GbnfInfo, GbnfSyntaxError } from "./gbnfCheck.ts";

/** Largest GBNF text accepted, in UTF-16 code units (1 MiB-ish); larger grammars get a 400. */
export const MAX_GBNF_LENGTH = 1_000_000;

/**
 * Bounds on a client grammar's size and per-step cost (issue 31: a 60,000-alternative `guided_grammar`
 * took 33.5 s for 5 tokens and stalled every other stream). `fanOut` bounds the parse stacks llama.cpp's
 * sampler walks per candidate token at one point of the grammar (`GbnfInfo.maxFanOut`, an upper
 * estimate); `alternatives` and `rules` bound the grammar llama.cpp builds (after rewriting groups and
 * repetitions); `nesting` bounds parenthesised groups inside each other (both parsers recurse per level).
 * Measured on stories260K (vocabulary 512, 5 tokens, one CPU core shared): 1,024 stacks 59 ms,
 * 4,096 stacks 0.3 s, 16,384 stacks 3.9 s, 65,536 stacks 52 s; see docs/structured-output.md.
 */
export const GBNF_LIMITS = {
  fanOut: 4096,
  alternatives: 65_536,
  rules: 65_536,
  nesting: 64,
} as const;

/** Throws `ConstraintError` (`param`) for a text longer than {@link MAX_GBNF_LENGTH}. */
function refuseTooLong(text: string, param: string): void {
  if (text.length > MAX_GBNF_LENGTH)
    throw new ConstraintError(
      `The grammar is too long (${text.length} characters; at most ${MAX_GBNF_LENGTH}).`,
      param,
    );
}

/** "line L, column C" of a UTF-16 offset in `text` (both 1-based). */
function lineAndColumn(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = offset - before.lastIndexOf("\n");
  return `line ${line}, column ${column}`;
}

/**
 * Checks GBNF text without a model, as llama.cpp's parser would (see `gbnfCheck.ts`).
 * Throws `ConstraintError` (`param`, default `"guided_grammar"`) with llama.cpp's message and the line/column,
 * e.g. "Invalid GBNF grammar: parse: error parsing grammar: expecting ')' at ... (line 1, column 15)".
 */
export function checkGbnfText(text: string, param = "guided_grammar"): void {
  if (typeof text !== "string" || text.trim() === "") {
    throw new ConstraintError("The grammar must be a non-empty GBNF string.", param);
  }
  refuseTooLong(text, param);
  const nesting = groupNesting(text);
  if (nesting.depth > GBNF_LIMITS.nesting) {
    throw new ConstraintError(
      `The grammar nests groups ${nesting.depth} deep (at most ${GBNF_LIMITS.nesting}; ${lineAndColumn(text, nesting.offset)}).`,
      param,
    );
  }
  let info: GbnfInfo;
  try {
    info = checkGbnf(text);
  } catch (error) {
    if (error instanceof GbnfSyntaxError) {
      throw new ConstraintError(
        `Invalid GBNF grammar: parse: error parsing grammar: ${error.message} (${lineAndColumn(text, error.offset)})`,
        param,
      );
    }
    throw error;
  }
  if (info.ruleCount > GBNF_LIMITS.rules) {
    throw new ConstraintError(
      `The grammar has ${info.ruleCount} rules after expanding groups and repetitions (at most ${GBNF_LIMITS.rules}).`,
      param,
    );
  }
  if (info.alternativeCount > GBNF_LIMITS.alternatives) {
    throw new ConstraintError(
      `The grammar has ${info.alternativeCount} alternatives (at most ${GBNF_LIMITS.alternatives}).`,
      param,
    );
  }
  if (info.maxFanOut > GBNF_LIMITS.fanOut) {
    throw new ConstraintError(
      `The grammar is too costly to enforce: one point of it opens ${info.maxFanOut >= 2 ** 31 ? "over 2^31" : info.maxFanOut} parse paths (alternatives, multiplied through nested rules; at most ${GBNF_LIMITS.fanOut}). Merge common prefixes ("w" [0-9]+ rather than "w0" | "w1" | ...).`,
      param,
    );
  }
  const ungeneratable = firstUngeneratable(text);
  if (ungeneratable !== null) {
    throw new ConstraintError(
      `Invalid GBNF grammar: ${ungeneratable.what} (${lineAndColumn(text, ungeneratable.offset)}): the output is UTF-8, which has no surrogates (U+D800-U+DFFF) and nothing above U+10FFFF.`,
      param,
    );
  }
}

/**
 * The deepest nesting of parenthesised groups in GBNF text, and where it is first reached; literals,
 * character classes and comments are skipped.
 */
function groupNesting(text: string): { depth: number; offset: number } {
  let depth = 0;
  let deepest = 0;
  let offset = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"' || c === "[") {
      const close = c === '"' ? '"' : "]";
      for (i++; i < text.length && text[i] !== close; i++) if (text[i] === "\\") i++;
    } else if (c === "#") {
      while (i < text.length && text[i] !== "\n" && text[i] !== "\r") i++;
    } else if (c === "(") {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        offset = i;
      }
    } else if (c === ")") depth--;
  }
  return { depth: deepest, offset };
}

/** The code points UTF-8 lead bytes can reach (F4 leads up to U+13FFFF as llama.cpp decodes them). */
const REACHABLE = 0x13ffff;

/**
 * The first literal character or character class of a (syntactically valid) GBNF text that would let
 * generation reach a point no well-formed UTF-8 text can pass: a literal surrogate or code point above
 * U+10FFFF; a class whose members are all such; a class with surrogates but no U+D000-U+D7FF (the lead
 * byte ED would be allowed for them, and then no continuation), or with U+110000-U+13FFFF but no
 * U+100000-U+10FFFF (the same for F4). Null when there is none. Comments, token references and rule
 * names are skipped.
 */
function firstUngeneratable(text: string): { what: string; offset: number } | null {
  const hex = (cp: number): string => `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`;
  const invalid = (cp: number): boolean => (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff;
  /** The character at `i` (escaped or not) and the position after it. */
  const charAt = (i: number): [number, number] => {
    if (text[i] !== "\\") {
      const cp = text.codePointAt(i)!;
      return [cp, i + (cp > 0xffff ? 2 : 1)];
    }
    const e = text[i + 1]!;
    const size = e === "x" ? 2 : e === "u" ? 4 : e === "U" ? 8 : 0;
    if (size > 0) return [Number.parseInt(text.slice(i + 2, i + 2 + size), 16), i + 2 + size];
    const simple: Record<string, number> = { t: 9, r: 13, n: 10 };
    return [simple[e] ?? e.codePointAt(0)!, i + 2];
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "#") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "<") {
      while (i < text.length && text[i] !== ">") i++;
      i++;
    } else if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; ) {
        const start = i;
        const [cp, next] = charAt(i);
        if (invalid(cp)) return { what: `the literal character ${hex(cp)}`, offset: start };
        i = next;
      }
      i++;
    } else if (c === "[") {
      const start = i;
      i++;
      const negated = text[i] === "^";
      if (negated) i++;
      const ranges: [number, number][] = [];
      while (i < text.length && text[i] !== "]") {
        const [low, next] = charAt(i);
        i = next;
        let high = low;
        if (text[i] === "-" && text[i + 1] !== "]") [high, i] = charAt(i + 1);
        ranges.push([low, high]);
      }
      i++;
      // Members up to U+10FFFF as a set; whether any lie in U+110000-U+13FFFF (what an F4 lead reaches).
      const clipped = ranges.flatMap(([low, high]) =>
        low > MAX_CODE_POINT || low > high ? [] : [[low, Math.min(high, MAX_CODE_POINT)] as const],
      );
      const listed = CodePointSet.of(clipped);
      const within = negated ? listed.complement() : listed;
      const beyond = negated
        ? !ranges.some(([low, high]) => low <= 0x110000 && high >= REACHABLE)
        : ranges.some(([low, high]) => low <= REACHABLE && high >= 0x110000);
      const some = (low: number, high: number): boolean =>
        !within.intersect(CodePointSet.of([[low, high]])).isEmpty;
      const what = `the character class ${text.slice(start, Math.min(i, start + 40))}`;
      if (!some(0, 0xd7ff) && !some(0xe000, 0x10ffff))
        return { what: `${what} (no character UTF-8 can write)`, offset: start };
      if (some(0xd800, 0xdfff) && !some(0xd000, 0xd7ff))
        return { what: `${what} (surrogates)`, offset: start };
      if (beyond && !some(0x100000, 0x10ffff)) return { what: `${what} (above U+10FFFF)`, offset: start };
    } else i++;
  }
  return null;
}

/**
 * Validates GBNF text: first {@link checkGbnfText} (our port of llama.cpp's parser, with its messages and
 * the line/column), then {@link confirmGbnf}. Returns the text.
 * @param nativeCheck returns null when llama.cpp accepts the grammar, else its message.
 * @throws ConstraintError with `param` (default `"guided_grammar"`).
 */
export function validateGbnf(
  text: string,
  nativeCheck: (text: string) => string | null,
  param = "guided_grammar",
): string {
  checkGbnfText(text, param);
  return confirmGbnf(text, nativeCheck, param);
}

/**
 * Asks llama.cpp's own parser and post-parse checks (missing root, left recursion), the final judge, about
 * GBNF text, after only the length limit: for text that our port of llama.cpp's parser has passed already
 * (every constraint `compileConstraint` returns). Returns the text.
 * @param nativeCheck returns null when llama.cpp accepts the grammar, else its message.
 * @throws ConstraintError with `param` (default `"guided_grammar"`): too long, or llama.cpp's first lines.
 */
export function confirmGbnf(
  text: string,
  nativeCheck: (text: string) => string | null,
  param = "guided_grammar",
): string {
  refuseTooLong(text, param);
  const problem = nativeCheck(text);
  if (problem !== null) {
    const detail = problem
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line.length > 0)
      .slice(0, 3)
      .join("; ");
    throw new ConstraintError(`Invalid GBNF grammar: ${detail.slice(0, 500)}`, param);
  }
  return text;
}

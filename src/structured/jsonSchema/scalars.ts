/**
 * Strings, integers and numbers of the JSON Schema compiler (see `compiler.ts`): lengths in code
 * points, `pattern` through the regex compiler in JSON-string mode, `format`s, exact integer ranges and exact
 * number ranges for integer-valued bounds.
 */

import { group } from "../gbnf/gbnf.ts";
import { jsonCharRule, jsonIntegerRule, jsonNumberRule } from "../gbnf/jsonPrimitives.ts";
import { CodePointSet } from "../regex/codePointSet.ts";
import { AutomatonTooLarge, type Dfa, regexDfa, stringsDfa } from "../regex/regexAutomaton.ts";
import {
  ANY_TEXT,
  narrowLength,
  parseRegex,
  RegexError,
  type RegexNode,
  regexLengthBounds,
  restrictLength,
  splitAnchors,
} from "../regex/regexParser.ts";
import {
  automatonExpression,
  patternDfa,
  regexBadRequest,
  regexExpression,
  regexTreeExpression,
} from "../regex/regexToGbnf.ts";
import type { CompileContext } from "./context.ts";
import {
  formatDfa,
  formatRule,
  formatTree,
  INTEGER_FORMATS,
  isSupportedFormat,
  type SupportedFormat,
} from "./formats.ts";
import {
  ARRAY_KEYWORDS,
  EXTRA_PATTERNS,
  isConstraint,
  NOT_FORMATS,
  NOT_PATTERNS,
  NUMBER_KEYWORDS,
  OBJECT_KEYWORDS,
  type Schema,
  type SchemaObject,
  stringNotFormats,
  stringNotPatterns,
  stringPatterns,
  typeSet,
} from "./keywords.ts";
import { doubleSafeBound, integerBound, integerRange, type NumberBound, numberRange } from "./numbers.ts";

/**
 * The GBNF body of a string schema: `json-char{min,max}`, a `format`, or `pattern`s between quotes. One
 * `pattern` alone, or with lengths it implies or that restrict its tree exactly, compiles from the regex tree;
 * every other combination (lengths a tree cannot take, several patterns, a `format` with a `pattern` or
 * lengths it does not imply) is the intersection of their automata (see `regexAutomaton.ts`).
 */
export function stringBody(ctx: CompileContext, s: SchemaObject, path: string, hint: string): string {
  const min = (s.minLength as number | undefined) ?? 0;
  const max = (s.maxLength as number | undefined) ?? null;
  if (max !== null && min > max)
    ctx.unsatisfiable(`the string at ${path} cannot satisfy minLength ${min} > maxLength ${max}.`);
  const format = typeof s.format === "string" && isSupportedFormat(s.format) ? s.format : null;
  const patterns = stringPatterns(s);
  const forbidden = stringNotPatterns(s);
  const forbiddenFormats = stringNotFormats(s) as SupportedFormat[];
  const lengths = "minLength" in s || "maxLength" in s;
  const negated = forbidden.length > 0 || forbiddenFormats.length > 0;
  if (format !== null && patterns.length === 0 && !negated) {
    const own = regexLengthBounds(formatTree(format));
    if (!lengths || (own.min >= min && (max === null || (own.max !== null && own.max <= max))))
      return quoted(formatRule(ctx.b, format));
    const narrowed = narrowLength(formatTree(format), min, max);
    // A narrowing down to the empty string alone (`regex`'s nested groups) is left to the automaton.
    if (narrowed !== null && (regexLengthBounds(narrowed).max !== 0 || max === 0))
      return quoted(group(regexTreeExpression(ctx.b, narrowed, { mode: "json", hint: `${hint}-${format}` })));
  }
  if (format === null && patterns.length === 1 && !negated) {
    const pattern = patterns[0]!;
    try {
      if (!lengths) return quoted(searchExpression(ctx, pattern, hint));
      const expr = lengthBoundPattern(ctx, pattern, min, max, path, hint);
      if (expr === null) return quoted(searchExpression(ctx, pattern, hint));
      if (expr !== undefined) return quoted(expr);
    } catch (error) {
      if (error instanceof RegexError)
        throw regexBadRequest(error, pattern, ctx.param, ` at ${path}/pattern`);
      throw error;
    }
  }
  if (format === null && patterns.length === 0 && !negated) {
    try {
      const chars = ctx.b.repeat(jsonCharRule(ctx.b), min, max, `${hint}-chars`);
      return chars === '""' ? '"\\"\\""' : quoted(chars);
    } catch (error) {
      if (error instanceof RangeError)
        ctx.fail(`minLength/maxLength at ${path} are too large: ${error.message}.`);
      throw error;
    }
  }
  return quoted(automatonBody(ctx, { patterns, forbidden, format, forbiddenFormats }, min, max, path, hint));
}

/** The keywords {@link keyLanguage} reads from a `propertyNames` schema (others there are a 400). */
const KEY_KEYWORDS = new Set([
  "type",
  "pattern",
  "format",
  "minLength",
  "maxLength",
  "enum",
  "const",
  EXTRA_PATTERNS,
  NOT_PATTERNS,
  NOT_FORMATS,
]);

/**
 * The language of property names a `propertyNames` schema allows, as a trimmed DFA, or null when it allows
 * every name. `names` is the schema after `$ref`s (resolved by the caller). Reads `type`, `pattern`s, `format`,
 * lengths, `enum`/`const` and the negated forms; keywords for other types than string do not apply to names;
 * other subschema keywords are a 400 naming `propertyNames`. Throws `ConstraintError` (`ctx.fail`) also for
 * automata too large.
 */
export function keyLanguage(ctx: CompileContext, names: Schema, path: string): Dfa | null {
  if (names === true) return null;
  const none = (): Dfa => regexDfa({ type: "alt", items: [] }); // no name at all
  if (names === false) return none();
  const s = names as SchemaObject;
  for (const key of Object.keys(s)) {
    if (isConstraint(key) && !KEY_KEYWORDS.has(key) && !NON_STRING_KEYWORDS.has(key))
      ctx.fail(
        `Unsupported JSON Schema keyword 'propertyNames' at ${path}: '${key}' in it is not supported.`,
      );
  }
  if ("type" in s) {
    if (!typeSet(s.type).includes("string")) return none();
  }
  const format = typeof s.format === "string" && isSupportedFormat(s.format) ? s.format : null;
  const min = (s.minLength as number | undefined) ?? 0;
  const max = (s.maxLength as number | undefined) ?? null;
  const listed =
    "enum" in s || "const" in s
      ? ("const" in s ? [s.const] : (s.enum as unknown[])).filter((v): v is string => typeof v === "string")
      : null;
  const language = {
    patterns: stringPatterns(s),
    forbidden: stringNotPatterns(s),
    format,
    forbiddenFormats: stringNotFormats(s) as SupportedFormat[],
    listed,
    lengths: min > 0 || max !== null ? { min, max } : null,
  };
  if (Object.values(language).every((v) => v === null || (Array.isArray(v) && v.length === 0))) return null;
  try {
    return stringLanguage(language).minimize();
  } catch (error) {
    if (error instanceof RegexError)
      throw regexBadRequest(error, error.pattern ?? "", ctx.param, ` at ${path}`);
    if (error instanceof AutomatonTooLarge)
      ctx.fail(`Unsupported JSON Schema keyword 'propertyNames' at ${path}: its names are too complex.`);
    throw error;
  }
}

/**
 * The strings matching every pattern in `patterns` and none in `forbidden` (search semantics), of `format`
 * (when not null; its compact automaton, a narrowing for `email` and `hostname`) and none of
 * `forbiddenFormats` (exact automata), among `listed` (when given) and of `lengths` (when given), as a
 * trimmed DFA (any string when nothing is given). Throws RegexError (with its `pattern`) or
 * AutomatonTooLarge.
 */
function stringLanguage(language: {
  patterns: readonly string[];
  forbidden: readonly string[];
  format: SupportedFormat | null;
  forbiddenFormats: readonly SupportedFormat[];
  listed?: readonly string[] | null;
  lengths?: { min: number; max: number | null } | null;
}): Dfa {
  const parts: (() => Dfa)[] = [];
  if (language.listed) {
    const listed = language.listed;
    parts.push(() => stringsDfa(listed));
  }
  const { format } = language;
  if (format !== null) parts.push(() => formatDfa(format, true));
  for (const f of language.forbiddenFormats) parts.push(() => formatDfa(f).complement(CodePointSet.all()));
  const pattern = (p: string, negate: boolean) => (): Dfa => {
    try {
      const matching = patternDfa(p, true);
      return negate ? matching.complement(CodePointSet.all()) : matching;
    } catch (error) {
      if (error instanceof RegexError) error.pattern = p;
      throw error;
    }
  };
  for (const p of language.patterns) parts.push(pattern(p, false));
  for (const p of language.forbidden) parts.push(pattern(p, true));
  if (language.lengths) {
    const { min, max } = language.lengths;
    parts.push(() => regexDfa({ type: "repeat", item: { type: "set", set: CodePointSet.all() }, min, max }));
  }
  let dfa: Dfa | null = null;
  for (const part of parts) dfa = dfa === null ? part() : dfa.intersect(part());
  return dfa ?? regexDfa(ANY_TEXT);
}

/** Keywords of other types than string, which hold for every property name. */
const NON_STRING_KEYWORDS = new Set([...OBJECT_KEYWORDS, ...ARRAY_KEYWORDS, ...NUMBER_KEYWORDS, "nullable"]);

/**
 * A JSON string key (with its quotes) whose content is in `dfa`, none of `excluded` and matches none of
 * `excludedPatterns`, as a GBNF expression; null when no such key exists. Throws `ConstraintError` when the
 * automaton is too large.
 */
export function keyExpression(
  ctx: CompileContext,
  dfa: Dfa,
  excluded: readonly string[],
  excludedPatterns: readonly string[],
  path: string,
  hint: string,
): string | null {
  try {
    return keyAutomatonExpression(ctx, dfa, excluded, excludedPatterns.map(searchDfa), hint);
  } catch (error) {
    if (error instanceof AutomatonTooLarge)
      ctx.fail(`Unsupported JSON Schema keyword 'propertyNames' at ${path}: its names are too complex.`);
    throw error;
  }
}

/** The automaton of the strings that contain a match of `pattern` (ECMA-262 `test`). Throws RegexError. */
const searchDfa = (pattern: string): Dfa => patternDfa(pattern, true);

/**
 * {@link keyExpression} with the excluded patterns as automata (`excludedKeys`). Throws
 * {@link AutomatonTooLarge} when the automaton is too large.
 */
export function keyAutomatonExpression(
  ctx: CompileContext,
  dfa: Dfa,
  excluded: readonly string[],
  excludedKeys: readonly Dfa[],
  hint: string,
): string | null {
  let keys = dfa;
  if (excluded.length > 0) keys = keys.intersect(stringsDfa(excluded).complement(CodePointSet.all()));
  for (const other of excludedKeys) keys = keys.intersect(other.complement(CodePointSet.all()));
  const result = automatonExpression(ctx.b, keys.minimize(), { mode: "json", hint, min: 0, max: null });
  return result === null ? null : quoted(result.expr);
}

/** `expr` between the quotes of a JSON string. */
const quoted = (expr: string): string => `"\\"" ${expr} "\\""`;

/** One `pattern` (search semantics) as a GBNF expression in JSON string mode. Throws RegexError. */
function searchExpression(ctx: CompileContext, pattern: string, hint: string): string {
  const expr = regexExpression(ctx.b, pattern, { mode: "json", search: true, hint: `${hint}-pattern` });
  return expr.includes(" | ") ? `(${expr})` : expr;
}

/**
 * The strings matching every pattern in `patterns` and none in `forbidden`, of `format` (when not null) and of
 * none of `forbiddenFormats`, of lengths `[min, max]`, as a GBNF expression in JSON string mode: the product of their automata (a forbidden
 * pattern's complemented). A maximum whose grammar would be too large is lowered (a narrowing, see `automatonExpression`). Throws `ConstraintError` for a bad pattern, for
 * automata too large to build, and when no string satisfies them all.
 */
function automatonBody(
  ctx: CompileContext,
  language: {
    patterns: string[];
    forbidden: string[];
    format: SupportedFormat | null;
    forbiddenFormats: SupportedFormat[];
  },
  min: number,
  max: number | null,
  path: string,
  hint: string,
): string {
  const { patterns, forbidden, format, forbiddenFormats } = language;
  const what = [
    ...(patterns.length > 0 ? [patterns.length > 1 ? `${patterns.length} patterns` : "'pattern'"] : []),
    ...(forbidden.length > 0 ? ["'not' of a pattern"] : []),
    ...(format !== null ? [`format '${format}'`] : []),
    ...(forbiddenFormats.length > 0 ? ["'not' of a format"] : []),
    ...(min > 0 || max !== null ? ["minLength/maxLength"] : []),
  ].join(" with ");
  let dfa: Dfa;
  try {
    dfa = stringLanguage({ patterns, forbidden, format, forbiddenFormats });
  } catch (error) {
    if (error instanceof RegexError)
      throw regexBadRequest(error, error.pattern ?? "", ctx.param, ` at ${path}/pattern`);
    if (error instanceof AutomatonTooLarge) tooLarge(ctx, what, path);
    throw error;
  }
  try {
    const result = automatonExpression(ctx.b, dfa.minimize(), {
      mode: "json",
      hint: `${hint}-str`,
      min,
      max,
    });
    if (result === null)
      ctx.unsatisfiable(
        `no string at ${path} satisfies ${what} (minLength ${min}, maxLength ${max ?? "∞"}).`,
      );
    return (result as { expr: string }).expr;
  } catch (error) {
    if (error instanceof AutomatonTooLarge) tooLarge(ctx, what, path);
    throw error;
  }
}

function tooLarge(ctx: CompileContext, what: string, path: string): never {
  return ctx.fail(
    `Unsupported combination at ${path}: ${what} cannot be intersected within the grammar size limits.`,
  );
}

/**
 * `pattern` (search semantics) intersected with string lengths `[min, max]`, as a GBNF expression in JSON
 * string mode from the regex tree; null when the lengths are already implied by the pattern (the caller
 * compiles it as usual), undefined when the tree can be neither restricted exactly nor narrowed (the caller
 * uses automata). Each top-level alternative, with any text added at an unanchored end, is restricted by
 * {@link restrictLength}; when that is not exact for every alternative, each is narrowed by
 * {@link narrowLength} instead (a subset of the strings allowed). When no alternative has a match of an
 * allowed length it has no instance (400).
 * Throws RegexError for a bad pattern.
 */
function lengthBoundPattern(
  ctx: CompileContext,
  pattern: string,
  min: number,
  max: number | null,
  path: string,
  hint: string,
): string | null | undefined {
  const tree = parseRegex(pattern);
  let split: ReturnType<typeof splitAnchors>;
  try {
    split = splitAnchors(tree);
  } catch (error) {
    if (error instanceof RegexError) return undefined; // a lookahead or inner anchor: automata only
    throw error;
  }
  const alternatives = split.map(({ node, start, end }) => {
    const items = [...(start ? [] : [ANY_TEXT]), node, ...(end ? [] : [ANY_TEXT])];
    const whole: RegexNode = items.length === 1 ? node : { type: "seq", items };
    return { whole, restricted: restrictLength(whole, min, max) };
  });
  if (alternatives.every((a) => a.restricted === a.whole)) return null;
  const exact = alternatives.every((a) => a.restricted !== undefined);
  // Where no exact restriction exists, each alternative is narrowed (see `narrowLength`).
  const kept = alternatives.flatMap((a) => {
    const tree = exact ? a.restricted : narrowLength(a.whole, min, max);
    return tree ? [tree] : [];
  });
  if (!exact && kept.length === 0) return undefined;
  if (kept.length === 0)
    ctx.unsatisfiable(
      `no string at ${path} matches its pattern within minLength ${min}/maxLength ${max ?? "∞"}.`,
    );
  const exprs = kept.map((tree) =>
    regexTreeExpression(ctx.b, tree, { mode: "json", hint: `${hint}-pattern` }),
  );
  return exprs.length > 1 ? `(${exprs.join(" | ")})` : group(exprs[0]!);
}

/**
 * Lower and upper integer bounds of `s` (`minimum`/`maximum`/`exclusive*`, fractional bounds rounded inwards,
 * bounds beyond ±2^53 at their exact double value, see {@link integerBound}, and an integer `format`'s
 * range); null where unbounded.
 */
export function integerBounds(s: SchemaObject): { lo: bigint | null; hi: bigint | null } {
  const lows: bigint[] = [];
  const highs: bigint[] = [];
  if (typeof s.minimum === "number") lows.push(integerBound(s.minimum, false, true));
  if (typeof s.exclusiveMinimum === "number") lows.push(integerBound(s.exclusiveMinimum, true, true));
  if (typeof s.maximum === "number") highs.push(integerBound(s.maximum, false, false));
  if (typeof s.exclusiveMaximum === "number") highs.push(integerBound(s.exclusiveMaximum, true, false));
  const range = typeof s.format === "string" ? INTEGER_FORMATS[s.format] : undefined;
  if (range !== undefined) {
    lows.push(range[0]);
    highs.push(range[1]);
  }
  const pick = (values: bigint[], better: (x: bigint, y: bigint) => boolean): bigint | null => {
    let best: bigint | null = null;
    for (const v of values) if (best === null || better(v, best)) best = v;
    return best;
  };
  return { lo: pick(lows, (x, y) => x > y), hi: pick(highs, (x, y) => x < y) };
}

/** Exact integer range grammar from `minimum`/`maximum`/`exclusive*` and integer `format`s ({@link integerBounds}). */
export function integerBody(ctx: CompileContext, s: SchemaObject, path: string): string {
  const { lo, hi } = integerBounds(s);
  if (lo === null && hi === null) return jsonIntegerRule(ctx.b);
  const expr = integerRange(lo, hi);
  if (expr === null) ctx.unsatisfiable(`no integer at ${path} satisfies its minimum/maximum.`);
  return expr as string;
}

/** `a` compared with `b` as exact decimals: negative, zero or positive. */
const compareBounds = (a: NumberBound, b: NumberBound): number => {
  const sa = a.scale ?? 0;
  const sb = b.scale ?? 0;
  const x = a.value * 10n ** BigInt(Math.max(0, sb - sa));
  const y = b.value * 10n ** BigInt(Math.max(0, sa - sb));
  return x < y ? -1 : x > y ? 1 : 0;
};

/**
 * Lower and upper decimal bounds of `s` for the number grammar (`minimum`/`maximum`/`exclusive*` through
 * {@link doubleSafeBound}, and an integer `format`'s range), the tighter of each kind; null where unbounded.
 */
export function numberBounds(s: SchemaObject): { lo: NumberBound | null; hi: NumberBound | null } {
  const tighter = (a: NumberBound | null, b: NumberBound | null, lower: boolean): NumberBound | null => {
    if (a === null) return b;
    if (b === null) return a;
    const order = compareBounds(a, b);
    if (order === 0) return a.exclusive ? a : b;
    return order > 0 === lower ? a : b;
  };
  const bound = (keyword: string, exclusive: boolean, lower: boolean): NumberBound | null => {
    const v = s[keyword];
    return typeof v === "number" ? doubleSafeBound(v, exclusive, lower) : null;
  };
  let lo = tighter(bound("minimum", false, true), bound("exclusiveMinimum", true, true), true);
  let hi = tighter(bound("maximum", false, false), bound("exclusiveMaximum", true, false), false);
  const range = typeof s.format === "string" ? INTEGER_FORMATS[s.format] : undefined;
  if (range !== undefined) {
    lo = tighter(lo, { value: range[0], exclusive: false }, true);
    hi = tighter(hi, { value: range[1], exclusive: false }, false);
  }
  return { lo, hi };
}

/**
 * Exact number grammar for decimal bounds (`minimum`, `maximum`, `exclusive*`, and the ranges of the
 * integer `format`s `int32`/`int64`/...; see {@link numberBounds}), without exponent when bounded. With
 * `nonInteger`, only numbers with a non-zero fraction digit (no exponent, no trailing zero: a narrowing of
 * the spelling, not of the values up to 16 decimals).
 */
export function numberBody(ctx: CompileContext, s: SchemaObject, path: string, nonInteger = false): string {
  const { lo, hi } = numberBounds(s);
  if (lo === null && hi === null && !nonInteger) return jsonNumberRule(ctx.b);
  const expr = numberRange(lo, hi, nonInteger);
  if (expr === null)
    ctx.unsatisfiable(
      `no ${nonInteger ? "non-integer " : ""}number at ${path} satisfies its minimum/maximum.`,
    );
  return expr as string;
}

/**
 * Strings, integers and numbers of the JSON Schema compiler (see `jsonSchemaToGbnf.ts`): lengths in code
 * points, `pattern` through the regex compiler in JSON-string mode, `format`s, exact integer ranges and exact
 * number ranges for integer-valued bounds.
 */

import { CodePointSet } from "../codePointSet.ts";
import { group } from "../gbnf.ts";
import { jsonCharRule, jsonIntegerRule, jsonNumberRule } from "../jsonPrimitives.ts";
import { parseRegex, RegexError, type RegexNode, restrictLength, splitAnchors } from "../regexParser.ts";
import { regexBadRequest, regexExpression, regexTreeExpression } from "../regexToGbnf.ts";
import type { CompileContext } from "./context.ts";
import { formatRule, INTEGER_FORMATS, isSupportedFormat } from "./formats.ts";
import type { SchemaObject } from "./keywords.ts";
import { doubleSafeBound, integerBound, integerRange, type NumberBound, numberRange } from "./numbers.ts";

/** The GBNF body of a string schema: `format`, `pattern` or `json-char{min,max}` between quotes. */
export function stringBody(ctx: CompileContext, s: SchemaObject, path: string, hint: string): string {
  const min = (s.minLength as number | undefined) ?? 0;
  const max = (s.maxLength as number | undefined) ?? null;
  if (max !== null && min > max)
    ctx.unsatisfiable(`the string at ${path} cannot satisfy minLength ${min} > maxLength ${max}.`);
  const quoted = (expr: string): string => `"\\"" ${expr} "\\""`;
  if (typeof s.format === "string" && isSupportedFormat(s.format)) {
    for (const key of ["pattern", "minLength", "maxLength"]) {
      if (key in s)
        ctx.fail(`Unsupported combination at ${path}: 'format' cannot be combined with '${key}'.`);
    }
    return quoted(formatRule(ctx.b, s.format));
  }
  if (typeof s.pattern === "string") {
    const pattern = s.pattern;
    try {
      if ("minLength" in s || "maxLength" in s) {
        const expr = lengthBoundPattern(ctx, pattern, min, max, path, hint);
        if (expr !== null) return quoted(expr);
      }
      const expr = regexExpression(ctx.b, pattern, {
        mode: "json",
        search: true,
        hint: `${hint}-pattern`,
      });
      return quoted(expr.includes(" | ") ? `(${expr})` : expr);
    } catch (error) {
      if (error instanceof RegexError)
        throw regexBadRequest(error, pattern, ctx.param, ` at ${path}/pattern`);
      throw error;
    }
  }
  try {
    const chars = ctx.b.repeat(jsonCharRule(ctx.b), min, max, `${hint}-chars`);
    return chars === '""' ? '"\\"\\""' : quoted(chars);
  } catch (error) {
    if (error instanceof RangeError)
      ctx.fail(`minLength/maxLength at ${path} are too large: ${error.message}.`);
    throw error;
  }
}

/** Any text, as the unanchored ends of a `pattern` allow (ECMA-262 search semantics). */
const ANY_TEXT: RegexNode = {
  type: "repeat",
  item: { type: "set", set: CodePointSet.all() },
  min: 0,
  max: null,
};

/**
 * `pattern` (search semantics) intersected with string lengths `[min, max]`, as a GBNF expression in JSON
 * string mode; null when the lengths are already implied by the pattern (the caller compiles it as usual).
 * Each top-level alternative, with any text added at an unanchored end, is restricted by
 * {@link restrictLength}; when that cannot be done exactly the schema is refused (400), and when no
 * alternative has a match of an allowed length it has no instance. Throws RegexError for a bad pattern.
 */
function lengthBoundPattern(
  ctx: CompileContext,
  pattern: string,
  min: number,
  max: number | null,
  path: string,
  hint: string,
): string | null {
  const alternatives = splitAnchors(parseRegex(pattern)).map(({ node, start, end }) => {
    const items = [...(start ? [] : [ANY_TEXT]), node, ...(end ? [] : [ANY_TEXT])];
    const whole: RegexNode = items.length === 1 ? node : { type: "seq", items };
    return { whole, restricted: restrictLength(whole, min, max) };
  });
  if (alternatives.every((a) => a.restricted === a.whole)) return null;
  if (alternatives.some((a) => a.restricted === undefined)) {
    ctx.fail(
      `Unsupported combination at ${path}: 'pattern' with minLength/maxLength is supported only when the lengths can be intersected with the pattern exactly (the anchored pattern implies them, or it has a single variable-length part repeating fixed-width items).`,
    );
  }
  const kept = alternatives.flatMap((a) => (a.restricted ? [a.restricted] : []));
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

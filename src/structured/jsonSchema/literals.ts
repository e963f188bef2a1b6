/**
 * `enum`/`const` with sibling keywords: the compiler writes the listed values as literals, so each value is
 * first checked against the keywords beside it (JSON Schema applies all of them). A value that fails one is
 * dropped; a keyword we cannot check for that value is a 400, never ignored.
 */
import { echoed } from "../regex/regexToGbnf.ts";
import type { CompileContext } from "./context.ts";
import { ecmaRegex } from "./ecmaRegex.ts";
import { formatDfa, INTEGER_FORMATS, isSupportedFormat, type SupportedFormat } from "./formats.ts";
import {
  NON_INTEGER,
  OBJECT_KEYWORDS,
  type SchemaObject,
  stringNotFormats,
  stringNotPatterns,
  stringPatterns,
} from "./keywords.ts";
import { canonical } from "./merge.ts";

/** Array keywords {@link literalFits} cannot check (it checks `minItems`, `maxItems`, `uniqueItems`). */
const ARRAY_KEYWORDS_UNCHECKED = ["items", "prefixItems", "additionalItems"];

/** Whether the string `value` satisfies `s`'s string keywords (a supported `format` through its automaton). */
function stringFits(ctx: CompileContext, value: string, s: SchemaObject, path: string): boolean {
  if (typeof s.minLength === "number" || typeof s.maxLength === "number") {
    const length = [...value].length;
    if (typeof s.minLength === "number" && length < s.minLength) return false;
    if (typeof s.maxLength === "number" && length > s.maxLength) return false;
  }
  // A supported format admits the strings of its grammar (a narrowing of the format, as everywhere).
  if (typeof s.format === "string" && isSupportedFormat(s.format) && !formatDfa(s.format).matches(value))
    return false;
  for (const pattern of stringPatterns(s)) {
    const re = ecmaRegex(pattern);
    if (re === null)
      ctx.fail(
        `Unsupported combination at ${path}: 'enum'/'const' with a 'pattern' JavaScript cannot run ("${echoed(pattern)}").`,
      );
    if (!re.test(value)) return false;
  }
  for (const format of stringNotFormats(s)) {
    if (formatDfa(format as SupportedFormat).matches(value)) return false;
  }
  for (const pattern of stringNotPatterns(s)) {
    const re = ecmaRegex(pattern);
    if (re === null || re.test(value)) return false; // one JavaScript cannot run: leave the value out
  }
  return true;
}

/** Whether the number `value` satisfies `s`'s numeric keywords (`multipleOf` as ajv checks it). */
function numberFits(value: number, s: SchemaObject): boolean {
  if (typeof s.minimum === "number" && value < s.minimum) return false;
  if (typeof s.maximum === "number" && value > s.maximum) return false;
  if (typeof s.exclusiveMinimum === "number" && value <= s.exclusiveMinimum) return false;
  if (typeof s.exclusiveMaximum === "number" && value >= s.exclusiveMaximum) return false;
  if (typeof s.multipleOf === "number" && !Number.isInteger(value / s.multipleOf)) return false;
  if (s[NON_INTEGER] === true && Number.isInteger(value)) return false;
  const range = typeof s.format === "string" ? INTEGER_FORMATS[s.format] : undefined;
  if (range !== undefined) {
    if (!Number.isInteger(value)) return false;
    const big = BigInt(value);
    if (big < range[0] || big > range[1]) return false;
  }
  return true;
}

/**
 * Whether the `enum`/`const` value `value` satisfies the other keywords of `s` (a schema without
 * `$ref`/`allOf`/`anyOf`/`oneOf`, whose `type` the caller has checked). Keywords for other JSON types do not
 * apply. Object values with object keywords and array values with `items`-like keywords are a 400.
 */
export function literalFits(ctx: CompileContext, value: unknown, s: SchemaObject, path: string): boolean {
  if (typeof value === "string") return stringFits(ctx, value, s, path);
  if (typeof value === "number") return numberFits(value, s);
  if (Array.isArray(value)) {
    const unchecked = ARRAY_KEYWORDS_UNCHECKED.find((k) => k in s);
    if (unchecked !== undefined)
      ctx.fail(`Unsupported combination at ${path}: 'enum'/'const' array values with '${unchecked}'.`);
    if (typeof s.minItems === "number" && value.length < s.minItems) return false;
    if (typeof s.maxItems === "number" && value.length > s.maxItems) return false;
    if (s.uniqueItems === true && new Set(value.map(canonical)).size !== value.length) return false;
    return true;
  }
  if (typeof value === "object" && value !== null) {
    const unchecked = OBJECT_KEYWORDS.find((k) => k in s);
    if (unchecked !== undefined)
      ctx.fail(`Unsupported combination at ${path}: 'enum'/'const' object values with '${unchecked}'.`);
  }
  return true;
}

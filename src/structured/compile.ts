/**
 * The guided-decoding compiler's entry point: turns a request's constraint (vLLM's `guided_json`,
 * `guided_regex`, `guided_choice`, `guided_grammar`, OpenAI's `response_format`) into GBNF text that the
 * engine loads with `llama.createGrammar({grammar})`. Results are cached in an LRU keyed by kind, canonical
 * spec and whitespace pattern.
 */

import { ConstraintError } from "./errors.ts";
import { choiceToGbnf } from "./gbnf/choiceToGbnf.ts";
import { checkGbnfText } from "./gbnf/validateGbnf.ts";
import { canonicalSchemaJson } from "./jsonSchema/canonicalJson.ts";
import { jsonObjectToGbnf, jsonSchemaToGbnf } from "./jsonSchema/compiler.ts";
import { regexToGbnf } from "./regex/regexToGbnf.ts";
import { LruCache } from "./worker/lru.ts";

/** The kinds of constraint. */
export type ConstraintKind = "json_schema" | "json_object" | "regex" | "choice" | "grammar";

/** A compiled constraint: GBNF text whose root rule matches exactly the allowed outputs. */
export type CompiledConstraint = Readonly<{ kind: ConstraintKind; gbnf: string }>;

/** Options of {@link compileConstraint}. */
export type CompileOptions = {
  /**
   * vLLM's `guided_whitespace_pattern`: a regex for the whitespace between JSON tokens (json_schema and
   * json_object only). Default: bounded optional whitespace (see `jsonPrimitives.ts`).
   */
  whitespacePattern?: string;
  /** The request field named in 400 errors; defaults per kind (`guided_json`, `response_format`, ...). */
  param?: string;
};

/** Entries kept in the compile cache. */
export const COMPILE_CACHE_SIZE = 256;

const DEFAULT_PARAM: Record<ConstraintKind, string> = {
  json_schema: "guided_json",
  json_object: "response_format",
  regex: "guided_regex",
  choice: "guided_choice",
  grammar: "guided_grammar",
};

const cache = new LruCache<string, CompiledConstraint>(COMPILE_CACHE_SIZE);

/**
 * Compiles a guided-decoding constraint to GBNF.
 * - `json_schema`: `spec` is a JSON Schema object (or its JSON text); see `jsonSchemaToGbnf`.
 * - `json_object`: `spec` is ignored; any JSON object.
 * - `regex`: `spec` is a pattern string, full-match semantics; see `regexToGbnf`.
 * - `choice`: `spec` is a non-empty array of strings; see `choiceToGbnf`.
 * - `grammar`: `spec` is GBNF text, checked by our port of llama.cpp's parser and passed through unchanged
 *   (use `validateGbnf` with a `Llama` for the native check).
 * Returns a frozen `{kind, gbnf}`, cached by (kind, canonical spec, whitespace pattern).
 * Throws `ConstraintError` naming the problem (unsupported keyword and JSON pointer, regex construct, grammar
 * parse error) with `param` set.
 */
export function compileConstraint(
  kind: ConstraintKind,
  spec: unknown,
  options: CompileOptions = {},
): CompiledConstraint {
  try {
    return compileUncaught(kind, spec, options);
  } catch (error) {
    // A spec nested deeper than the compilers' recursion can follow: a 400, never a 500.
    if (error instanceof RangeError) {
      throw new ConstraintError(
        "The constraint is nested too deeply to compile; flatten it (for example with $defs and $ref).",
        options.param ?? DEFAULT_PARAM[kind] ?? null,
      );
    }
    throw error;
  }
}

function compileUncaught(kind: ConstraintKind, spec: unknown, options: CompileOptions): CompiledConstraint {
  const param = options.param ?? DEFAULT_PARAM[kind];
  if (!(kind in DEFAULT_PARAM))
    throw new ConstraintError(`Unknown guided decoding kind '${String(kind)}'.`, param);
  if (options.whitespacePattern !== undefined && typeof options.whitespacePattern !== "string") {
    throw new ConstraintError("guided_whitespace_pattern must be a string.", "guided_whitespace_pattern");
  }
  let value = spec;
  if (kind === "json_schema" && typeof spec === "string") {
    try {
      value = JSON.parse(spec);
    } catch (error) {
      throw new ConstraintError(`The JSON schema is not valid JSON: ${(error as Error).message}`, param);
    }
  }
  const ws = kind === "json_schema" || kind === "json_object" ? (options.whitespacePattern ?? "") : "";
  const specText =
    kind === "json_schema" ? canonicalSchemaJson(value) : kind === "json_object" ? "" : JSON.stringify(value);
  const key = `${kind}\u0000${ws}\u0000${specText}`;
  const cached = cache.get(key);
  if (cached !== undefined) return cached;
  const gbnf = build(kind, value, param, options.whitespacePattern);
  const result: CompiledConstraint = Object.freeze({ kind, gbnf });
  cache.set(key, result);
  return result;
}

function build(
  kind: ConstraintKind,
  spec: unknown,
  param: string,
  whitespacePattern: string | undefined,
): string {
  const jsonOptions = whitespacePattern === undefined ? { param } : { param, whitespacePattern };
  switch (kind) {
    case "json_schema":
      return jsonSchemaToGbnf(spec, jsonOptions);
    case "json_object":
      return jsonObjectToGbnf(jsonOptions);
    case "regex":
      return regexToGbnf(spec as string, param);
    case "choice":
      return choiceToGbnf(spec, param);
    case "grammar":
      if (typeof spec !== "string") throw new ConstraintError("The grammar must be a GBNF string.", param);
      checkGbnfText(spec, param);
      return spec;
  }
}

/** Empties the compile cache (tests and benchmarks). */
export function clearCompileCache(): void {
  cache.clear();
}

/**
 * Guided decoding at the serving layer: finds the request's one constraint among every spelling
 * clients send (vLLM's `guided_*` at top level and in NIM's `nvext`, vLLM >= 0.12's
 * `structured_outputs`, OpenAI's `response_format`, llama-server's top-level `grammar` and
 * `json_schema`, and `response_format.schema` of llama-server, Together and Fireworks), compiles it (`structured/`) and turns it into a
 * native llama.cpp grammar, cached by its GBNF text.
 */
import { checkGrammar } from "../engine/grammar.ts";
import type { Grammar } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import { type ConstraintKind, compileConstraint, validateGbnf } from "../structured/index.ts";
import { LruCache } from "../structured/lru.ts";
import { type CommonRequest, requestFields } from "./requestFields.ts";

/** One constraint of a request: what to compile, and the field it came from (for 400s). */
export type GuidedConstraint = {
  kind: ConstraintKind;
  spec: unknown;
  /** The request field it came from, e.g. `nvext.guided_json` or `response_format`. */
  param: string;
};

/** Backend names `guided_decoding_backend` accepts: ours is llama.cpp's GBNF sampler. */
const BACKENDS = new Set(["auto", "gbnf", "llama.cpp", "llamacpp"]);

const grammars = new LruCache<string, Grammar>(128);

/**
 * The request's guided-decoding constraint, or null when it has none.
 * @throws ApiError 400 when more than one constraint is given in any spellings (never silently pick
 *   one), for an unknown `guided_decoding_backend`, for `response_format: json_schema` without a
 *   schema, for `response_format: text` with a `schema`, or for a constraint with a field that could
 *   break it (see {@link refuseConflictingFields}).
 */
export function resolveGuidedConstraint(body: CommonRequest): GuidedConstraint | null {
  const found: GuidedConstraint[] = [];
  const add = (kind: ConstraintKind, spec: unknown, param: string) => {
    if (spec !== undefined && spec !== null && spec !== false) found.push({ kind, spec, param });
  };
  const nvext = body.nvext ?? {};
  for (const [prefix, source] of [
    ["", body],
    ["nvext.", nvext],
  ] as const) {
    add("json_schema", source.guided_json, `${prefix}guided_json`);
    add("regex", source.guided_regex, `${prefix}guided_regex`);
    add("choice", source.guided_choice, `${prefix}guided_choice`);
    add("grammar", source.guided_grammar, `${prefix}guided_grammar`);
    const backend = source.guided_decoding_backend;
    if (backend !== undefined && backend !== null && !BACKENDS.has(backend)) {
      throw badRequest(
        `Unknown guided_decoding_backend '${backend}': this server's backend is llama.cpp's GBNF sampler (accepted names: ${[...BACKENDS].join(", ")}).`,
        `${prefix}guided_decoding_backend`,
      );
    }
  }
  const structured = body.structured_outputs;
  if (structured) {
    add("json_schema", structured.json, "structured_outputs.json");
    add("regex", structured.regex, "structured_outputs.regex");
    add("choice", structured.choice, "structured_outputs.choice");
    add("grammar", structured.grammar, "structured_outputs.grammar");
    add("json_object", structured.json_object ? {} : null, "structured_outputs.json_object");
  }
  // llama-server's top-level spellings.
  add("grammar", body.grammar, "grammar");
  add("json_schema", body.json_schema, "json_schema");
  const format = body.response_format;
  if (format?.type === "text" && format.schema) {
    throw badRequest(
      'response_format.schema needs type "json_object" or "json_schema"; type "text" does not constrain the output.',
      "response_format.schema",
    );
  }
  // `{type: "json_object", schema}` (llama-server, Together, Fireworks; instructor's JSON_SCHEMA mode).
  if (format?.type === "json_object") {
    if (format.schema) add("json_schema", format.schema, "response_format.schema");
    else add("json_object", {}, "response_format");
  }
  if (format?.type === "json_schema") {
    const schema = format.json_schema?.schema;
    if (!schema && !format.schema)
      throw badRequest(
        "response_format json_schema needs json_schema.schema.",
        "response_format.json_schema",
      );
    add("json_schema", schema, "response_format.json_schema.schema");
    add("json_schema", format.schema, "response_format.schema");
  }
  if (found.length > 1) {
    throw badRequest(
      `Only one guided decoding constraint may be given, got ${found.length}: ${found.map((c) => c.param).join(", ")}.`,
      found[1]?.param ?? null,
    );
  }
  if (found.length === 1) refuseConflictingFields(body);
  return found[0] ?? null;
}

/**
 * Compiles the request's constraint into a native grammar (cached by GBNF text), or null without one.
 * @throws ApiError 400 naming the unsupported keyword, regex construct or grammar parse error.
 */
export async function grammarForRequest(body: CommonRequest): Promise<Grammar | null> {
  const constraint = resolveGuidedConstraint(body);
  if (!constraint) return null;
  return grammarForGbnf(compileGuided(constraint, requestFields(body).whitespacePattern), constraint.param);
}

/**
 * The GBNF text of one constraint (`structured/`), JSON constraints with the request's whitespace
 * pattern (`RequestFields.whitespacePattern`; undefined: the compilers' default). The one compile step
 * of both endpoints (chat's forced tool calls included).
 * @throws ApiError 400 naming the constraint's field for what cannot be compiled.
 */
export function compileGuided(constraint: GuidedConstraint, whitespacePattern: string | undefined): string {
  return compileConstraint(constraint.kind, constraint.spec, {
    param: constraint.param,
    ...(whitespacePattern !== undefined ? { whitespacePattern } : {}),
  }).gbnf;
}

/**
 * Refuses fields that would break the promise that an output finishing with `stop` satisfies the
 * constraint: `stop` strings and `stop_token_ids` can end the output before the grammar is complete.
 * (`ignore_eos` and `min_tokens` are refused in `generationParams.ts`.) Prompt logprobs (also `echo` with
 * `logprobs`) are the raw distribution of the prompt's rows, which no constraint applies to, as vLLM.
 * @throws ApiError 400 naming the field.
 */
function refuseConflictingFields(body: CommonRequest): void {
  const stop = body.stop;
  if (stop !== undefined && stop !== null && stop.length > 0) {
    throw badRequest(
      "stop cannot be combined with a guided decoding constraint: a stop string could end the output before it satisfies the constraint (the constraint ends the output itself).",
      "stop",
    );
  }
  if (body.stop_token_ids && body.stop_token_ids.length > 0) {
    throw badRequest(
      "stop_token_ids cannot be combined with a guided decoding constraint: a stop token could end the output before it satisfies the constraint.",
      "stop_token_ids",
    );
  }
}

/**
 * The engine grammar for GBNF text, validated by llama.cpp's parser once and cached; a refused text is
 * not cached.
 * @throws ApiError 400 naming `param` when the grammar does not parse.
 */
export function grammarForGbnf(gbnf: string, param: string): Grammar {
  let grammar = grammars.get(gbnf);
  if (!grammar) {
    grammar = { gbnf: validateGbnf(gbnf, checkGrammar, param) };
    grammars.set(gbnf, grammar);
  }
  return grammar;
}

/**
 * The one place that reads a request field's aliases: NIM's `nvext` spellings, `max_completion_tokens`
 * beside `max_tokens`, the whitespace pattern of JSON constraints in its three spellings, and the
 * guided-decoding constraint in every spelling clients send (vLLM's `guided_*` at top level and in NIM's
 * `nvext`, vLLM >= 0.12's `structured_outputs`, OpenAI's `response_format`, llama-server's top-level
 * `grammar` and `json_schema`, and `response_format.schema` of llama-server, Together and Fireworks).
 * The rest of serving reads the folded {@link RequestFields} (as vLLM's `to_sampling_params` and TGI's
 * `ValidGenerateRequest` take one resolved request); the checks between fields run once, in
 * `requestChecks.ts`.
 */
import { badRequest } from "../../errors.ts";
import type { ChatCompletionRequest } from "../../protocol/chat.ts";
import type { CompletionRequest } from "../../protocol/completions.ts";
import type { ConstraintKind } from "../../structured/index.ts";

/** A chat or completions request: the fields both endpoints share. */
export type CommonRequest = CompletionRequest | ChatCompletionRequest;

/** A request's generation fields with every alias folded in; each is the top-level field when given. */
export type RequestFields = {
  /**
   * `max_completion_tokens`, else `max_tokens` (chat; completions have only `max_tokens`): undefined when
   * absent, null for "until the context ends".
   */
  maxTokens: number | null | undefined;
  /** `top_k`, else `nvext.top_k`; -1 (the API's "off") when neither is given. */
  topK: number;
  /** `min_p`, else `nvext.min_p`; 0 = off. */
  minP: number;
  /** `repetition_penalty`, else `nvext.repetition_penalty`; 1 = off. */
  repetitionPenalty: number;
  /** `min_tokens`, else `nvext.min_tokens`; 0 = none. */
  minTokens: number;
  /** `ignore_eos`, else `nvext.ignore_eos`; false when neither is given. */
  ignoreEos: boolean;
  /**
   * `nvext.max_thinking_tokens`, else (chat) vLLM's `thinking_token_budget`, llama-server's
   * `reasoning_budget_tokens` / `thinking_budget_tokens` (-1 there: no budget); undefined: no budget.
   */
  maxThinkingTokens: number | undefined;
  /**
   * The whitespace JSON constraints allow: `guided_whitespace_pattern`, else
   * `nvext.guided_whitespace_pattern`, else `structured_outputs.whitespace_pattern`; undefined: the
   * compilers' default.
   */
  whitespacePattern: string | undefined;
  /** The field {@link RequestFields.whitespacePattern} came from, as its errors name it. */
  whitespacePatternParam: string;
  /** The one guided-decoding constraint, from whichever spelling gave it; null when none. */
  constraint: GuidedConstraint | null;
};

/** One constraint of a request: what to compile, and the field it came from (for 400s). */
export type GuidedConstraint = {
  kind: ConstraintKind;
  spec: unknown;
  /** The request field it came from, e.g. `nvext.guided_json` or `response_format`. */
  param: string;
};

/**
 * Folds every alias and `nvext` spelling of a chat or completions request (see {@link RequestFields}).
 * @throws ApiError 400 for a constraint spelled wrong or twice (see {@link guidedConstraintOf}).
 */
export function requestFields(body: CommonRequest): RequestFields {
  const nvext = body.nvext;
  const maxTokens = isChat(body) ? (body.max_completion_tokens ?? body.max_tokens) : body.max_tokens;
  return {
    maxTokens,
    topK: body.top_k ?? nvext?.top_k ?? -1,
    minP: body.min_p ?? nvext?.min_p ?? 0,
    repetitionPenalty: body.repetition_penalty ?? nvext?.repetition_penalty ?? 1,
    minTokens: body.min_tokens ?? nvext?.min_tokens ?? 0,
    ignoreEos: body.ignore_eos ?? nvext?.ignore_eos ?? false,
    maxThinkingTokens: thinkingBudgetOf(body),
    whitespacePattern:
      body.guided_whitespace_pattern ??
      nvext?.guided_whitespace_pattern ??
      body.structured_outputs?.whitespace_pattern ??
      undefined,
    whitespacePatternParam:
      body.guided_whitespace_pattern != null
        ? "guided_whitespace_pattern"
        : nvext?.guided_whitespace_pattern != null
          ? "nvext.guided_whitespace_pattern"
          : body.structured_outputs?.whitespace_pattern != null
            ? "structured_outputs.whitespace_pattern"
            : "guided_whitespace_pattern",
    constraint: guidedConstraintOf(body),
  };
}

/**
 * The thinking budget among its spellings (see {@link RequestFields.maxThinkingTokens}).
 * @throws ApiError 400 when two spellings give different budgets.
 */
function thinkingBudgetOf(body: CommonRequest): number | undefined {
  const given: [string, number | undefined][] = [
    ["nvext.max_thinking_tokens", body.nvext?.max_thinking_tokens ?? undefined],
  ];
  if (isChat(body)) {
    const unlimited = (value: number | null | undefined) =>
      value === -1 || value === null ? undefined : value;
    given.push(
      ["thinking_token_budget", body.thinking_token_budget ?? undefined],
      ["reasoning_budget_tokens", unlimited(body.reasoning_budget_tokens)],
      ["thinking_budget_tokens", unlimited(body.thinking_budget_tokens)],
    );
  }
  const set = given.filter((entry): entry is [string, number] => entry[1] !== undefined);
  const first = set[0];
  const other = set.find((entry) => entry[1] !== first?.[1]);
  if (first && other) {
    throw badRequest(
      `${other[0]} (${other[1]}) conflicts with ${first[0]} (${first[1]}): give the thinking budget once.`,
      other[0],
    );
  }
  return first?.[1];
}

/** Backend names `guided_decoding_backend` accepts: ours is llama.cpp's GBNF sampler. */
const BACKENDS = new Set(["auto", "gbnf", "llama.cpp", "llamacpp"]);

/**
 * The request's guided-decoding constraint among every spelling (see the module comment), or null when
 * it has none.
 * @throws ApiError 400 when more than one constraint is given in any spellings (never silently pick
 *   one), for an unknown `guided_decoding_backend`, for `response_format: json_schema` without a
 *   schema, or for `response_format: text` with a `schema`. What may not come with a constraint
 *   (`stop`, `ignore_eos`, ...) is refused by `requestChecks.ts`.
 */
function guidedConstraintOf(body: CommonRequest): GuidedConstraint | null {
  const found: GuidedConstraint[] = [];
  const add = (kind: ConstraintKind, spec: unknown, param: string) => {
    if (spec !== undefined && spec !== null) found.push({ kind, spec, param });
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
    // vLLM's options this server does not implement are refused, never ignored (`disable_fallback`
    // changes nothing here: there is one backend).
    const unsupported: [string, boolean][] = [
      ["structural_tag", structured.structural_tag !== undefined && structured.structural_tag !== null],
      ["disable_any_whitespace", structured.disable_any_whitespace === true],
      ["disable_additional_properties", structured.disable_additional_properties === true],
    ];
    for (const [name, present] of unsupported) {
      if (present) {
        throw badRequest(
          `The field 'structured_outputs.${name}' (vLLM) is not supported by this server: use \`guided_whitespace_pattern\` for JSON whitespace and \`additionalProperties\` in the schema; structural tags are not implemented.`,
          `structured_outputs.${name}`,
          "unsupported_field",
        );
      }
    }
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
  return found[0] ?? null;
}

/** True for a chat request (it has `messages`; a completions request has a `prompt`). */
function isChat(body: CommonRequest): body is ChatCompletionRequest {
  return "messages" in body;
}

/**
 * Request and response pieces shared by the completions and chat completions endpoints, as zod
 * schemas. Field order follows the OpenAI docs; vLLM, NIM (`nvext`) and Nscale extensions are fenced
 * and commented with their source. Types are checked here (a wrong type is a 422); value ranges are
 * checked here too but reported as 400 (see `server/validation.ts`).
 */
import { z } from "zod";
import { PeerFieldsSchema } from "./peerFields.ts";

/** `stop`: one string or a list of up to 16 strings (OpenAI allows 4; vLLM any number). */
export const StopSchema = z.union([z.string(), z.array(z.string()).max(16)]).nullish();

/** `stream_options` (OpenAI), plus vLLM's `continuous_usage_stats`. */
export const StreamOptionsSchema = z
  .object({
    include_usage: z.boolean().nullish(),
    /** vLLM: cumulative usage in every chunk. */
    continuous_usage_stats: z.boolean().nullish(),
  })
  .nullish();

/** `logit_bias`: token id (as a string) to a bias in [-100, 100]. */
export const LogitBiasSchema = z.record(z.string(), z.number().min(-100).max(100)).nullish();

/**
 * `response_format` (OpenAI): text, JSON mode, or a JSON Schema; plus `schema` beside `type`
 * (llama-server, Together, Fireworks; instructor's JSON_SCHEMA mode sends
 * `{type: "json_object", schema}`), which constrains the output to that schema.
 */
export const ResponseFormatSchema = z
  .object({
    type: z.enum(["text", "json_object", "json_schema"]),
    /** llama-server / Together / Fireworks: the JSON Schema of a `json_object` (or `json_schema`) format. */
    schema: z.record(z.string(), z.unknown()).nullish(),
    json_schema: z
      .object({
        name: z.string(),
        description: z.string().nullish(),
        schema: z.record(z.string(), z.unknown()).nullish(),
        strict: z.boolean().nullish(),
      })
      .nullish(),
  })
  .nullish();

/** A guided-JSON schema: an object, or the same as a JSON string (NIM `guided_json`). */
/** A JSON Schema given as an object, its JSON text, or a boolean schema (`true`: any JSON, `false`: nothing). */
export const GuidedJsonSchema = z
  .union([z.string(), z.record(z.string(), z.unknown()), z.boolean()])
  .nullish();

/** NIM's `nvext` extension object. */
export const NvextSchema = z
  .object({
    ignore_eos: z.boolean().nullish(),
    repetition_penalty: z.number().gt(0).nullish(),
    top_k: z.number().int().nullish(),
    min_p: z.number().min(0).max(1).nullish(),
    min_tokens: z.number().int().min(0).nullish(),
    guided_json: GuidedJsonSchema,
    guided_regex: z.string().nullish(),
    guided_choice: z.array(z.string()).nullish(),
    guided_grammar: z.string().nullish(),
    guided_decoding_backend: z.string().nullish(),
    guided_whitespace_pattern: z.string().nullish(),
    max_thinking_tokens: z.number().int().min(0).nullish(),
  })
  .nullish();

/**
 * vLLM's `cache_salt` (RFC #16016): requests reuse each other's cached prompt prefix only when they
 * carry the same salt; null or absent: the server's default isolation domain (`--prefix-cache-scope`).
 * As vLLM, it must be a non-empty string when given.
 */
export const CacheSaltSchema = z
  .string()
  .min(1, { message: "Parameter 'cache_salt' must be a non-empty string if provided." })
  .nullish();

/**
 * Sampling and generation-control fields accepted by both endpoints. `max_tokens` and `logprobs`
 * differ between the endpoints and live in their own schemas.
 */
export const SamplingFieldsSchema = {
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  logit_bias: LogitBiasSchema,
  n: z.number().int().min(1).max(16).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  seed: z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER).nullish(),
  stop: StopSchema,
  stream: z.boolean().nullish(),
  stream_options: StreamOptionsSchema,
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  user: z.string().nullish(),
  response_format: ResponseFormatSchema,
  // --- vLLM sampling extensions ---
  top_k: z.number().int().nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  repetition_penalty: z.number().gt(0).nullish(),
  ignore_eos: z.boolean().nullish(),
  min_tokens: z.number().int().min(0).nullish(),
  stop_token_ids: z.array(z.number().int().min(0)).nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  prompt_logprobs: z.number().int().min(0).max(20).nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  request_id: z.string().nullish(),
  cache_salt: CacheSaltSchema,
  priority: z.number().int().nullish(),
  add_special_tokens: z.boolean().nullish(),
  // --- vLLM guided decoding (pre-0.12 spelling, also in NIM) ---
  guided_json: GuidedJsonSchema,
  guided_regex: z.string().nullish(),
  guided_choice: z.array(z.string()).nullish(),
  guided_grammar: z.string().nullish(),
  guided_decoding_backend: z.string().nullish(),
  guided_whitespace_pattern: z.string().nullish(),
  // --- vLLM >= 0.12 guided decoding (replaces guided_*) ---
  structured_outputs: z
    .object({
      json: GuidedJsonSchema,
      regex: z.string().nullish(),
      choice: z.array(z.string()).nullish(),
      grammar: z.string().nullish(),
      json_object: z.boolean().nullish(),
      whitespace_pattern: z.string().nullish(),
      /** vLLM's other options: refused unless they change nothing (`serving/request/requestFields.ts`). */
      structural_tag: z.unknown().optional(),
      disable_any_whitespace: z.boolean().nullish(),
      disable_additional_properties: z.boolean().nullish(),
      disable_fallback: z.boolean().nullish(),
    })
    .nullish(),
  // --- llama-server guided decoding ---
  /** llama-server: a GBNF grammar the output must match. */
  grammar: z.string().nullish(),
  /** llama-server: a JSON Schema the output must match. */
  json_schema: z.record(z.string(), z.unknown()).nullish(),
  // --- NIM ---
  nvext: NvextSchema,
  // --- peers' fields this server refuses or ignores on purpose (see `serving/request/peerFields.ts`) ---
  ...PeerFieldsSchema,
};

/** Token counts of a response (`usage`), with vLLM's `prompt_tokens_details.cached_tokens`. */
export type Usage = {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number } | null;
};

/** OpenAI's `reasoning_effort` values (chat completions; Responses' `reasoning.effort`). */
export const REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"] as const;

/** One of {@link REASONING_EFFORTS}. */
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

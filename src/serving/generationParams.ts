/**
 * Maps a validated API request to engine parameters in one place (as vLLM's `to_sampling_params()`),
 * with the semantic checks that the schema cannot express.
 */
import { randomInt } from "node:crypto";
import type { GenerationRequest, SamplingParams } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import type { ChatCompletionRequest } from "../protocol/chat.ts";
import type { CompletionRequest } from "../protocol/completions.ts";

/** Fields both endpoints share. */
export type CommonRequest = CompletionRequest | ChatCompletionRequest;

/** Request fields accepted by the schema but not honoured yet: a 400 rather than a silent no-op. */
const UNSUPPORTED_FIELDS: readonly (keyof CompletionRequest | keyof ChatCompletionRequest)[] = [
  "logit_bias",
  "prompt_logprobs",
  "guided_json",
  "guided_regex",
  "guided_choice",
  "guided_grammar",
  "best_of",
  "suffix",
  "min_tokens",
  "stop_token_ids",
  "tools",
  "echo",
  "ignore_eos",
  "return_tokens_as_token_ids",
];

/**
 * Refuses fields this server accepts in its schema but does not yet honour, so that no request is
 * silently served differently from what it asked.
 * @throws ApiError 400 naming the field.
 */
export function refuseUnsupportedFields(body: CommonRequest): void {
  const record = body as Record<string, unknown>;
  for (const field of UNSUPPORTED_FIELDS) {
    const value = record[field];
    if (value === undefined || value === null) continue;
    if (field === "best_of" && value === 1) continue;
    if (field === "min_tokens" && value === 0) continue;
    if (value === false) continue;
    if (Array.isArray(value) && value.length === 0 && field !== "guided_choice") continue;
    throw badRequest(`The field '${field}' is not supported by this server yet.`, field, "unsupported_field");
  }
  const penalties: [string, number | null | undefined, number][] = [
    ["frequency_penalty", body.frequency_penalty, 0],
    ["presence_penalty", body.presence_penalty, 0],
    ["repetition_penalty", body.repetition_penalty ?? body.nvext?.repetition_penalty, 1],
  ];
  for (const [field, value, neutral] of penalties) {
    if (value !== undefined && value !== null && value !== neutral) {
      throw badRequest(
        `The field '${field}' is not supported by this server yet.`,
        field,
        "unsupported_field",
      );
    }
  }
  if (body.nvext?.ignore_eos || body.stream_options?.continuous_usage_stats) {
    const field = body.nvext?.ignore_eos ? "nvext.ignore_eos" : "stream_options.continuous_usage_stats";
    throw badRequest(`The field '${field}' is not supported by this server yet.`, field, "unsupported_field");
  }
  if (body.logprobs !== undefined && body.logprobs !== null && body.logprobs !== false) {
    throw badRequest(
      "The field 'logprobs' is not supported by this server yet.",
      "logprobs",
      "unsupported_field",
    );
  }
  if (body.response_format && body.response_format.type !== "text") {
    throw badRequest(
      `response_format type '${body.response_format.type}' is not supported by this server yet.`,
      "response_format",
      "unsupported_field",
    );
  }
}

/** Source of seeds for requests that give none: random, or reproducible from the server's `--seed`. */
export class SeedSource {
  private state: number | undefined;

  /** @param seed the server's `--seed`; undefined draws each request's seed at random. */
  constructor(seed: number | undefined) {
    this.state = seed === undefined ? undefined : seed >>> 0;
  }

  /** The next seed, a 32-bit unsigned integer. */
  next(): number {
    if (this.state === undefined) return randomInt(0, 2 ** 32);
    // mulberry32 step: a small, well-mixed PRNG for reproducible seed sequences.
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
}

/**
 * The sampling parameters of one choice. With an explicit `seed`, choice `i` samples with `seed + i`
 * so that `n > 1` gives different choices that are each reproducible.
 * @throws ApiError 400 for `top_k` other than -1, 0 or >= 1.
 */
export function samplingParams(body: CommonRequest, choice: number, seeds: SeedSource): SamplingParams {
  const topK = body.top_k ?? body.nvext?.top_k ?? -1;
  if (topK < -1) throw badRequest(`top_k must be -1 (disabled) or at least 1, got ${topK}.`, "top_k");
  const seed = body.seed === undefined || body.seed === null ? seeds.next() : (body.seed + choice) >>> 0;
  return {
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    topK: Math.max(topK, 0),
    minP: body.min_p ?? body.nvext?.min_p ?? 0,
    seed,
  };
}

/** The stop strings of a request as a list. */
export function stopStrings(stop: string | string[] | null | undefined): string[] {
  if (stop === undefined || stop === null) return [];
  return typeof stop === "string" ? [stop] : stop;
}

/**
 * Resolves `max_tokens` against the context: an explicit value must fit with the prompt; none means
 * "until the context ends".
 * @throws ApiError 400 naming the limit, as vLLM's "This model's maximum context length is ..." error.
 */
export function resolveMaxTokens(
  maxTokens: number | null | undefined,
  promptTokens: number,
  contextSize: number,
): number {
  if (promptTokens >= contextSize) {
    throw badRequest(
      `This model's maximum context length is ${contextSize} tokens. However, your prompt has ${promptTokens} tokens, which leaves no room for a completion. Shorten the prompt.`,
      "prompt",
      "context_length_exceeded",
    );
  }
  if (maxTokens === undefined || maxTokens === null) return contextSize - promptTokens;
  if (promptTokens + maxTokens > contextSize) {
    throw badRequest(
      `This model's maximum context length is ${contextSize} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the prompt, ${maxTokens} for the completion). Reduce the prompt or max_tokens.`,
      "max_tokens",
      "context_length_exceeded",
    );
  }
  return maxTokens;
}

/** Builds the engine request of one choice. */
export function generationRequest(
  body: CommonRequest,
  promptTokens: number[],
  maxTokens: number,
  choice: number,
  seeds: SeedSource,
): GenerationRequest {
  return {
    promptTokens,
    maxTokens,
    sampling: samplingParams(body, choice, seeds),
    stop: stopStrings(body.stop),
    includeStopStrInOutput: body.include_stop_str_in_output ?? false,
    priority: body.priority ?? 0,
  };
}

/**
 * Maps a validated API request and its folded fields (`requestFields.ts`) to engine parameters in one
 * place (as vLLM's `to_sampling_params()`), with the checks that need the model's vocabulary or the
 * resolved `max_tokens`; the checks between request fields alone ran before (`requestChecks.ts`).
 */
import { randomInt } from "node:crypto";
import type { GenerationRequest, Grammar, SamplingParams } from "../../engine/types.ts";
import { badRequest } from "../../errors.ts";
import type { EngineHost } from "../engine.ts";
import type { CommonRequest, RequestFields } from "./requestFields.ts";

/**
 * The server's seed policy: where requests without a `seed` get theirs (random, or reproducible from
 * the server's `--seed`), and whether requests with a `seed` run batch-invariant (alone in their decode
 * batches, so the same seed gives the same text under any load).
 */
export class SeedSource {
  private state: number | undefined;
  /** Seeded requests run batch-invariant (`--batch-invariant-seeds`, default off). */
  readonly seededBatchInvariant: boolean;

  /**
   * @param seed the server's `--seed`; undefined draws each request's seed at random.
   * @param seededBatchInvariant run requests that give a `seed` batch-invariant. Defaults to false: a
   *   seeded request shares batches with its own random generator (OpenAI's best-effort `seed`).
   */
  constructor(seed: number | undefined, seededBatchInvariant = false) {
    this.state = seed === undefined ? undefined : seed >>> 0;
    this.seededBatchInvariant = seededBatchInvariant;
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
 * so that `n > 1` gives different choices that are each reproducible. Aliases (`nvext`) are folded by
 * `requestFields.ts` (and `top_k` below -1 was refused by `requestChecks.ts`).
 * @throws ApiError 400 for `logit_bias` keys that are not token ids of the model's vocabulary.
 */
export function samplingParams(
  body: CommonRequest,
  fields: RequestFields,
  host: EngineHost,
  choice: number,
  seeds: SeedSource,
): SamplingParams {
  const topK = fields.topK;
  const seed = body.seed === undefined || body.seed === null ? seeds.next() : (body.seed + choice) >>> 0;
  return {
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    topK: Math.max(topK, 0),
    minP: fields.minP,
    seed,
    frequencyPenalty: body.frequency_penalty ?? 0,
    presencePenalty: body.presence_penalty ?? 0,
    repetitionPenalty: fields.repetitionPenalty,
    logitBias: logitBias(body.logit_bias, host.vocabularySize),
  };
}

/**
 * `logit_bias` as a map of token id to bias.
 * @throws ApiError 400 naming the key when it is not an integer token id below the vocabulary size.
 */
function logitBias(
  bias: Record<string, number> | null | undefined,
  vocabularySize: number,
): Map<number, number> {
  const map = new Map<number, number>();
  for (const [key, value] of Object.entries(bias ?? {})) {
    const id = Number(key);
    if (!/^\d+$/.test(key) || !Number.isSafeInteger(id) || id >= vocabularySize) {
      throw badRequest(
        `logit_bias key '${key}' is not a token id of this model (0..${vocabularySize - 1}).`,
        `logit_bias.${key}`,
      );
    }
    map.set(id, value);
  }
  return map;
}

/** The stop strings of a request as a list. */
export function stopStrings(stop: string | string[] | null | undefined): string[] {
  if (stop === undefined || stop === null) return [];
  return typeof stop === "string" ? [stop] : stop;
}

/**
 * Resolves `max_tokens` against the context: an explicit value must fit with the prompt; none means
 * "until the context ends", or at most `ceiling` tokens (the server's `--max-tokens-cap`).
 * @throws ApiError 400 naming the limit, as vLLM's "This model's maximum context length is ..." error.
 */
export function resolveMaxTokens(
  maxTokens: number | null | undefined,
  promptTokens: number,
  contextSize: number,
  ceiling?: number,
): number {
  if (promptTokens >= contextSize) {
    throw badRequest(
      `This model's maximum context length is ${contextSize} tokens. However, your prompt has ${promptTokens} tokens, which leaves no room for a completion. Shorten the prompt.`,
      "prompt",
      "context_length_exceeded",
    );
  }
  if (maxTokens === undefined || maxTokens === null)
    return Math.min(contextSize - promptTokens, ceiling ?? Infinity);
  if (promptTokens + maxTokens > contextSize) {
    throw badRequest(
      `This model's maximum context length is ${contextSize} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the prompt, ${maxTokens} for the completion). Reduce the prompt or max_tokens.`,
      "max_tokens",
      "context_length_exceeded",
    );
  }
  return maxTokens;
}

/** How many logprobs a choice reports: per generated token and per prompt token (null = none). */
export type LogprobCounts = { logprobs: number | null; promptLogprobs: number | null };

/**
 * Builds the engine request of one choice, with the request's guided-decoding grammar (or null).
 * `ignore_eos` or `min_tokens` with a grammar were refused by `requestChecks.ts`.
 * @throws ApiError 400 for a stop token id outside the vocabulary, for `min_tokens` above the resolved
 *   `max_tokens` (and see {@link samplingParams}).
 */
export function generationRequest(
  body: CommonRequest,
  fields: RequestFields,
  host: EngineHost,
  promptTokens: number[],
  maxTokens: number,
  choice: number,
  seeds: SeedSource,
  counts: LogprobCounts,
  grammar: Grammar | null,
): GenerationRequest {
  const stopTokenIds = body.stop_token_ids ?? [];
  const outside = stopTokenIds.find((id) => id >= host.vocabularySize);
  if (outside !== undefined) {
    throw badRequest(`stop_token_ids: ${outside} is not a token id of this model.`, "stop_token_ids");
  }
  const { minTokens, ignoreEos } = fields;
  if (minTokens > maxTokens) {
    // As vLLM: "min_tokens must be less than or equal to max_tokens".
    throw badRequest(
      `min_tokens (${minTokens}) must be less than or equal to max_tokens (${maxTokens}).`,
      "min_tokens",
    );
  }
  const sampling = samplingParams(body, fields, host, choice, seeds);
  return {
    promptTokens,
    maxTokens,
    sampling,
    stop: stopStrings(body.stop),
    includeStopStrInOutput: body.include_stop_str_in_output ?? false,
    priority: body.priority ?? 0,
    minTokens,
    ignoreEos,
    stopTokenIds,
    logprobs: counts.logprobs,
    promptLogprobs: counts.promptLogprobs,
    grammar,
    batchInvariant: seeds.seededBatchInvariant && body.seed !== undefined && body.seed !== null,
  };
}

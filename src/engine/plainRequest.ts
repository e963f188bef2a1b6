import type { GenerationRequest } from "./types.ts";

/**
 * A generation request with every option neutral: no sampling transform (temperature 1 unless given),
 * no penalties, bias, stops, logprobs or grammar, priority 0, not batch-invariant. The engine-level
 * callers (embeddings, in-process benchmarks and tests) start from it and set what they need.
 * @param overrides fields to set; `sampling` fields are merged into the neutral sampling.
 */
export function plainRequest(
  promptTokens: readonly number[],
  maxTokens: number,
  overrides: Partial<Omit<GenerationRequest, "sampling">> & {
    sampling?: Partial<GenerationRequest["sampling"]>;
  } = {},
): GenerationRequest {
  const { sampling, ...rest } = overrides;
  return {
    promptTokens,
    maxTokens,
    sampling: {
      temperature: 1,
      topP: 1,
      topK: 0,
      minP: 0,
      seed: 0,
      frequencyPenalty: 0,
      presencePenalty: 0,
      repetitionPenalty: 1,
      logitBias: new Map(),
      ...sampling,
    },
    stop: [],
    includeStopStrInOutput: false,
    priority: 0,
    minTokens: 0,
    ignoreEos: false,
    stopTokenIds: [],
    logprobs: null,
    promptLogprobs: null,
    grammar: null,
    batchInvariant: false,
    ...rest,
  };
}

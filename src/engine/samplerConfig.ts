import type { NativeSamplerConfig } from "./native.ts";
import type { GenerationRequest, LazyGrammarStart } from "./types.ts";

/**
 * The native sampler settings of a generation (see native/src/sampler.h): its sampling parameters,
 * `logit_bias`, the bans (EOS with `ignore_eos`; EOS and stop token ids before `min_tokens`), the prompt
 * for `repetition_penalty`, and the grammar (with its lazy start, when it has one).
 * @param endOfGeneration the model's end-of-generation token ids.
 */
export function samplerConfig(
  request: GenerationRequest,
  endOfGeneration: readonly number[],
): NativeSamplerConfig {
  const { sampling } = request;
  const biasIds = Int32Array.from(sampling.logitBias.keys());
  const biasValues = Float32Array.from(sampling.logitBias.values());
  return {
    temperature: sampling.temperature,
    topK: sampling.topK,
    topP: sampling.topP,
    minP: sampling.minP,
    repetitionPenalty: sampling.repetitionPenalty,
    frequencyPenalty: sampling.frequencyPenalty,
    presencePenalty: sampling.presencePenalty,
    seed: sampling.seed >>> 0,
    minTokens: request.minTokens,
    biasIds,
    biasValues,
    banAlways: Int32Array.from(request.ignoreEos ? endOfGeneration : []),
    banEarly: Int32Array.from(request.minTokens > 0 ? [...endOfGeneration, ...request.stopTokenIds] : []),
    ...(sampling.repetitionPenalty !== 1 ? { promptTokens: Int32Array.from(request.promptTokens) } : {}),
    ...(request.grammar
      ? { grammar: request.grammar.gbnf, grammarRoot: request.grammar.root ?? "root" }
      : {}),
    ...(request.grammar?.lazy ? lazyConfig(request.grammar.lazy) : {}),
  };
}

/** The native sampler fields of a lazy grammar's start. */
function lazyConfig(lazy: LazyGrammarStart): Partial<NativeSamplerConfig> {
  return {
    grammarTriggers: [...lazy.triggers],
    ...(lazy.thinking
      ? {
          grammarBlockOpen: lazy.thinking.open,
          grammarBlockClose: lazy.thinking.close,
          grammarStartsInBlock: lazy.thinking.opened,
        }
      : {}),
  };
}

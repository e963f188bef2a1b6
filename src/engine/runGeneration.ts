import type { Token } from "node-llama-cpp";
import { IncrementalDetokenizer } from "./IncrementalDetokenizer.ts";
import type { ModelHost } from "./ModelHost.ts";
import { commonPrefixLength, type Slot } from "./Scheduler.ts";
import { StopMatcher } from "./StopMatcher.ts";
import type { FinishReason, GenerationObserver, GenerationRequest, GenerationResult } from "./types.ts";

/** Options of {@link runGeneration}. */
export type RunGenerationOptions = {
  /** Aborting it ends the generation within one decode step. */
  signal: AbortSignal | undefined;
  /** Reuse the slot's cached prefix; otherwise the slot's KV cache is cleared first. */
  prefixCaching: boolean;
  /** Called once when the first completion token has been sampled (prefill done). */
  onFirstToken?: () => void;
};

/**
 * The token loop of one generation on one slot: evaluates the uncached part of the prompt, then samples
 * token after token until EOS, a stop string, `maxTokens`, the end of the context or an abort.
 * Text reaches the observer UTF-8 safe and with stop strings held back (see {@link StopMatcher}).
 * @throws whatever node-llama-cpp throws on an evaluation failure (the caller resets the slot).
 */
export async function runGeneration(
  host: ModelHost,
  slot: Slot,
  request: GenerationRequest,
  observer: GenerationObserver,
  options: RunGenerationOptions,
): Promise<GenerationResult> {
  const { sequence } = slot;
  const prompt = request.promptTokens;
  let cachedTokens = options.prefixCaching ? commonPrefixLength(sequence.contextTokens, prompt) : 0;
  // At least one prompt token must be evaluated to get the next token's distribution.
  if (cachedTokens >= prompt.length) cachedTokens = prompt.length - 1;
  if (cachedTokens === 0) await sequence.clearHistory();
  else if (sequence.nextTokenIndex > cachedTokens) {
    await sequence.eraseContextTokenRanges([{ start: cachedTokens, end: sequence.nextTokenIndex }]);
  }

  const detokenizer = new IncrementalDetokenizer(
    (tokens, lastTokens) => host.detokenize(tokens, lastTokens),
    prompt.slice(-4),
  );
  const stopMatcher = new StopMatcher(request.stop, request.includeStopStrInOutput);
  const { sampling } = request;
  const contextSize = host.contextSize;
  let completionTokens = 0;
  let pendingTokenIds: number[] = [];
  let finishReason: FinishReason | null = null;
  let stopReason: string | number | null = null;

  const emit = (text: string) => {
    if (text.length === 0 && pendingTokenIds.length === 0) return;
    observer.onDelta({ text, tokenIds: pendingTokenIds });
    pendingTokenIds = [];
  };

  if (options.signal?.aborted) finishReason = "abort";
  else {
    const tokens = sequence.evaluate(prompt.slice(cachedTokens) as Token[], {
      temperature: sampling.temperature,
      topK: sampling.topK,
      topP: sampling.topP,
      minP: sampling.minP,
      seed: sampling.seed,
      yieldEogToken: true,
    });
    for await (const token of tokens) {
      if (completionTokens === 0) options.onFirstToken?.();
      completionTokens++;
      pendingTokenIds.push(token);
      if (host.isEndOfGeneration(token)) {
        finishReason = "stop";
        break;
      }
      const match = stopMatcher.push(detokenizer.push(token));
      if (match.stop !== null) {
        emit(match.text);
        finishReason = "stop";
        stopReason = match.stop;
        break;
      }
      if (match.text.length > 0) emit(match.text);
      if (options.signal?.aborted) {
        finishReason = "abort";
        break;
      }
      if (completionTokens >= request.maxTokens || prompt.length + completionTokens >= contextSize) {
        finishReason = "length";
        break;
      }
    }
  }
  finishReason ??= "stop";

  if (finishReason !== "abort" && stopReason === null) {
    // Release what the detokenizer and the stop matcher held back; a stop string may still complete.
    const match = stopMatcher.push(detokenizer.flush());
    if (match.stop !== null) {
      finishReason = "stop";
      stopReason = match.stop;
      emit(match.text);
    } else emit(match.text + stopMatcher.flush());
  }
  emit("");
  return {
    finishReason,
    stopReason,
    promptTokens: prompt.length,
    completionTokens,
    cachedTokens,
    ...(finishReason === "abort" ? { abortReason: options.signal?.reason } : {}),
  };
}

import type { LlamaContextSequence, Token } from "node-llama-cpp";
import type { GateMember } from "./BatchGate.ts";
import { IncrementalDetokenizer } from "./IncrementalDetokenizer.ts";
import type { ModelHost } from "./ModelHost.ts";
import { commonPrefixLength, type Slot } from "./Scheduler.ts";
import { StopMatcher } from "./StopMatcher.ts";
import {
  exactTokens,
  type GenerationState,
  nativeTokens,
  needsJsSampling,
  type SampledToken,
} from "./tokenSources.ts";
import type {
  FinishReason,
  GenerationObserver,
  GenerationRequest,
  GenerationResult,
  TokenLogprob,
} from "./types.ts";

/**
 * Prompt tokens evaluated per step of a long prompt's prefill: an abort takes effect within one chunk.
 * Prefill cost per token on the synthetic 0.5B model is flat from 64 tokens up (4.7 ms at 64, 4.6 at 256).
 */
const PREFILL_CHUNK_TOKENS = 128;

/** Options of {@link runGeneration}. */
export type RunGenerationOptions = {
  /** Aborting it ends the generation within one decode step. */
  signal: AbortSignal | undefined;
  /** Reuse the slot's cached prefix; otherwise the slot's KV cache is cleared first. */
  prefixCaching: boolean;
  /** Called once when the first completion token has been sampled (prefill done). */
  onFirstToken?: () => void;
  /** Called after every sampled token (metrics). */
  onToken?: () => void;
};

/**
 * The token loop of one generation on one slot: evaluates the uncached part of the prompt, then samples
 * token after token until EOS, a stop token id, a stop string, `maxTokens`, the end of the context or
 * an abort. Text reaches the observer UTF-8 safe and with stop strings held back (see
 * {@link StopMatcher}); before `minTokens` tokens, EOS and stop token ids are banned and stop strings
 * are not matched (as vLLM's `min_tokens`). After each sampled token, `request.injectTokens` may append
 * tokens to the sequence (see {@link GenerationRequest.injectTokens}).
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
  // Prompt logprobs need every prompt position's distribution: evaluate the whole prompt.
  const reuse = options.prefixCaching && request.promptLogprobs === null;
  let cachedTokens = reuse ? commonPrefixLength(sequence.contextTokens, prompt) : 0;
  // At least one prompt token must be evaluated to get the next token's distribution.
  if (cachedTokens >= prompt.length) cachedTokens = prompt.length - 1;
  const member = host.batchGate.join();
  try {
    return await generate(host, sequence, request, observer, options, cachedTokens, member);
  } finally {
    member.leave();
  }
}

async function generate(
  host: ModelHost,
  sequence: LlamaContextSequence,
  request: GenerationRequest,
  observer: GenerationObserver,
  options: RunGenerationOptions,
  cachedTokens: number,
  member: GateMember,
): Promise<GenerationResult> {
  const prompt = request.promptTokens;
  // Drop the slot's cached tokens after the reused prefix. The erasure waits for the context lock: the
  // gate holds back the other sequences' steps until it has had it.
  if (sequence.nextTokenIndex > cachedTokens) {
    await host.batchGate.erase(() =>
      cachedTokens === 0
        ? sequence.clearHistory()
        : sequence.eraseContextTokenRanges([{ start: cachedTokens, end: sequence.nextTokenIndex }]),
    );
  }

  const detokenizer = new IncrementalDetokenizer(
    (tokens, lastTokens) => host.detokenize(tokens, lastTokens),
    prompt.slice(-4),
  );
  const stopMatcher = new StopMatcher(request.stop, request.includeStopStrInOutput);
  /** Length of the text decoded so far (before stop strings are cut): where the next token's text starts. */
  let decodedLength = 0;
  const decode = (token: number): string => {
    const text = detokenizer.push(token);
    decodedLength += text.length;
    return text;
  };
  const stopTokenIds = new Set(request.stopTokenIds);
  const generated: number[] = [];
  const contextSize = host.contextSize;
  let pendingTokenIds: number[] = [];
  let pendingLogprobs: TokenLogprob[] = [];
  let cumulativeLogprob = request.logprobs === null ? Number.NaN : 0;
  let promptLogprobs: (TokenLogprob | null)[] | undefined;
  let finishReason: FinishReason | null = null;
  let stopReason: string | number | null = null;

  const emit = (text: string) => {
    if (text.length === 0 && pendingTokenIds.length === 0) return;
    observer.onDelta({
      text,
      tokenIds: pendingTokenIds,
      ...(request.logprobs !== null ? { logprobs: pendingLogprobs } : {}),
    });
    pendingTokenIds = [];
    pendingLogprobs = [];
  };

  let promptRest = prompt.slice(cachedTokens);
  // A long prompt is evaluated in chunks, so an abort (client gone, timeout) stops it within one chunk
  // rather than after the whole prompt (as vLLM checks between chunked-prefill steps). With prompt
  // logprobs the exact token source reads every position's distribution, in chunks of its own.
  if (request.promptLogprobs === null) {
    while (promptRest.length > PREFILL_CHUNK_TOKENS && !options.signal?.aborted) {
      await sequence.evaluateWithoutGeneratingNewTokens(promptRest.slice(0, PREFILL_CHUNK_TOKENS) as Token[]);
      promptRest = promptRest.slice(PREFILL_CHUNK_TOKENS);
    }
  }
  const state: GenerationState = {
    generated,
    injected: [],
    beforeStep: member.step,
    onEvaluated: member.arrived,
    signal: options.signal,
  };
  const tokens: AsyncGenerator<SampledToken> = needsJsSampling(request)
    ? exactTokens(host, sequence, promptRest, request, state, (logprobs) => {
        promptLogprobs = logprobs;
      })
    : nativeTokens(host, sequence, promptRest, request, state);

  /** Appends the tokens `request.injectTokens` asks for (as many as fit); true when a stop string ended the generation. */
  const inject = (): boolean => {
    const wanted = request.injectTokens?.();
    if (!wanted || wanted.length === 0) return false;
    const room = Math.min(request.maxTokens, contextSize - prompt.length) - generated.length;
    const injected = wanted.slice(0, Math.max(room, 0));
    state.injected = [...injected];
    for (const token of injected) {
      generated.push(token);
      pendingTokenIds.push(token);
      const text = decode(token);
      const match = generated.length >= request.minTokens ? stopMatcher.push(text) : { text, stop: null };
      emit(match.text);
      if (match.stop !== null) {
        finishReason = "stop";
        stopReason = match.stop;
        return true;
      }
    }
    return false;
  };

  if (options.signal?.aborted) finishReason = "abort";
  else {
    try {
      for await (const { token, logprob } of tokens) {
        if (generated.length === 0) options.onFirstToken?.();
        options.onToken?.();
        generated.push(token);
        pendingTokenIds.push(token);
        if (logprob) {
          pendingLogprobs.push({ ...logprob, textOffset: decodedLength });
          cumulativeLogprob += logprob.logprob;
        }
        const counted = generated.length >= request.minTokens;
        if (host.isEndOfGeneration(token) && !request.ignoreEos && counted) {
          finishReason = "stop";
          break;
        }
        if (stopTokenIds.has(token) && counted) {
          finishReason = "stop";
          stopReason = token;
          // Release held-back text; the stop token's own text only with include_stop_str_in_output (vLLM).
          const tail = (request.includeStopStrInOutput ? decode(token) : "") + detokenizer.flush();
          const match = stopMatcher.push(tail);
          if (match.stop !== null) stopReason = match.stop;
          emit(match.stop !== null ? match.text : match.text + stopMatcher.flush());
          break;
        }
        const text = decode(token);
        const match = counted ? stopMatcher.push(text) : { text, stop: null };
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
        if (inject()) break;
        if (generated.length >= request.maxTokens || prompt.length + generated.length >= contextSize) {
          finishReason = "length";
          break;
        }
      }
    } finally {
      await tokens.return(undefined);
    }
  }
  // A token source that ended without a token (an aborted chunked prompt evaluation) was aborted.
  if (finishReason === null && options.signal?.aborted) finishReason = "abort";
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
    completionTokens: generated.length,
    cachedTokens,
    cumulativeLogprob,
    ...(promptLogprobs ? { promptLogprobs } : {}),
    ...(finishReason === "abort" ? { abortReason: options.signal?.reason } : {}),
  };
}

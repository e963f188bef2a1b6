import {
  type LlamaContextSequence,
  LlamaGrammarEvaluationState,
  type Token,
  TokenBias,
} from "node-llama-cpp";
import type { BatchGate } from "./BatchGate.ts";
import type { ModelHost } from "./ModelHost.ts";
import { Mulberry32 } from "./sampling/Mulberry32.ts";
import { type Distribution, sampleToken } from "./sampling/sampleToken.ts";
import type { GenerationRequest, TokenLogprob } from "./types.ts";

/** One sampled token and, when asked for, its log probabilities. */
export type SampledToken = { token: number; logprob?: TokenLogprob };

/** What both token sources need to know about the generation so far. */
export type GenerationState = {
  /** Ids generated so far, in order. */
  readonly generated: readonly number[];
  /**
   * Tokens the caller injected after the last yielded one (`GenerationRequest.injectTokens`): the
   * source evaluates them after that token, before sampling the next, and empties the list.
   */
  injected?: number[];
  /**
   * Awaited after each yielded token, before the next step is queued (the {@link BatchGate}'s
   * `GateMember.step`): lines the step up with the other sequences' steps.
   */
  beforeStep?: () => Promise<void>;
  /** Called when an evaluation returns, before its token is handled (the gate's `GateMember.arrived`). */
  onEvaluated?: () => void;
  /** The request's abort signal: a long evaluation in chunks stops between chunks once it is aborted. */
  signal?: AbortSignal | undefined;
};

/**
 * Prompt positions evaluated per call when every position's distribution is read (prompt logprobs):
 * node-llama-cpp hands each distribution to JS as a full-vocabulary Map (about 0.1-0.2 s per position on
 * a 152K vocabulary), so an abort takes effect within one chunk.
 */
const PROMPT_LOGPROBS_CHUNK_TOKENS = 32;

/** Takes the injected tokens of `state` (emptying the list): the next evaluation's input after `token`, or undefined. */
function takeInjected(state: GenerationState, token: number): number[] | undefined {
  if (!state.injected || state.injected.length === 0) return undefined;
  const injected = state.injected;
  state.injected = [];
  return [token, ...injected];
}

/**
 * Feeds injected tokens to the grammar state, as if they had been sampled under it. node-llama-cpp has
 * no public API for this; its own `LlamaSampler._acceptTokenOnGrammarEvaluationState` calls the same
 * native functions. Each token is checked first, since accepting a token the grammar rejects aborts
 * in llama.cpp.
 * @throws Error when the grammar does not allow one of the tokens (a server bug: the serving layer
 *   only injects text its grammars allow).
 */
function acceptIntoGrammar(
  host: ModelHost,
  state: LlamaGrammarEvaluationState,
  tokens: readonly number[],
): void {
  type Addon = {
    canBeNextTokenForGrammarEvaluationState(state: unknown, token: number): boolean;
    acceptGrammarEvaluationStateToken(state: unknown, token: number): void;
  };
  const addon = (host.model as unknown as { _llama: { _bindings: { AddonSampler: Addon } } })._llama._bindings
    .AddonSampler;
  const native = (state as unknown as { _state: unknown })._state;
  for (const token of tokens) {
    if (!addon.canBeNextTokenForGrammarEvaluationState(native, token)) {
      throw new Error(`injected token ${token} is not allowed by the request's grammar`);
    }
    addon.acceptGrammarEvaluationStateToken(native, token);
  }
}

/**
 * Whether a request must be sampled in JS from the raw distribution: logprobs (they must be the raw
 * log-softmax, which llama.cpp's sampler does not return under temperature or truncation) or a
 * combination of penalties llama.cpp's one penalty sampler cannot express (vLLM applies
 * `repetition_penalty` to prompt and completion tokens, the OpenAI penalties to completion tokens only).
 * Seeded (batch-invariant) requests sample here too, so their text does not depend on whether they ask
 * for logprobs. A guided-decoding grammar is only enforced by the native sampler, so it always samples
 * natively.
 */
export function needsJsSampling(request: GenerationRequest): boolean {
  const { sampling } = request;
  if (request.grammar) return false;
  return (
    // A seeded request always samples here, so asking for logprobs never changes its text.
    request.batchInvariant ||
    request.logprobs !== null ||
    request.promptLogprobs !== null ||
    (sampling.repetitionPenalty !== 1 && (sampling.frequencyPenalty !== 0 || sampling.presencePenalty !== 0))
  );
}

/** Token ids that may not be sampled at this step: EOS (and stop token ids) before `min_tokens`, EOS with `ignore_eos`. */
export function bannedTokens(host: ModelHost, request: GenerationRequest, generatedCount: number): number[] {
  const early = generatedCount < request.minTokens;
  if (!early && !request.ignoreEos) return [];
  return early ? [...host.endOfGenerationTokens, ...request.stopTokenIds] : host.endOfGenerationTokens;
}

/**
 * Samples with llama.cpp's native sampler through `sequence.evaluate` (the fast path): temperature,
 * top-k/p, min-p, seed and the guided-decoding grammar natively; `logit_bias`, EOS bans and penalties
 * through node-llama-cpp's `tokenBias` and `repeatPenalty`. Yields tokens until the caller stops.
 */
export async function* nativeTokens(
  host: ModelHost,
  sequence: LlamaContextSequence,
  promptRest: readonly number[],
  request: GenerationRequest,
  state: GenerationState,
): AsyncGenerator<SampledToken> {
  const { sampling } = request;
  const biasFor = (banned: readonly number[]): TokenBias | undefined => {
    if (banned.length === 0 && sampling.logitBias.size === 0) return undefined;
    const bias = new TokenBias(host.model.tokenizer);
    // TokenBias.set() refuses to touch EOS/EOT; write the logits directly (its documented shape).
    const biases = (bias as unknown as { _biases: Map<Token, number> })._biases;
    for (const [id, value] of sampling.logitBias) biases.set(id as Token, value);
    for (const id of banned) biases.set(id as Token, Number.NEGATIVE_INFINITY);
    return bias;
  };
  const steadyBias = biasFor(bannedTokens(host, request, request.minTokens));
  const earlyBias = request.minTokens > 0 ? biasFor(bannedTokens(host, request, 0)) : steadyBias;
  const prompt = request.promptTokens;
  const repeatPenalty =
    sampling.repetitionPenalty !== 1
      ? {
          punishTokens: () => [...prompt, ...state.generated] as Token[],
          penalty: sampling.repetitionPenalty,
          maxPunishTokens: host.contextSize,
        }
      : sampling.frequencyPenalty !== 0 || sampling.presencePenalty !== 0
        ? {
            punishTokens: () => state.generated as Token[],
            penalty: 1,
            frequencyPenalty: sampling.frequencyPenalty,
            presencePenalty: sampling.presencePenalty,
            maxPunishTokens: host.contextSize,
          }
        : undefined;
  const grammarEvaluationState = request.grammar
    ? new LlamaGrammarEvaluationState({ model: host.model, grammar: request.grammar })
    : undefined;
  const options = {
    temperature: sampling.temperature,
    topK: sampling.topK,
    topP: sampling.topP,
    minP: sampling.minP,
    seed: sampling.seed,
    yieldEogToken: true,
    ...(steadyBias || earlyBias
      ? {
          tokenBias: () =>
            (state.generated.length < request.minTokens ? earlyBias : steadyBias) ??
            new TokenBias(host.model.tokenizer),
        }
      : {}),
    ...(repeatPenalty ? { repeatPenalty } : {}),
    ...(grammarEvaluationState ? { grammarEvaluationState } : {}),
  };
  // The input after a yielded token: that token, plus any injected ones (see GenerationState.injected).
  const nextInput = (token: number): Token[] | undefined => {
    const input = takeInjected(state, token);
    if (input && grammarEvaluationState) acceptIntoGrammar(host, grammarEvaluationState, input.slice(1));
    return input as Token[] | undefined;
  };
  /** Drives one of node-llama-cpp's evaluation generators, one sampled token per step, lined up by the gate. */
  async function* steps<T>(
    iterator: AsyncGenerator<T, void, Token[] | undefined>,
    sampled: (value: T) => SampledToken,
  ): AsyncGenerator<SampledToken> {
    try {
      let input: Token[] | undefined;
      for (;;) {
        const step = await iterator.next(input);
        state.onEvaluated?.();
        if (step.done) return;
        const result = sampled(step.value);
        yield result;
        input = nextInput(result.token);
        await state.beforeStep?.();
      }
    } finally {
      await iterator.return(undefined);
    }
  }
  const k = request.logprobs;
  if (k === null) yield* steps(sequence.evaluate(promptRest as Token[], options), (token) => ({ token }));
  else {
    // With a grammar and logprobs: the distribution llama.cpp sampled from (constrained, after temperature).
    yield* steps(
      sequence.evaluateWithMetadata(promptRest as Token[], { probabilities: true }, options),
      ({ token, probabilities }) => ({ token, logprob: tokenLogprob(probabilities, token, k) }),
    );
  }
}

/**
 * Samples in JS from the raw distribution (the exact path): each step asks node-llama-cpp for the
 * full next-token distribution of the last token (`controlledEvaluate`, no sampling options, so it is
 * the raw softmax), derives logprobs from it, and samples with {@link sampleToken} and a per-request
 * {@link Mulberry32} seeded from the request. With `promptLogprobs`, every prompt position's
 * distribution is read too and `onPromptLogprobs` receives them (first entry null).
 */
export async function* exactTokens(
  host: ModelHost,
  sequence: LlamaContextSequence,
  promptRest: readonly number[],
  request: GenerationRequest,
  state: GenerationState,
  onPromptLogprobs?: (logprobs: (TokenLogprob | null)[]) => void,
): AsyncGenerator<SampledToken> {
  const rng = new Mulberry32(request.sampling.seed);
  const promptTokens = new Set(request.promptTokens);
  const outputCounts = new Map<number, number>();
  const wantPrompt = request.promptLogprobs !== null && onPromptLogprobs !== undefined;
  let input: readonly number[] = promptRest;
  let first = true;
  type Items = Parameters<LlamaContextSequence["controlledEvaluate"]>[0];
  const withDistribution = (token: number) =>
    [token as Token, { generateNext: { probabilities: true } }] as const;
  while (true) {
    // One distribution per evaluated position when the prompt's are wanted, else the last one's only.
    const distributions: (Distribution | undefined)[] = [];
    if (first && wantPrompt) {
      for (let start = 0; start < input.length; start += PROMPT_LOGPROBS_CHUNK_TOKENS) {
        if (start > 0 && state.signal?.aborted) return;
        const chunk = input.slice(start, start + PROMPT_LOGPROBS_CHUNK_TOKENS);
        const results = await sequence.controlledEvaluate(chunk.map(withDistribution) as Items);
        for (const result of results) distributions.push(result?.next.probabilities);
      }
    } else {
      const items = input.map((token, index) =>
        index === input.length - 1 ? withDistribution(token) : token,
      );
      const results = await sequence.controlledEvaluate(items as Items);
      distributions.push(results[results.length - 1]?.next.probabilities);
    }
    state.onEvaluated?.();
    if (first && wantPrompt) {
      const prompt: (TokenLogprob | null)[] = [null];
      for (let index = 1; index < input.length; index++) {
        const distribution = distributions[index - 1];
        prompt.push(
          distribution
            ? tokenLogprob(distribution, input[index] as number, request.promptLogprobs ?? 0)
            : null,
        );
      }
      onPromptLogprobs(prompt);
    }
    first = false;
    const distribution = distributions[distributions.length - 1];
    if (!distribution) throw new Error("node-llama-cpp returned no distribution for the last token");
    const banned = new Set(bannedTokens(host, request, state.generated.length));
    const token = sampleToken(distribution, request.sampling, { outputCounts, promptTokens }, banned, rng);
    outputCounts.set(token, (outputCounts.get(token) ?? 0) + 1);
    yield {
      token,
      ...(request.logprobs !== null ? { logprob: tokenLogprob(distribution, token, request.logprobs) } : {}),
    };
    input = takeInjected(state, token) ?? [token];
    await state.beforeStep?.();
  }
}

/** The logprob, rank and top-`k` alternatives of `token` under a raw distribution (sorted, most likely first). */
export function tokenLogprob(distribution: Distribution, token: number, k: number): TokenLogprob {
  const top: { id: number; logprob: number }[] = [];
  let rank = 0;
  let position = 0;
  for (const [id, probability] of distribution) {
    position++;
    if (top.length < k && probability > 0) top.push({ id, logprob: safeLog(probability) });
    if (id === token) {
      rank = position;
      if (top.length >= k) break;
    }
  }
  const probability = distribution.get(token) ?? 0;
  return { id: token, logprob: safeLog(probability), rank: rank || distribution.size + 1, top };
}

/** ln(p), with vLLM's floor of -9999 for probability 0 (JSON has no -Infinity). */
function safeLog(probability: number): number {
  return probability > 0 ? Math.max(Math.log(probability), -9999) : -9999;
}

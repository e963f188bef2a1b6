import {
  type LlamaContextSequence,
  LlamaGrammarEvaluationState,
  type Token,
  TokenBias,
} from "node-llama-cpp";
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
};

/**
 * Whether a request must be sampled in JS from the raw distribution: logprobs (they must be the raw
 * log-softmax, which llama.cpp's sampler does not return under temperature or truncation) or a
 * combination of penalties llama.cpp's one penalty sampler cannot express (vLLM applies
 * `repetition_penalty` to prompt and completion tokens, the OpenAI penalties to completion tokens only).
 * A guided-decoding grammar is only enforced by the native sampler, so it always samples natively.
 */
export function needsJsSampling(request: GenerationRequest): boolean {
  const { sampling } = request;
  if (request.grammar) return false;
  return (
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
    ...(request.grammar
      ? {
          grammarEvaluationState: new LlamaGrammarEvaluationState({
            model: host.model,
            grammar: request.grammar,
          }),
        }
      : {}),
  };
  if (request.logprobs === null) {
    for await (const token of sequence.evaluate(promptRest as Token[], options)) yield { token };
    return;
  }
  // With a grammar and logprobs: the distribution llama.cpp sampled from (constrained, after temperature).
  const k = request.logprobs;
  for await (const { token, probabilities } of sequence.evaluateWithMetadata(
    promptRest as Token[],
    { probabilities: true },
    options,
  )) {
    yield { token, logprob: tokenLogprob(probabilities, token, k) };
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
  while (true) {
    const items = input.map((token, index) =>
      index === input.length - 1 || (first && wantPrompt)
        ? ([token as Token, { generateNext: { probabilities: true } }] as const)
        : (token as Token),
    );
    const results = await sequence.controlledEvaluate(
      items as Parameters<LlamaContextSequence["controlledEvaluate"]>[0],
    );
    if (first && wantPrompt) {
      const prompt: (TokenLogprob | null)[] = [null];
      for (let index = 1; index < input.length; index++) {
        const distribution = results[index - 1]?.next.probabilities;
        prompt.push(
          distribution
            ? tokenLogprob(distribution, input[index] as number, request.promptLogprobs ?? 0)
            : null,
        );
      }
      onPromptLogprobs(prompt);
    }
    first = false;
    const distribution = results[results.length - 1]?.next.probabilities;
    if (!distribution) throw new Error("node-llama-cpp returned no distribution for the last token");
    const banned = new Set(bannedTokens(host, request, state.generated.length));
    const token = sampleToken(distribution, request.sampling, { outputCounts, promptTokens }, banned, rng);
    outputCounts.set(token, (outputCounts.get(token) ?? 0) + 1);
    yield {
      token,
      ...(request.logprobs !== null ? { logprob: tokenLogprob(distribution, token, request.logprobs) } : {}),
    };
    input = [token];
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

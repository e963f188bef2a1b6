import type { SamplingParams } from "../types.ts";
import type { Mulberry32 } from "./Mulberry32.ts";

/** The raw next-token distribution as node-llama-cpp returns it: token id -> probability, most likely first. */
export type Distribution = ReadonlyMap<number, number>;

/** What the penalties look at: how often each token occurs in the completion, and the prompt's tokens. */
export type PenaltyState = {
  /** Token id -> occurrences in the completion so far. */
  readonly outputCounts: ReadonlyMap<number, number>;
  /** Token ids present in the prompt (for `repetition_penalty`, which also covers the prompt). */
  readonly promptTokens: ReadonlySet<number>;
};

/**
 * Samples one token from a raw distribution with vLLM's semantics, in vLLM's order: banned tokens and
 * `logit_bias` on the logits, then `repetition_penalty` (prompt and completion tokens: positive logits
 * divided, negative multiplied), `frequency_penalty` and `presence_penalty` (completion tokens, as
 * OpenAI defines them), then temperature (0 = argmax), `top_k`, `top_p`, `min_p`, and a draw from `rng`.
 * Logits are taken as ln(p): they differ from the model's by a constant, which no step depends on.
 * @param banned token ids that must not be sampled (EOS under `min_tokens` / `ignore_eos`).
 * @returns the sampled token id; the most likely allowed token if every candidate was filtered out.
 */
export function sampleToken(
  distribution: Distribution,
  params: SamplingParams,
  penalties: PenaltyState,
  banned: ReadonlySet<number>,
  rng: Mulberry32,
): number {
  const ids: number[] = [];
  const logits: number[] = [];
  for (const [id, probability] of distribution) {
    if (banned.has(id) || probability <= 0) continue;
    let logit = Math.log(probability) + (params.logitBias.get(id) ?? 0);
    if (
      params.repetitionPenalty !== 1 &&
      (penalties.promptTokens.has(id) || penalties.outputCounts.has(id))
    ) {
      logit = logit > 0 ? logit / params.repetitionPenalty : logit * params.repetitionPenalty;
    }
    const count = penalties.outputCounts.get(id) ?? 0;
    if (count > 0) logit -= params.frequencyPenalty * count + params.presencePenalty;
    ids.push(id);
    logits.push(logit);
  }
  if (ids.length === 0) return [...distribution.keys()].find((id) => !banned.has(id)) ?? 0;
  // Tokens the raw distribution gave probability 0 can still be forced by a positive logit_bias.
  for (const [id, bias] of params.logitBias) {
    if (bias > 0 && !banned.has(id) && !ids.includes(id) && (distribution.get(id) ?? 0) <= 0) {
      ids.push(id);
      logits.push(bias - 1e4);
    }
  }
  const order = ids.map((_, index) => index).sort((a, b) => (logits[b] as number) - (logits[a] as number));
  if (params.temperature === 0) return ids[order[0] as number] as number;

  let candidates = params.topK > 0 ? order.slice(0, params.topK) : order;
  const top = logits[candidates[0] as number] as number;
  let weights = candidates.map((index) => Math.exp(((logits[index] as number) - top) / params.temperature));
  let total = weights.reduce((sum, weight) => sum + weight, 0);
  if (params.topP < 1) {
    let mass = 0;
    let keep = 0;
    while (keep < weights.length && mass < params.topP * total) mass += weights[keep++] as number;
    candidates = candidates.slice(0, Math.max(1, keep));
    weights = weights.slice(0, candidates.length);
    total = weights.reduce((sum, weight) => sum + weight, 0);
  }
  if (params.minP > 0) {
    const threshold = (weights[0] as number) * params.minP;
    const keep = weights.findIndex((weight) => weight < threshold);
    if (keep > 0) {
      candidates = candidates.slice(0, keep);
      weights = weights.slice(0, keep);
      total = weights.reduce((sum, weight) => sum + weight, 0);
    }
  }
  let draw = rng.next() * total;
  for (let index = 0; index < candidates.length; index++) {
    draw -= weights[index] as number;
    if (draw < 0) return ids[candidates[index] as number] as number;
  }
  return ids[candidates[candidates.length - 1] as number] as number;
}

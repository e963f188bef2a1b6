/**
 * Test reference: the native sampler (native/src/sampler.cpp) written again in TypeScript, step by step,
 * from the same definition: bans and `logit_bias`, then `repetition_penalty` (prompt and completion
 * tokens: positive logits divided, negative multiplied), `frequency_penalty` and `presence_penalty`
 * (completion tokens), then temperature (0 = argmax), top-k, top-p, min-p and a draw from mulberry32.
 * Candidates are ordered by logit (then lower id) when top-k or top-p needs an order, else by id.
 */
import type { NativeSamplerConfig } from "../../../src/engine/native.ts";
import { Mulberry32 } from "./Mulberry32.ts";

/** A sampler that changes nothing: temperature 1, no truncation, no penalties, seed 42. */
export const NEUTRAL_SAMPLER: Readonly<NativeSamplerConfig> = {
  temperature: 1,
  topK: 0,
  topP: 1,
  minP: 0,
  repetitionPenalty: 1,
  frequencyPenalty: 0,
  presencePenalty: 0,
  seed: 42,
  minTokens: 0,
};

/** `steps` draws of one sequence on the same logits row, each sampled token counted for the penalties. */
export function referenceSample(logits: Float32Array, config: NativeSamplerConfig, steps: number): number[] {
  const n = logits.length;
  const rng = new Mulberry32(config.seed);
  const counts = new Map<number, number>();
  const prompt = new Set(config.promptTokens ?? []);
  const out: number[] = [];
  for (let step = 0; step < steps; step++) {
    const work = Float32Array.from(logits);
    const biasIds = config.biasIds ?? new Int32Array();
    const biasValues = config.biasValues ?? new Float32Array();
    biasIds.forEach((id, index) => {
      work[id] = (work[id] as number) + (biasValues[index] as number);
    });
    for (const id of config.banAlways ?? []) work[id] = Number.NEGATIVE_INFINITY;
    if (step < config.minTokens) for (const id of config.banEarly ?? []) work[id] = Number.NEGATIVE_INFINITY;
    if (config.repetitionPenalty !== 1) {
      for (const id of new Set([...prompt, ...counts.keys()])) {
        const logit = work[id] as number;
        if (!Number.isFinite(logit)) continue;
        work[id] = logit > 0 ? logit / config.repetitionPenalty : logit * config.repetitionPenalty;
      }
    }
    for (const [id, count] of counts) {
      if (!Number.isFinite(work[id] as number)) continue;
      work[id] = (work[id] as number) - (config.frequencyPenalty * count + config.presencePenalty);
    }
    const token = draw(work, n, config, rng);
    counts.set(token, (counts.get(token) ?? 0) + 1);
    out.push(token);
  }
  return out;
}

function draw(work: Float32Array, n: number, config: NativeSamplerConfig, rng: Mulberry32): number {
  const finite: number[] = [];
  for (let id = 0; id < n; id++) if (Number.isFinite(work[id] as number)) finite.push(id);
  if (config.temperature <= 0) {
    let best = -1;
    for (const id of finite) if (best < 0 || (work[id] as number) > (work[best] as number)) best = id;
    return best;
  }
  const byLogit = [...finite].sort((a, b) => (work[b] as number) - (work[a] as number) || a - b);
  let candidates = config.topK > 0 && config.topK < n ? byLogit.slice(0, config.topK) : finite;
  const top = Math.max(...candidates.map((id) => work[id] as number));
  const weight = (id: number) => Math.exp(((work[id] as number) - top) / config.temperature);
  let weights = candidates.map(weight);
  let total = weights.reduce((sum, w) => sum + w, 0);
  if (config.topP < 1) {
    if (!(config.topK > 0 && config.topK < n)) {
      candidates = byLogit;
      weights = candidates.map(weight);
    }
    let mass = 0;
    let keep = 0;
    while (keep < candidates.length && mass < config.topP * total) mass += weights[keep++] as number;
    keep = Math.max(keep, 1);
    candidates = candidates.slice(0, keep);
    weights = weights.slice(0, keep);
    total = weights.reduce((sum, w) => sum + w, 0);
  }
  if (config.minP > 0) {
    const threshold = Math.max(...weights) * config.minP;
    const kept = candidates
      .map((id, index) => ({ id, w: weights[index] as number }))
      .filter((c) => c.w >= threshold);
    candidates = kept.map((c) => c.id);
    weights = kept.map((c) => c.w);
    total = weights.reduce((sum, w) => sum + w, 0);
  }
  let r = rng.next() * total;
  for (let index = 0; index < candidates.length; index++) {
    r -= weights[index] as number;
    if (r < 0) return candidates[index] as number;
  }
  return candidates[candidates.length - 1] as number;
}

/** The log-softmax of a logits row, in float64. */
export function logSoftmax(logits: Float32Array): Float64Array {
  let max = Number.NEGATIVE_INFINITY;
  for (const value of logits) max = Math.max(max, value);
  let sum = 0;
  for (const value of logits) sum += Math.exp(value - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (value) => value - lse);
}

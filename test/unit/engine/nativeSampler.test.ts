/**
 * The native sampler (C++) against the TypeScript reference on fixed logits: the same draws for the same
 * seed under every transform, and logprobs equal to a log-softmax computed here.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type NativeSamplerConfig, nativeAddon } from "../../../src/engine/native.ts";
import { Mulberry32 } from "./Mulberry32.ts";
import { logSoftmax, NEUTRAL_SAMPLER, referenceSample } from "./referenceSampler.ts";

const VOCAB = 2000;

/** A fixed logits row with a realistic spread (a few likely tokens, a long tail) and some ties. */
function fixedLogits(seed: number): Float32Array {
  const rng = new Mulberry32(seed);
  return Float32Array.from({ length: VOCAB }, (_, id) => {
    if (id % 97 === 0) return 4; // ties across ids
    const u = rng.next();
    return Math.fround(8 * u ** 6 - 3 + rng.next());
  });
}

const neutral = NEUTRAL_SAMPLER;

const CASES: [string, Partial<NativeSamplerConfig>][] = [
  ["plain temperature 1", {}],
  ["greedy", { temperature: 0 }],
  ["temperature 0.7", { temperature: 0.7 }],
  ["top-k 40", { topK: 40 }],
  ["top-p 0.9", { topP: 0.9 }],
  ["top-p 0.999 (beyond the first sorted head)", { topP: 0.999 }],
  ["min-p 0.05", { minP: 0.05 }],
  ["the benchmark's mix", { temperature: 0.7, topK: 40, topP: 0.95, minP: 0.05 }],
  ["top-k 1", { topK: 1 }],
  [
    "repetition penalty over prompt and output",
    { repetitionPenalty: 1.3, promptTokens: Int32Array.of(0, 97, 5, 6) },
  ],
  ["frequency and presence penalties", { frequencyPenalty: 0.8, presencePenalty: 0.5, temperature: 0.5 }],
  [
    "all penalties at once",
    { repetitionPenalty: 1.2, frequencyPenalty: 0.4, presencePenalty: 0.3, promptTokens: Int32Array.of(194) },
  ],
  ["logit bias", { biasIds: Int32Array.of(3, 7, 11), biasValues: Float32Array.of(10, -100, 5) }],
  [
    "bans and min_tokens",
    { banAlways: Int32Array.of(0, 97), banEarly: Int32Array.of(194, 291), minTokens: 3 },
  ],
  ["another seed", { seed: 7, topK: 100, topP: 0.8 }],
];

describe("native sampler = TypeScript reference on fixed logits", () => {
  for (const [name, overrides] of CASES) {
    test(name, () => {
      const config = { ...neutral, ...overrides };
      for (const row of [1, 2, 3]) {
        const logits = fixedLogits(row);
        const native = Array.from(nativeAddon().sampleLogits(logits, config, 40));
        assert.deepEqual(native, referenceSample(logits, config, 40));
      }
    });
  }

  test("the same seed gives the same draws; another seed other draws", () => {
    const logits = fixedLogits(9);
    const draws = (seed: number) => Array.from(nativeAddon().sampleLogits(logits, { ...neutral, seed }, 64));
    assert.deepEqual(draws(123), draws(123));
    assert.notDeepEqual(draws(123), draws(124));
  });

  test("bans hold: a banned token is never drawn, even when it is the most likely", () => {
    const logits = fixedLogits(4);
    const banned = Int32Array.of(0, 97, 194);
    const draws = nativeAddon().sampleLogits(logits, { ...neutral, temperature: 0, banAlways: banned }, 20);
    for (const token of draws) assert.ok(!banned.includes(token));
  });
});

describe("native logprobs = log-softmax of the raw logits", () => {
  test("the token's logprob and rank, and the top-N in order", () => {
    for (const row of [1, 2, 3]) {
      const logits = fixedLogits(row);
      const expected = logSoftmax(logits);
      const order = Array.from({ length: VOCAB }, (_, id) => id).sort(
        (a, b) => (logits[b] as number) - (logits[a] as number) || a - b,
      );
      for (const token of [order[0] as number, order[10] as number, 1234, 97]) {
        const result = nativeAddon().rowLogprobs(logits, token, 5);
        assert.ok(Math.abs(result.logprob - (expected[token] as number)) < 1e-4);
        const rank = 1 + Array.from(logits).filter((value) => value > (logits[token] as number)).length;
        assert.equal(result.rank, rank);
        assert.deepEqual(Array.from(result.topIds), order.slice(0, 5));
        result.topLogprobs.forEach((value, index) => {
          assert.ok(Math.abs(value - (expected[order[index] as number] as number)) < 1e-4);
        });
      }
    }
  });
});

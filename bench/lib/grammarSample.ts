/**
 * One constrained generation in-process (no HTTP): a prompt sampled at temperature 1 with `seed` under
 * GBNF `gbnf`, through the engine's scheduler. Shared by `bench/schemaSample.ts` and the engine-level
 * guided-decoding test.
 */
import type { Scheduler } from "../../src/engine/Scheduler.ts";

/** The generated text and whether the generation stopped by itself (the grammar completed). */
export type GrammarSample = { text: string; stopped: boolean };

/** Generates up to `maxTokens` tokens after `promptTokens` under `gbnf`, sampled with `seed`. */
export async function sampleUnderGrammar(
  scheduler: Scheduler,
  promptTokens: number[],
  gbnf: string,
  seed: number,
  maxTokens: number,
): Promise<GrammarSample> {
  let text = "";
  const result = await scheduler.submit(
    {
      promptTokens,
      maxTokens,
      sampling: {
        temperature: 1,
        topP: 1,
        topK: 0,
        minP: 0,
        seed,
        frequencyPenalty: 0,
        presencePenalty: 0,
        repetitionPenalty: 1,
        logitBias: new Map(),
      },
      stop: [],
      includeStopStrInOutput: false,
      priority: 0,
      minTokens: 0,
      ignoreEos: false,
      stopTokenIds: [],
      logprobs: null,
      promptLogprobs: null,
      grammar: { gbnf },
      batchInvariant: false,
    },
    {
      onDelta: (delta) => {
        text += delta.text;
      },
    },
  );
  return { text, stopped: result.finishReason === "stop" };
}

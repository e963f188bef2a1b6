/**
 * One constrained generation in-process (no HTTP): a prompt sampled at temperature 1 with `seed` under
 * GBNF `gbnf`, through the engine's scheduler. Shared by `bench/schemaSample.ts` and the engine-level
 * guided-decoding test.
 */
import { plainRequest } from "../../src/engine/plainRequest.ts";
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
    plainRequest(promptTokens, maxTokens, { sampling: { seed }, grammar: { gbnf } }),
    {
      onDelta: (delta) => {
        text += delta.text;
      },
    },
  );
  return { text, stopped: result.finishReason === "stop" };
}

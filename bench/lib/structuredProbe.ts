/**
 * Where the time of constrained decoding goes, measured in-process with node-llama-cpp (no HTTP): the
 * time of each decode step (one token: decode + sampling) in four modes on the same sequence and prompt:
 *
 * - `free`: the sampler chain alone;
 * - `grammar`: with a grammar, as the server samples. node-llama-cpp 3.21.1 (`AddonSampler::sample`)
 *   samples first, checks only the chosen token against the grammar, and only when it is rejected
 *   re-samples with the grammar applied to the whole vocabulary;
 * - `free+probs`: `evaluateWithMetadata({probabilities: true})` without a grammar (the full sorted
 *   distribution is built each step);
 * - `grammar+probs`: the same with a grammar, which node-llama-cpp then applies to the whole vocabulary
 *   at every step (how a constrained request with logprobs runs);
 * - `any-grammar`: a grammar that admits every token (`root ::= [^\x00]*`), so the first pick is never
 *   rejected: the cost a grammar adds when the model's own picks follow it (check and accept only).
 *
 * So `grammar+probs - free+probs` is the cost of one full-vocabulary grammar pass, and the share of
 * `grammar` steps that cost about that much more than `free` is the share of rejected first picks.
 */
import {
  type LlamaContextSequence,
  type LlamaGrammar,
  LlamaGrammarEvaluationState,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { percentile } from "./structuredCompile.ts";

/** The probe modes. */
export type ProbeMode = "free" | "grammar" | "any-grammar" | "free+probs" | "grammar+probs";

/** Per-step timings of one mode. */
export type ProbeResult = {
  mode: ProbeMode;
  /** Steps timed (the first token of each run, which includes the prompt, is left out). */
  steps: number;
  stepMsP50: number;
  stepMsP90: number;
  stepMsMean: number;
  /** Mean without the fastest and slowest 10% of steps: robust to stalls caused by other processes. */
  stepMsTrimmed: number;
  /** Tokens per second over the timed steps. */
  tokensPerSecond: number;
  /** Step times, ms, in order, for classifying steps. */
  stepMs: number[];
};

/** Sampling options of the probe (the server's native path, without a seed). */
export type ProbeSampling = { temperature: number; topK: number; topP: number; minP: number };

/**
 * Runs each mode `runs` times for up to `maxTokens` tokens (a grammar may end a run earlier), modes
 * interleaved per run so that all see the same machine load.
 */
export async function probeStepTimes(options: {
  model: LlamaModel;
  sequence: LlamaContextSequence;
  grammar: LlamaGrammar;
  /** A grammar that admits every token, for `any-grammar`. */
  anyGrammar: LlamaGrammar;
  prompt: readonly number[];
  maxTokens: number;
  runs: number;
  sampling: ProbeSampling;
  /** Progress lines. */
  onRun?: (line: string) => void;
}): Promise<ProbeResult[]> {
  const modes: ProbeMode[] = ["free", "grammar", "any-grammar", "free+probs", "grammar+probs"];
  const steps = new Map<ProbeMode, number[]>(modes.map((mode) => [mode, []]));
  for (let run = 0; run < options.runs; run++) {
    for (const mode of modes) {
      const times = await timeRun(options, mode);
      steps.get(mode)?.push(...times);
      options.onRun?.(
        `${mode} run ${run + 1}: ${times.length + 1} tokens in ${(times.reduce((a, b) => a + b, 0) / 1000).toFixed(1)} s`,
      );
    }
  }
  return modes.map((mode) => {
    const times = steps.get(mode) ?? [];
    const total = times.reduce((sum, ms) => sum + ms, 0);
    return {
      mode,
      steps: times.length,
      stepMsP50: percentile(times, 50),
      stepMsP90: percentile(times, 90),
      stepMsMean: total / Math.max(1, times.length),
      stepMsTrimmed: trimmedMean(times, 0.1),
      tokensPerSecond: (times.length * 1000) / Math.max(total, 1e-9),
      stepMs: times,
    };
  });
}

/** One run of one mode: the step times after the first token. */
async function timeRun(options: Parameters<typeof probeStepTimes>[0], mode: ProbeMode): Promise<number[]> {
  const { model, sequence, grammar, prompt, maxTokens, sampling } = options;
  await sequence.clearHistory();
  const used =
    mode === "grammar" || mode === "grammar+probs"
      ? grammar
      : mode === "any-grammar"
        ? options.anyGrammar
        : null;
  // The JSON grammar ends its run at EOS; the free and any-grammar runs go on to maxTokens.
  const endsAtEos = used === grammar;
  const evaluateOptions = {
    ...sampling,
    yieldEogToken: true,
    ...(used ? { grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar: used }) } : {}),
  };
  const tokens: AsyncGenerator<unknown> =
    mode === "free+probs" || mode === "grammar+probs"
      ? sequence.evaluateWithMetadata(prompt as Token[], { probabilities: true }, evaluateOptions)
      : sequence.evaluate(prompt as Token[], evaluateOptions);
  const times: number[] = [];
  let count = 0;
  let previous = performance.now();
  try {
    for await (const item of tokens) {
      const now = performance.now();
      if (count > 0) times.push(now - previous);
      previous = now;
      count++;
      const token = typeof item === "number" ? item : (item as { token: number }).token;
      if ((endsAtEos && model.isEogToken(token as Token)) || count >= maxTokens) break;
    }
  } finally {
    await tokens.return(undefined);
  }
  return times;
}

/** The mean of `values` without the lowest and highest `share` of them. */
function trimmedMean(values: readonly number[], share: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const cut = Math.floor(sorted.length * share);
  const kept = sorted.slice(cut, sorted.length - cut);
  return kept.reduce((sum, value) => sum + value, 0) / Math.max(1, kept.length);
}

/**
 * The benchmark's workload (issue 4): fixed prompt and output lengths, the sampling settings,
 * and deterministic prompt texts. Both the HTTP driver and the bare engine use these, so they run the
 * same token sequences.
 */

/** Sampling of every benchmark request (issue 4). No seed: seeded requests run batch-invariant. */
export const SAMPLING = { temperature: 0.7, topK: 40, topP: 0.95, minP: 0.05 } as const;

/** Sampling settings as node-llama-cpp's `sequence.evaluate` options. */
export type Sampling = { temperature: number; topK: number; topP: number; minP: number };

/** The shape of one benchmark run. */
export type Workload = {
  /** Prompt length of the throughput levels, in tokens. */
  promptTokens: number;
  /** Completion tokens per request (`max_tokens` with `ignore_eos`). */
  outputTokens: number;
  /** Concurrency levels, in order. */
  concurrencies: number[];
  /** Requests each worker sends at a level, given the concurrency. */
  requestsPerWorker: (concurrency: number) => number;
  /** Shared prefix of the prefix-cache scenario, in tokens. */
  prefixTokens: number;
  /** Suffix after the shared prefix, in tokens. */
  suffixTokens: number;
  /** Repetitions of the prefix-cache scenario (each with its own prefix). */
  prefixTrials: number;
};

/**
 * The full run: concurrency 1, 2, 4, 8; at least 4 requests per worker (two ABBA blocks of two, see
 * `runLevel.ts`) and at least 8 per level.
 */
export const FULL_WORKLOAD: Workload = {
  promptTokens: 32,
  outputTokens: 64,
  concurrencies: [1, 2, 4, 8],
  requestsPerWorker: (concurrency) => Math.max(4, Math.ceil(8 / concurrency)),
  prefixTokens: 1000,
  suffixTokens: 16,
  prefixTrials: 3,
};

/** `--quick`: concurrency 1 and 4, one request per worker, one prefix trial. */
export const QUICK_WORKLOAD: Workload = {
  ...FULL_WORKLOAD,
  concurrencies: [1, 4],
  requestsPerWorker: () => 1,
  prefixTrials: 1,
};

const WORDS = (
  "the a river stone window garden lantern quiet morning harbor signal copper meadow engine " +
  "letter mountain bridge forest silver kettle orchard compass valley thunder ribbon candle " +
  "market winter feather island ladder velvet canyon pocket marble whistle shadow hollow " +
  "bright gentle sudden patient careful distant golden hidden narrow ancient curious steady " +
  "walks finds carries paints counts follows builds opens listens watches gathers remembers"
).split(" ");

/**
 * A deterministic English-like text of about `words` words, different for each `seed` (a small LCG
 * over a fixed word list, so runs and machines agree). Starts with `lead` so that texts of different
 * purposes never share a first token.
 */
export function syntheticText(seed: number, words: number, lead = "Story"): string {
  let state = (seed * 2654435761 + 12345) >>> 0;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state;
  };
  const out: string[] = [lead, String(seed)];
  for (let i = 0; i < words; i++) {
    const word = WORDS[next() % WORDS.length] as string;
    out.push(i % 12 === 11 ? `${word}.` : word);
  }
  return out.join(" ");
}

/** Cuts `tokens` to exactly `length` tokens. @throws Error when the text was too short. */
export function exactLength(tokens: readonly number[], length: number, what: string): number[] {
  if (tokens.length < length) {
    throw new Error(`${what}: the text gave ${tokens.length} tokens, fewer than the ${length} needed`);
  }
  return tokens.slice(0, length);
}

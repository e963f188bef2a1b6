/**
 * Timing records of one benchmark level and their summary (throughput, TTFT and inter-token latency
 * percentiles). Shared by the HTTP driver (`serverTarget.ts`) and the bare-engine child
 * (`bareEngine.ts`), so both sides are summarised by the same code.
 */

/** The timings of one request (all times in milliseconds). */
export type RequestTiming = {
  /** Time from sending the request (or calling `sequence.evaluate`) to the first token's arrival. */
  ttftMs: number;
  /**
   * Gaps between successive token arrivals, one entry per token after the first. A stream chunk that
   * carries k tokens (held-back UTF-8 bytes) contributes k equal gaps summing to its wait.
   */
  itlMs: number[];
  /** Completion tokens received. */
  tokens: number;
  /** Start of the request, on the measuring process's `performance.now()` clock. */
  startMs: number;
  /** Arrival of the last token (or end of the response), same clock. */
  endMs: number;
};

/** What one concurrency level measured, before summarising (the bare engine sends this as JSON). */
export type LevelRaw = {
  concurrency: number;
  /** From the first request's start to the last request's end, in milliseconds. */
  wallMs: number;
  requests: RequestTiming[];
};

/** Decode batch statistics of one level (see `batchProbe.ts`). */
export type BatchStats = {
  /** Decode batches dispatched by the context during the level. */
  batches: number;
  /** Batches whose items were all single tokens (generation steps). */
  decodeBatches: number;
  /** Mean sequences per generation step. */
  meanSequencesPerStep: number;
  /** Count of generation steps by number of sequences in them: index = sequences. */
  stepHistogram: number[];
  /** Mean milliseconds inside `decodeBatch` of a generation step, by sequences in it (null: none timed). */
  stepMsBySize: (number | null)[];
  /** Milliseconds spent inside llama.cpp's `decodeBatch` (null when it could not be wrapped). */
  decodeMs: number | null;
  /** The level's wall time as seen by the probe (first to last batch end), in milliseconds. */
  spanMs: number;
  /** Duration of each `clearHistory` / `eraseContextTokenRanges` call (mostly waiting for the context lock), ms. */
  eraseMs: number[];
};

/** The summary printed in the results table; latencies in milliseconds. */
export type LevelSummary = {
  concurrency: number;
  requests: number;
  tokens: number;
  wallMs: number;
  /** Aggregate completion tokens per second over the level's wall time. */
  aggTokPerS: number;
  ttftP50: number;
  ttftP99: number;
  itlP50: number;
  itlP99: number;
  /** Mean per-request decode rate (tokens after the first / time after the first), tokens per second. */
  perRequestTokPerS: number;
  batch?: BatchStats;
};

/**
 * The q-quantile (0..1) of `values` with linear interpolation between closest ranks (numpy's default),
 * NaN for an empty list. With few samples p99 is close to the maximum.
 */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * Math.min(1, Math.max(0, q));
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  const low = sorted[lower] as number;
  const high = sorted[upper] as number;
  return low + (high - low) * (position - lower);
}

/** Summarises a level's raw timings (see {@link LevelSummary}). */
export function summarise(raw: LevelRaw, batch?: BatchStats): LevelSummary {
  const tokens = raw.requests.reduce((sum, request) => sum + request.tokens, 0);
  const itl = raw.requests.flatMap((request) => request.itlMs);
  const rates = raw.requests
    .filter((request) => request.tokens > 1)
    .map((request) => {
      const decodeMs = request.itlMs.reduce((sum, gap) => sum + gap, 0);
      return decodeMs > 0 ? ((request.tokens - 1) * 1000) / decodeMs : Number.NaN;
    });
  return {
    concurrency: raw.concurrency,
    requests: raw.requests.length,
    tokens,
    wallMs: raw.wallMs,
    aggTokPerS: raw.wallMs > 0 ? (tokens * 1000) / raw.wallMs : Number.NaN,
    ttftP50: quantile(
      raw.requests.map((request) => request.ttftMs),
      0.5,
    ),
    ttftP99: quantile(
      raw.requests.map((request) => request.ttftMs),
      0.99,
    ),
    itlP50: quantile(itl, 0.5),
    itlP99: quantile(itl, 0.99),
    perRequestTokPerS: rates.length > 0 ? rates.reduce((a, b) => a + b, 0) / rates.length : Number.NaN,
    ...(batch ? { batch } : {}),
  };
}

/**
 * Runs `concurrency` workers in a closed loop: worker `w` runs `prompts[w][0]`, then `prompts[w][1]`
 * as soon as the first ends, and so on. Resolves with the timings and the wall time from the first
 * start to the last end. A prompt is whatever `runOne` takes (token ids by default).
 * @throws whatever `runOne` throws (the other workers are left to finish on their own).
 */
export async function closedLoop<Prompt = readonly number[]>(
  prompts: readonly (readonly Prompt[])[],
  runOne: (worker: number, prompt: Prompt) => Promise<RequestTiming>,
): Promise<LevelRaw> {
  const requests: RequestTiming[] = [];
  const start = performance.now();
  await Promise.all(
    prompts.map(async (queue, worker) => {
      for (const prompt of queue) requests.push(await runOne(worker, prompt));
    }),
  );
  const first = Math.min(start, ...requests.map((request) => request.startMs));
  const last = Math.max(...requests.map((request) => request.endMs));
  return { concurrency: prompts.length, wallMs: last - first, requests };
}

/**
 * Records token arrivals of one request and turns them into a {@link RequestTiming}: call
 * {@link arrive} with the number of tokens each chunk carried.
 */
export class ArrivalRecorder {
  readonly startMs: number;
  private firstMs: number | null = null;
  private lastMs: number;
  private tokens = 0;
  private readonly itl: number[] = [];

  /** @param startMs the request's start on the `performance.now()` clock. */
  constructor(startMs = performance.now()) {
    this.startMs = startMs;
    this.lastMs = startMs;
  }

  /** Notes that `count` tokens arrived at `now` (ms, `performance.now()` clock); 0 is ignored. */
  arrive(count: number, now = performance.now()): void {
    if (count <= 0) return;
    if (this.firstMs === null) {
      this.firstMs = now;
      // Tokens that arrive together with the first one have no wait of their own.
      for (let i = 1; i < count; i++) this.itl.push(0);
    } else {
      const gap = (now - this.lastMs) / count;
      for (let i = 0; i < count; i++) this.itl.push(gap);
    }
    this.tokens += count;
    this.lastMs = now;
  }

  /** The number of tokens recorded so far. */
  get count(): number {
    return this.tokens;
  }

  /** The finished timing; `endMs` defaults to the last arrival. TTFT is NaN when no token came. */
  finish(endMs = this.lastMs): RequestTiming {
    return {
      ttftMs: this.firstMs === null ? Number.NaN : this.firstMs - this.startMs,
      itlMs: this.itl,
      tokens: this.tokens,
      startMs: this.startMs,
      endMs,
    };
  }
}

/** Joins levels measured in blocks (same concurrency): requests pooled, wall times added. */
export function mergeLevels(parts: readonly LevelRaw[]): LevelRaw {
  return {
    concurrency: parts[0]?.concurrency ?? 0,
    wallMs: parts.reduce((sum, part) => sum + part.wallMs, 0),
    requests: parts.flatMap((part) => part.requests),
  };
}

/** Adds up the batch statistics of blocks; undefined when any block has none. */
export function mergeBatchStats(parts: readonly (BatchStats | null | undefined)[]): BatchStats | undefined {
  if (parts.length === 0 || parts.some((part) => !part)) return undefined;
  const stats = parts as BatchStats[];
  const steps = stats.reduce((sum, part) => sum + part.decodeBatches, 0);
  const histogram: number[] = [];
  for (const part of stats) {
    part.stepHistogram.forEach((count, size) => {
      histogram[size] = (histogram[size] ?? 0) + count;
    });
  }
  for (let i = 0; i < histogram.length; i++) histogram[i] ??= 0;
  return {
    batches: stats.reduce((sum, part) => sum + part.batches, 0),
    decodeBatches: steps,
    meanSequencesPerStep:
      steps > 0
        ? stats.reduce(
            (sum, part) =>
              sum + (part.decodeBatches > 0 ? part.meanSequencesPerStep * part.decodeBatches : 0),
            0,
          ) / steps
        : Number.NaN,
    stepHistogram: histogram,
    stepMsBySize: histogram.map((_, size) => {
      let count = 0;
      let total = 0;
      for (const part of stats) {
        const ms = part.stepMsBySize[size];
        const n = part.stepHistogram[size] ?? 0;
        if (ms !== null && ms !== undefined && n > 0) {
          count += n;
          total += ms * n;
        }
      }
      return count > 0 ? total / count : null;
    }),
    decodeMs: stats.some((part) => part.decodeMs === null)
      ? null
      : stats.reduce((sum, part) => sum + (part.decodeMs ?? 0), 0),
    spanMs: stats.reduce((sum, part) => sum + part.spanMs, 0),
    eraseMs: stats.flatMap((part) => part.eraseMs),
  };
}

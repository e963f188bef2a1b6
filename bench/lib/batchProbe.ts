/**
 * Counts a `LlamaContext`'s decode batches and their sizes, for the benchmark's "where does the time
 * go" figures. It plugs into node-llama-cpp's public `batching.itemPrioritizationStrategy` option (called
 * once per decode batch, right before llama.cpp's `decodeBatch`) and, when it can, times the native
 * `decodeBatch` calls by wrapping the context's internal `_ctx.decodeBatch` (node-llama-cpp 3.21.1,
 * `dist/evaluator/LlamaContext/LlamaContext.js`; the probe degrades to counts only if that changes).
 */
import type { BatchItem, LlamaContext, LlamaContextSequence, PrioritizedBatchItem } from "node-llama-cpp";
import type { BatchStats } from "./stats.ts";

type BatchRecord = {
  items: number;
  tokens: number;
  singleTokenItems: boolean;
  atMs: number;
  /** Time inside `decodeBatch` for this batch, when timed. */
  decodeMs?: number;
};

/**
 * node-llama-cpp's default `"maximumParallelism"` strategy, copied from node-llama-cpp 3.21.1
 * (`dist/evaluator/LlamaContext/utils/batchItemsPrioritizationStrategies/maximumParallelismStrategy.js`,
 * MIT) because the package does not export it: each item gets an equal share of the batch, and what is
 * left goes to the clipped items, highest evaluation priority first. Like the original, the second and
 * third passes do not decrease `left` (the context clamps the batch to its size afterwards); kept as is
 * so that the probed context batches exactly as an unprobed one.
 */
export function maximumParallelism({
  items,
  size,
}: {
  items: readonly BatchItem[];
  size: number;
}): PrioritizedBatchItem[] {
  let left = size;
  const share = Math.floor(left / items.length);
  const result: PrioritizedBatchItem[] = [];
  const clipped: PrioritizedBatchItem[] = [];
  for (const item of items) {
    const prioritized = { item, processAmount: Math.min(item.tokens.length, left, share) };
    result.push(prioritized);
    left -= prioritized.processAmount;
    if (prioritized.processAmount < item.tokens.length) clipped.push(prioritized);
    if (left === 0) break;
  }
  for (let passes = 3; left > 0 && clipped.length > 0 && passes > 0; passes--) {
    const increase = Math.ceil(left / clipped.length);
    for (let i = 0; i < clipped.length && left > 0; i++) {
      const prioritized = clipped[i] as PrioritizedBatchItem;
      const rest = prioritized.item.tokens.length - prioritized.processAmount;
      const amount = Math.min(rest, left, increase);
      prioritized.processAmount += amount;
      if (amount === rest) clipped.splice(i--, 1);
    }
  }
  clipped.sort((a, b) => b.item.evaluationPriority - a.item.evaluationPriority);
  for (let i = 0; i < clipped.length && left > 0; i++) {
    const prioritized = clipped[i] as PrioritizedBatchItem;
    const rest = prioritized.item.tokens.length - prioritized.processAmount;
    const amount = Math.min(rest, left);
    prioritized.processAmount += amount;
    if (amount === rest) clipped.splice(i--, 1);
  }
  return result;
}

/** A `batching.itemPrioritizationStrategy` function. */
export type Strategy = (options: { items: readonly BatchItem[]; size: number }) => PrioritizedBatchItem[];

/**
 * Records every decode batch of the contexts it is attached to. Pass {@link strategy} (or {@link around} a
 * strategy of your own) as the context's `batching.itemPrioritizationStrategy` and call {@link attach} once the context exists; {@link take}
 * returns the statistics since the previous call and starts afresh.
 */
export class BatchRecorder {
  private records: BatchRecord[] = [];
  private decodeMs = 0;
  private lastDecodeEndMs = 0;
  private timed = false;
  private eraseMs: number[] = [];

  /** The prioritization strategy to give the context: records the batch, then decides as the default. */
  readonly strategy = this.around(maximumParallelism);

  /** A prioritization strategy that lets `decide` choose the batch, then records what it chose. */
  around(decide: Strategy): Strategy {
    return (options) => {
      const prioritized = decide(options);
      let tokens = 0;
      let singleTokenItems = true;
      for (const { item, processAmount } of prioritized) {
        if (processAmount <= 0) continue;
        tokens += processAmount;
        if (item.tokens.length !== 1) singleTokenItems = false;
      }
      const items = prioritized.filter((entry) => entry.processAmount > 0).length;
      this.records.push({ items, tokens, singleTokenItems, atMs: performance.now() });
      return prioritized;
    };
  }

  /** Wraps the context's native `decodeBatch` to time it; returns false when that is not possible. */
  attach(context: LlamaContext): boolean {
    const native = (context as unknown as { _ctx?: { decodeBatch?: () => Promise<void> } })._ctx;
    const decodeBatch = native?.decodeBatch;
    if (!native || typeof decodeBatch !== "function") return false;
    const timedDecodeBatch = async () => {
      const start = performance.now();
      try {
        await decodeBatch.call(native);
      } finally {
        this.lastDecodeEndMs = performance.now();
        this.decodeMs += this.lastDecodeEndMs - start;
        // The strategy ran for this batch just before llama.cpp decodes it.
        const record = this.records[this.records.length - 1];
        if (record && record.decodeMs === undefined) record.decodeMs = this.lastDecodeEndMs - start;
      }
    };
    try {
      // The native method is a read-only prototype property: shadow it on the instance.
      Object.defineProperty(native, "decodeBatch", {
        value: timedDecodeBatch,
        configurable: true,
        writable: true,
      });
    } catch {
      return false;
    }
    this.timed = true;
    return true;
  }

  /**
   * Times every `clearHistory` and `eraseContextTokenRanges` of all sequences (by wrapping the class's
   * prototype methods): both wait for the context lock, which the batch loop holds while any sequence
   * has a decode queued, so their time is mostly time waiting for that lock.
   */
  instrumentErasure(sequenceClass: typeof LlamaContextSequence): void {
    const prototype = sequenceClass.prototype;
    const clearHistory = prototype.clearHistory;
    const eraseContextTokenRanges = prototype.eraseContextTokenRanges;
    const timed = async <T>(run: () => Promise<T>): Promise<T> => {
      const start = performance.now();
      try {
        return await run();
      } finally {
        this.eraseMs.push(performance.now() - start);
      }
    };
    prototype.clearHistory = function (this: LlamaContextSequence) {
      return timed(() => clearHistory.call(this));
    };
    prototype.eraseContextTokenRanges = function (
      this: LlamaContextSequence,
      ...args: Parameters<LlamaContextSequence["eraseContextTokenRanges"]>
    ) {
      return timed(() => eraseContextTokenRanges.apply(this, args));
    };
  }

  /** Statistics of the batches since the previous call (or creation); resets the counters. */
  take(): BatchStats {
    const records = this.records;
    const steps = records.filter((record) => record.singleTokenItems);
    const histogram: number[] = [];
    for (const step of steps) histogram[step.items] = (histogram[step.items] ?? 0) + 1;
    for (let i = 0; i < histogram.length; i++) histogram[i] ??= 0;
    const stepMs = histogram.map((_, size) => {
      const timed = steps.filter((step) => step.items === size && step.decodeMs !== undefined);
      return timed.length > 0
        ? timed.reduce((sum, step) => sum + (step.decodeMs ?? 0), 0) / timed.length
        : null;
    });
    const first = records[0]?.atMs ?? 0;
    const last = Math.max(this.lastDecodeEndMs, records[records.length - 1]?.atMs ?? 0);
    const stats: BatchStats = {
      batches: records.length,
      decodeBatches: steps.length,
      meanSequencesPerStep:
        steps.length > 0 ? steps.reduce((sum, step) => sum + step.items, 0) / steps.length : Number.NaN,
      stepHistogram: histogram,
      stepMsBySize: stepMs,
      decodeMs: this.timed ? this.decodeMs : null,
      spanMs: records.length > 0 ? last - first : 0,
      eraseMs: this.eraseMs,
    };
    this.eraseMs = [];
    this.records = [];
    this.decodeMs = 0;
    return stats;
  }
}

import type { LlamaContext } from "node-llama-cpp";

/**
 * Decides when node-llama-cpp dispatches a decode batch (its `batching.dispatchSchedule` hook), so
 * that every running sequence's next token is in the same batch.
 *
 * By default node-llama-cpp dispatches on the next event-loop cycle after the first sequence queues
 * its token. Sequences get their sampled tokens at slightly different times (sampling runs per
 * sequence after the batch), so the next batch often leaves some out: measured here at 8 sequences,
 * 5.75 tokens per batch on average instead of 8 (see ../shared/DESIGN.md, Engine facts). The gate waits
 * until as many sequences have queued as are running (the scheduler says how many), or a quarter of
 * the last decode cycle passes (at most `maxWaitMs`), then dispatches.
 *
 * It reads node-llama-cpp's internal `_queuedDecodeSequenceIds` (the library is pinned at 3.21.1); if
 * that field is missing it dispatches at once, as the library's default would.
 */
export class BatchGate {
  /** Longest wait for stragglers, in milliseconds (the wait is also at most a quarter of a decode cycle). */
  readonly maxWaitMs: number;
  /** How many sequences are running now (set by the scheduler); the gate waits for that many. */
  expectedSequences: () => number = () => 1;
  private context: LlamaContext | undefined;
  /** `performance.now()` of the last gated dispatch, in milliseconds. */
  private lastDispatchAt: number | undefined;
  /** Batches dispatched and sequences in them, for benchmarks and tests. */
  readonly stats = { batches: 0, sequences: 0, timedOut: 0 };

  constructor(maxWaitMs = 40) {
    this.maxWaitMs = maxWaitMs;
  }

  /** Connects the gate to the context whose queue it watches. */
  attach(context: LlamaContext): void {
    this.context = context;
  }

  /** The `dispatchSchedule` function to pass to `createContext({batching})`. */
  readonly schedule = (dispatch: () => void): void => {
    const started = performance.now();
    // Wait at most a quarter of the last cycle (dispatch to the next first queued token, i.e. a decode
    // step plus sampling), capped by maxWaitMs: stragglers cost a big model's step little, and a tiny
    // model (a 1 ms step) is never held up for long.
    const cycle = this.lastDispatchAt === undefined ? 0 : started - this.lastDispatchAt;
    const limit = Math.min(this.maxWaitMs, Math.max(1, cycle / 4));
    const check = () => {
      const queued = this.queuedSequences();
      const ready = queued === undefined || queued >= this.expectedSequences();
      const late = performance.now() - started >= limit;
      if (!ready && !late) {
        setImmediate(check);
        return;
      }
      this.stats.batches++;
      this.stats.sequences += queued ?? 0;
      if (!ready) this.stats.timedOut++;
      this.lastDispatchAt = performance.now();
      dispatch();
    };
    setImmediate(check);
  };

  private queuedSequences(): number | undefined {
    const queued = (this.context as unknown as { _queuedDecodeSequenceIds?: Set<number> } | undefined)
      ?._queuedDecodeSequenceIds;
    return queued?.size;
  }
}

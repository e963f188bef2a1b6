import type { LlamaContext } from "node-llama-cpp";

/**
 * Decides when node-llama-cpp dispatches a decode batch (its `batching.dispatchSchedule` hook), so
 * that every running sequence's next token is in the same batch.
 *
 * By default node-llama-cpp dispatches on the next event-loop cycle after the first sequence queues
 * its token. Sequences get their sampled tokens at slightly different times (sampling runs per
 * sequence after the batch), so the next batch often leaves some out: measured here at 8 sequences,
 * 5.75 tokens per batch on average instead of 8 (see ../shared/DESIGN.md, Engine facts). The gate waits
 * until as many sequences have queued as are running (the scheduler says how many), or `maxWaitMs`
 * passes, then dispatches.
 *
 * It reads node-llama-cpp's internal `_queuedDecodeSequenceIds` (the library is pinned at 3.21.1); if
 * that field is missing it dispatches at once, as the library's default would.
 */
export class BatchGate {
  /** Longest wait for stragglers, in milliseconds. */
  readonly maxWaitMs: number;
  /** How many sequences are running now (set by the scheduler); the gate waits for that many. */
  expectedSequences: () => number = () => 1;
  private context: LlamaContext | undefined;
  /** Batches dispatched and sequences in them, for benchmarks and tests. */
  readonly stats = { batches: 0, sequences: 0, timedOut: 0 };

  constructor(maxWaitMs = 4) {
    this.maxWaitMs = maxWaitMs;
  }

  /** Connects the gate to the context whose queue it watches. */
  attach(context: LlamaContext): void {
    this.context = context;
  }

  /** The `dispatchSchedule` function to pass to `createContext({batching})`. */
  readonly schedule = (dispatch: () => void): void => {
    const started = performance.now();
    const check = () => {
      const queued = this.queuedSequences();
      const ready = queued === undefined || queued >= this.expectedSequences();
      const late = performance.now() - started >= this.maxWaitMs;
      if (!ready && !late) {
        setImmediate(check);
        return;
      }
      this.stats.batches++;
      this.stats.sequences += queued ?? 0;
      if (!ready) this.stats.timedOut++;
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

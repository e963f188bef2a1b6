/**
 * An experiment for the scheduler owner, used by the bare engine's `--defer-reloop`: makes
 * node-llama-cpp's batch loop wait one macrotask after each decode batch, so every sequence that just
 * got its token can queue its next one before the next batch is formed.
 *
 * Why: `LlamaContext.dispatchPendingBatch` (node-llama-cpp 3.21.1) loops inside its context lock
 * `while (this._queuedDecodes.length > 0)`: after a batch it decodes again at once with whatever is
 * queued. Each sequence samples its token in a separate native call, and the sequence whose sampling
 * finishes last resumes its generator a few microtasks after the loop has already taken the others'
 * next tokens, so it misses the next batch (a custom `dispatchSchedule` cannot help: the loop does not
 * go through it). With c sequences the steps hold c-1 tokens (or fewer).
 *
 * How: after the batch the loop awaits each batch item's `afterBatchAction`, which is the sequence's
 * (internal, bound per instance) `_takeIntervalCheckpointIfNeededAfterBatch`. Wrapping it to also wait
 * for one `setImmediate` (shared by all sequences of the batch) delays the loop's check by one macrotask.
 */
import type { LlamaContextSequence } from "node-llama-cpp";

type AfterBatch = (sequenceStateLength: number) => unknown;

let pendingTick: Promise<void> | null = null;

/** One promise per event-loop turn that resolves on the next `setImmediate`. */
function nextMacrotask(): Promise<void> {
  pendingTick ??= new Promise<void>((resolve) =>
    setImmediate(() => {
      pendingTick = null;
      resolve();
    }),
  );
  return pendingTick;
}

/**
 * Wraps the sequence's after-batch hook as described above.
 * @returns false when the internal hook is not there (another node-llama-cpp version): nothing changed.
 */
export function deferReloop(sequence: LlamaContextSequence): boolean {
  const target = sequence as unknown as { _takeIntervalCheckpointIfNeededAfterBatch?: AfterBatch };
  const original = target._takeIntervalCheckpointIfNeededAfterBatch;
  if (typeof original !== "function") return false;
  target._takeIntervalCheckpointIfNeededAfterBatch = (length: number) => {
    const result = original(length);
    return result instanceof Promise ? result.then(nextMacrotask) : nextMacrotask();
  };
  return true;
}

/**
 * Tells the HTTP layer when a request's generation has started (its first output arrived), so that
 * graceful shutdown can end the requests still waiting in the scheduler's queue at once while the
 * running ones get `--shutdown-timeout` (`server/InFlightRequests.ts`). Keyed by the request's abort
 * signal, the one thing both layers hold; serving reports it from the engine's `onStart` (the job took a
 * slot) or its first output.
 */
const listeners = new WeakMap<AbortSignal, (() => void)[]>();

/**
 * Calls `listener` once, when {@link reportGenerationStart} is first called for `signal` (each
 * listener registered for a signal is called, in order: shutdown's bookkeeping and the stream's headers).
 */
export function onGenerationStart(signal: AbortSignal, listener: () => void): void {
  const list = listeners.get(signal);
  if (list) list.push(listener);
  else listeners.set(signal, [listener]);
}

/** Reports that a generation of the request behind `signal` has produced output (idempotent). */
export function reportGenerationStart(signal: AbortSignal): void {
  const list = listeners.get(signal);
  if (!list) return;
  listeners.delete(signal);
  for (const listener of list) listener();
}

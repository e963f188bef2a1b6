import type { FastifyInstance } from "fastify";
import { shuttingDown } from "../errors.ts";

/** What {@link drainServer} did. */
export type DrainOutcome = {
  /** True when every in-flight request finished before the deadline. */
  drained: boolean;
  /** Requests ended at the deadline with a shutdown error. */
  aborted: number;
  /** Requests ended at once because their generation had not started (still queued). */
  abortedWaiting: number;
};

/**
 * Graceful shutdown of the HTTP side (as Kubernetes expects on SIGTERM):
 * 1. stop accepting: the listening socket closes, idle keep-alive connections close, readiness and any
 *    new request on an open connection answer 503 `shutting_down` (`server/operations.ts`);
 * 2. end at once, with the shutdown error, the requests whose generation has not started (queued in the
 *    scheduler: they would otherwise wait the whole timeout for nothing), and let the running
 *    generations finish, for up to `timeoutSeconds`;
 * 3. at the deadline, abort the rest: a stream ends with the shutdown error as its final `data:` event
 *    then `data: [DONE]`, a non-streamed request gets the 503 error body (`InFlightRequests.abortAll`);
 * 4. close the remaining connections (forcibly after a short grace) and run the app's `onClose` hooks.
 * Never rejects.
 */
export async function drainServer(app: FastifyInstance, timeoutSeconds: number): Promise<DrainOutcome> {
  const inFlight = app.inFlight;
  inFlight?.startDraining();
  const closed = app.close().then(
    () => true,
    (error: unknown) => {
      app.log.error({ err: error }, "error while closing the server");
      return true;
    },
  );
  let drained = true;
  let aborted = 0;
  let abortedWaiting = 0;
  if (inFlight) {
    abortedWaiting = inFlight.abortWaiting(shuttingDown());
    drained = await settle(inFlight.idle(), timeoutSeconds * 1000);
    if (!drained) {
      aborted = inFlight.size;
      app.log.warn({ inFlight: aborted, timeoutSeconds }, "shutdown timeout: ending in-flight requests");
      inFlight.abortAll(shuttingDown());
      await settle(inFlight.idle(), 5_000);
    }
  }
  // Connections whose response has ended are idle keep-alive ones now: close them, then the stragglers.
  app.server.closeIdleConnections();
  if (!(await settle(closed, 2_000))) {
    app.server.closeAllConnections();
    await closed;
  }
  return { drained, aborted, abortedWaiting };
}

/** Waits for `promise` at most `ms` milliseconds; true when it settled in time. */
function settle(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    promise.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}

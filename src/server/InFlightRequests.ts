import type { FastifyReply, FastifyRequest } from "fastify";
import { type ApiError, shuttingDown } from "../errors.ts";
import { onGenerationStart } from "../serving/generationStart.ts";
import { errorBody, errorHeaders } from "./errorBody.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** The generation requests in flight (set by `server/operations.ts`), for graceful shutdown. */
    inFlight?: InFlightRequests;
  }
}

type Entry = {
  request: FastifyRequest;
  reply: FastifyReply;
  controller: AbortController;
  /** True once the request's generation has produced output (`serving/generationStart.ts`). */
  started: boolean;
};

/**
 * The generation requests in flight, each with the abort controller of its generations
 * (`streamReply.ts` `clientSignal` registers them). Graceful shutdown waits for them with
 * {@link idle}, then ends the rest with {@link abortAll}.
 */
export class InFlightRequests {
  private readonly entries = new Set<Entry>();
  private readonly waiters: (() => void)[] = [];
  private isDraining = false;

  /** True once shutdown has begun: new requests are refused with 503 (`server/operations.ts`). */
  get draining(): boolean {
    return this.isDraining;
  }

  /** Marks the server as shutting down. */
  startDraining(): void {
    this.isDraining = true;
  }

  /** Requests in flight now. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Tracks a request until its response is finished or its connection closes. A request that arrives
   * while draining (it got past the 503 check before shutdown began) is ended at once: it has not started.
   */
  track(request: FastifyRequest, reply: FastifyReply, controller: AbortController): void {
    const entry: Entry = { request, reply, controller, started: false };
    this.entries.add(entry);
    onGenerationStart(controller.signal, () => {
      entry.started = true;
    });
    reply.raw.once("close", () => {
      this.entries.delete(entry);
      if (this.entries.size === 0) for (const wake of this.waiters.splice(0)) wake();
    });
    if (this.isDraining) this.abort(entry, shuttingDown());
  }

  /**
   * Aborts, with `reason`, every request whose generation has not started (still queued in the
   * scheduler, or not yet submitted); returns how many. The scheduler drops an aborted queued job at
   * once, so these get their error now instead of at the shutdown deadline.
   */
  abortWaiting(reason: ApiError): number {
    let count = 0;
    for (const entry of this.entries) {
      if (entry.started || entry.controller.signal.aborted) continue;
      this.abort(entry, reason);
      count++;
    }
    return count;
  }

  /** Resolves once no request is in flight (at once when none is). */
  idle(): Promise<void> {
    if (this.entries.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * Aborts every request in flight with `reason`: their generations stop within one decode step; a
   * stream then ends with `reason` as its final error event and `[DONE]` (`serving/output/streaming.ts`
   * `finishStream`); a response not yet started is answered with `reason` as a JSON error.
   */
  abortAll(reason: ApiError): void {
    for (const entry of this.entries) this.abort(entry, reason);
  }

  /**
   * Aborts one request with `reason` (a model unloaded under it, `serving/ModelRegistry.ts`), as
   * {@link abortAll} does; false when that request is not in flight (or carries no generation).
   */
  abortRequest(request: FastifyRequest, reason: ApiError): boolean {
    for (const entry of this.entries) {
      if (entry.request !== request) continue;
      this.abort(entry, reason);
      return true;
    }
    return false;
  }

  private abort({ request, reply, controller }: Entry, reason: ApiError): void {
    controller.abort(reason);
    // A non-streamed request ends with no response once aborted: answer it after the abort settles.
    setImmediate(() => {
      if (reply.sent || reply.raw.headersSent || reply.raw.destroyed) return;
      request.log.warn({ code: reason.code }, "request ended by the server");
      reply.code(reason.status).headers(errorHeaders(reason)).send(errorBody(reason));
    });
  }
}

import type { FastifyReply, FastifyRequest } from "fastify";
import type { ApiError } from "../errors.ts";
import { errorBody, errorHeaders } from "./errorBody.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** The generation requests in flight (set by `server/operations.ts`), for graceful shutdown. */
    inFlight?: InFlightRequests;
  }
}

type Entry = { request: FastifyRequest; reply: FastifyReply; controller: AbortController };

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

  /** Tracks a request until its response is finished or its connection closes. */
  track(request: FastifyRequest, reply: FastifyReply, controller: AbortController): void {
    const entry: Entry = { request, reply, controller };
    this.entries.add(entry);
    reply.raw.once("close", () => {
      this.entries.delete(entry);
      if (this.entries.size === 0) for (const wake of this.waiters.splice(0)) wake();
    });
  }

  /** Resolves once no request is in flight (at once when none is). */
  idle(): Promise<void> {
    if (this.entries.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * Aborts every request in flight with `reason`: their generations stop within one decode step; a
   * stream then ends with `reason` as its final error event and `[DONE]` (`serving/streaming.ts`
   * `finishStream`); a response not yet started is answered with `reason` as a JSON error.
   */
  abortAll(reason: ApiError): void {
    for (const { request, reply, controller } of this.entries) {
      controller.abort(reason);
      // A non-streamed request ends with no response once aborted: answer it after the abort settles.
      setImmediate(() => {
        if (reply.sent || reply.raw.headersSent || reply.raw.destroyed) return;
        request.log.warn({ code: reason.code }, "request ended by shutdown");
        reply.code(reason.status).headers(errorHeaders(reason)).send(errorBody(reason));
      });
    }
  }
}

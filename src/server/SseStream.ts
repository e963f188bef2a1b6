import type { ServerResponse } from "node:http";
import type { ApiError } from "../errors.ts";
import { errorBody } from "./errorBody.ts";

/**
 * A server-sent-events response in OpenAI's framing: `data: {json}\n\n` events, ended by
 * `data: [DONE]\n\n`. A failure after the stream started is sent as a final `data:` event holding the
 * error body, then `[DONE]` (as vLLM). Writes after the client went away are dropped.
 */
export class SseStream {
  private readonly response: ServerResponse;
  private ended = false;

  /**
   * Writes the status line and headers (200, `text/event-stream`) on a response the framework has
   * handed over (Fastify's `reply.hijack()`).
   */
  constructor(response: ServerResponse, headers: Record<string, string>) {
    this.response = response;
    response.writeHead(200, {
      ...headers,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    response.flushHeaders();
  }

  /** True once the stream has been ended or the client has gone away. */
  get closed(): boolean {
    return this.ended || this.response.destroyed || this.response.writableEnded;
  }

  /** Sends one event holding `payload` as JSON. */
  send(payload: unknown): void {
    if (this.closed) return;
    this.response.write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  /** Sends the error event, then `[DONE]`, and ends the response. */
  fail(error: ApiError): void {
    this.send(errorBody(error));
    this.end();
  }

  /** Sends `data: [DONE]` and ends the response. */
  end(): void {
    if (this.closed) return;
    this.response.end("data: [DONE]\n\n");
    this.ended = true;
  }
}

import type { ServerResponse } from "node:http";
import type { ApiError } from "../errors.ts";
import { errorBody } from "./errorBody.ts";

/** How a stream frames its events (see {@link SseStream}). */
export type SseFraming = {
  /** End with `data: [DONE]` (OpenAI's chat and completions). Defaults to true. */
  done?: boolean;
  /** The `event:` name of a payload (Responses, Anthropic: its `type`); none: no `event:` line. */
  eventName?: (payload: unknown) => string | undefined;
};

/**
 * A server-sent-events response, by default in OpenAI's chat framing: `data: {json}\n\n` events, ended
 * by `data: [DONE]\n\n`. A failure after the stream started is sent as a final `data:` event holding the
 * error body, then `[DONE]` (as vLLM). {@link SseFraming} gives the Responses and Anthropic framings:
 * `event: TYPE` lines, no `[DONE]` (their serving sends its own error event). Writes after the client went away are dropped.
 */
export class SseStream {
  private readonly response: ServerResponse;
  private readonly framing: SseFraming;
  private ended = false;

  /**
   * Writes the status line and headers (200, `text/event-stream`) on a response the framework has
   * handed over (Fastify's `reply.hijack()`).
   */
  constructor(response: ServerResponse, headers: Record<string, string>, framing: SseFraming = {}) {
    this.response = response;
    this.framing = framing;
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
    const event = this.framing.eventName?.(payload);
    this.response.write(
      `${event !== undefined ? `event: ${event}\n` : ""}data: ${JSON.stringify(payload)}\n\n`,
    );
  }

  /** Sends the error event, then ends the response (after `[DONE]` in OpenAI's framing). */
  fail(error: ApiError): void {
    this.send(errorBody(error));
    this.end();
  }

  /** Ends the response, with `data: [DONE]` in OpenAI's framing. */
  end(): void {
    if (this.closed) return;
    this.response.end(this.framing.done === false ? undefined : "data: [DONE]\n\n");
    this.ended = true;
  }
}

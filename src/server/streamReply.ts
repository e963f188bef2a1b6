import type { FastifyReply, FastifyRequest } from "fastify";
import type { ChunkSink } from "../serving/streaming.ts";
import { observeStreamChunk, setRequestUsage } from "./requestLog.ts";
import { type SseFraming, SseStream } from "./SseStream.ts";

/**
 * An abort signal that fires when the client goes away before the response has been sent completely
 * (a closed connection, streamed or not), so its generations stop within one decode step. The server
 * tracks the request as in flight (`InFlightRequests`): graceful shutdown aborts it with its reason.
 */
export function clientSignal(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  request.server.inFlight?.track(request, reply, controller);
  reply.raw.once("close", () => {
    if (!reply.raw.writableFinished) controller.abort(new Error("client disconnected"));
  });
  request.raw.once("aborted", () => controller.abort(new Error("client disconnected")));
  return controller.signal;
}

/**
 * Awaits a request's plan (`serving/`) made under its client signal: null when the signal aborted meanwhile
 * (the client left, or shutdown answered the request), whether the plan finished or gave up for it; else
 * the plan, or its error. (The signal is made before planning, which can wait for the constraint compiler:
 * a client that leaves then is noticed, and its request neither runs nor stays in flight.)
 */
export async function planUnder<T>(signal: AbortSignal, plan: Promise<T>): Promise<T | null> {
  try {
    const value = await plan;
    return signal.aborted ? null : value;
  } catch (error) {
    if (signal.aborted) return null;
    throw error;
  }
}

/**
 * Runs a streamed response. `start` receives the chunk sink and must do its admission checks
 * synchronously: an error it throws before returning is answered as a normal JSON error, since nothing
 * has been written yet. After that the response is an SSE stream (headers sent at once), framed as
 * `framing` says (default: OpenAI's chat framing).
 */
export async function openStream(
  request: FastifyRequest,
  reply: FastifyReply,
  start: (sink: ChunkSink) => Promise<void>,
  framing: SseFraming = {},
): Promise<FastifyReply> {
  let stream: SseStream | undefined;
  const open = (): SseStream => {
    if (stream) return stream;
    const headers = Object.fromEntries(
      Object.entries(reply.getHeaders()).map(([name, value]) => [name, String(value)]),
    );
    reply.hijack();
    stream = new SseStream(reply.raw, headers, framing);
    return stream;
  };
  const sink: ChunkSink = {
    send: (payload) => {
      observeStreamChunk(request, payload); // usage (and, with --log-requests, text) for the request log
      open().send(payload);
    },
    fail: (error) => open().fail(error),
    end: () => open().end(),
    reportUsage: (usage) => setRequestUsage(request, usage),
  };
  const done = start(sink);
  open();
  await done;
  return reply;
}

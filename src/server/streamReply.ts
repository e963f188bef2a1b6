import type { FastifyReply, FastifyRequest } from "fastify";
import type { ChunkSink } from "../serving/streaming.ts";
import { SseStream } from "./SseStream.ts";

/**
 * An abort signal that fires when the client goes away before the response has been sent completely
 * (a closed connection, streamed or not), so its generations stop within one decode step.
 */
export function clientSignal(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once("close", () => {
    if (!reply.raw.writableFinished) controller.abort(new Error("client disconnected"));
  });
  request.raw.once("aborted", () => controller.abort(new Error("client disconnected")));
  return controller.signal;
}

/**
 * Runs a streamed response. `start` receives the chunk sink and must do its admission checks
 * synchronously: an error it throws before returning is answered as a normal JSON error, since nothing
 * has been written yet. After that the response is an SSE stream (headers sent at once).
 */
export async function openStream(
  _request: FastifyRequest,
  reply: FastifyReply,
  start: (sink: ChunkSink) => Promise<void>,
): Promise<FastifyReply> {
  let stream: SseStream | undefined;
  const open = (): SseStream => {
    if (stream) return stream;
    const headers = Object.fromEntries(
      Object.entries(reply.getHeaders()).map(([name, value]) => [name, String(value)]),
    );
    reply.hijack();
    stream = new SseStream(reply.raw, headers);
    return stream;
  };
  const sink: ChunkSink = {
    send: (payload) => open().send(payload),
    fail: (error) => open().fail(error),
    end: () => open().end(),
  };
  const done = start(sink);
  open();
  await done;
  return reply;
}

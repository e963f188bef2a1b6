import type { FastifyReply, FastifyRequest } from "fastify";
import { ApiError } from "../errors.ts";
import { onGenerationStart } from "../serving/generationStart.ts";
import type { ChunkSink } from "../serving/output/streaming.ts";
import { errorBody, errorHeaders } from "./errorBody.ts";
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
 * has been written yet. The SSE headers (200) go out once the request is admitted, that is when its
 * generation takes a slot (`serving/generationStart.ts`, reported under `signal`), or when it ends
 * without one (its error event); chunks sent before (a chat stream's `role` chunk) follow the headers; the stream is framed as `framing` says (default: OpenAI's chat framing).
 * A request the server ends while it still waits for a slot (graceful shutdown, issue 31; the request
 * timeout) therefore gets that error's status and JSON body (503 `shutting_down`), as a non-streamed
 * request does, instead of a 200 with an error event.
 */
export async function openStream(
  request: FastifyRequest,
  reply: FastifyReply,
  signal: AbortSignal,
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
    for (const payload of held.splice(0)) stream.send(payload);
    return stream;
  };
  /** Chunks sent before admission (the chat stream's first `role` chunk): they follow the headers. */
  const held: unknown[] = [];
  let admitted = false;
  /** True when the request was ended before admission: its answer is a JSON error, not a stream. */
  const endedBeforeAdmission = () => stream === undefined && signal.aborted;
  const sink: ChunkSink = {
    send: (payload) => {
      observeStreamChunk(request, payload); // usage (and, with --log-requests, text) for the request log
      if (admitted) open().send(payload);
      else held.push(payload);
    },
    fail: (error) => {
      if (!endedBeforeAdmission()) open().fail(error);
    },
    end: () => {
      if (!endedBeforeAdmission()) open().end();
    },
    reportUsage: (usage) => setRequestUsage(request, usage),
  };
  onGenerationStart(signal, () => {
    admitted = true;
    if (!signal.aborted) open();
  });
  const done = start(sink);
  await done;
  if (stream === undefined && !reply.sent && !reply.raw.destroyed) {
    const reason: unknown = signal.reason;
    if (reason instanceof ApiError) {
      reply.code(reason.status).headers(errorHeaders(reason)).send(errorBody(reason));
    } else open().end();
  }
  return reply;
}

/**
 * Reads a server-sent-events response body event by event, with the arrival time of the bytes that
 * completed each event: shared by the benchmarks' HTTP drivers (`serverTarget.ts`,
 * `structuredServer.ts`, `peerClient.ts`). The parsing is the web UI's (`ui/src/sse.ts`), which the
 * tests read streams with too.
 */
import { sseEvents as uiSseEvents } from "../../ui/src/sse.ts";

/** One `data:` event: its payload (without `data: `) and when its last bytes arrived (`performance.now()`). */
export type SseEvent = { data: string; arrivedMs: number };

/**
 * Yields the `data:` events of a streamed response in order, `[DONE]` included; comments and other
 * fields are skipped.
 */
export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  // The parser yields every event a chunk completes before it reads the next chunk, so the time the
  // last chunk was read (as the drivers timed it before: when the iteration got the bytes) is the
  // arrival time of the event being yielded.
  let arrivedMs = performance.now();
  const timed = body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        arrivedMs = performance.now();
        controller.enqueue(chunk);
      },
    }),
  );
  for await (const { data } of uiSseEvents(timed)) yield { data, arrivedMs };
}

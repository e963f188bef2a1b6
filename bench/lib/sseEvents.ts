/**
 * Reads a server-sent-events response body event by event, with the arrival time of the bytes that
 * completed each event: shared by the benchmarks' HTTP drivers (`serverTarget.ts`,
 * `structuredServer.ts`, `peerClient.ts`).
 */

/** One `data:` event: its payload (without `data: `) and when its last bytes arrived (`performance.now()`). */
export type SseEvent = { data: string; arrivedMs: number };

/**
 * Yields the `data:` events of a streamed response in order, `[DONE]` included; comments and other
 * fields are skipped.
 */
export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const bytes of body as unknown as AsyncIterable<Uint8Array>) {
    const arrivedMs = performance.now();
    buffer += decoder.decode(bytes, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
      if (event.startsWith("data: ")) yield { data: event.slice("data: ".length), arrivedMs };
    }
  }
}

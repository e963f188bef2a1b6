/** One Server-Sent Event: its `event:` name (undefined without one, the spec's "message") and its data. */
export type SseEvent = { event: string | undefined; data: string };

/**
 * Yields each Server-Sent Event of a response body, until the stream ends: its `event:` name and its
 * `data` as text (multi-line data joined with `\n`), as the WHATWG event-stream parser reads them.
 * Lines end with `\n`, `\r\n` or `\r`, wherever the chunks split them (inside a UTF-8 character too).
 * Comments, `id:` and `retry:` are skipped; an event without data is not yielded. Aborting the fetch
 * that produced the body makes the iteration throw the abort error.
 */
export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  let event: string | undefined;
  const field = (line: string, name: string): string | undefined => {
    if (!line.startsWith(`${name}:`)) return undefined;
    return line.slice(line.startsWith(`${name}: `) ? name.length + 2 : name.length + 1);
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.search(/\r\n|\r|\n/);
      // A lone "\r" at the end may be the first half of "\r\n": wait for the next chunk.
      while (newline >= 0 && !(newline === buffer.length - 1 && buffer.endsWith("\r"))) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { event, data: data.join("\n") };
          data = [];
          event = undefined;
        } else {
          const value = field(line, "data");
          if (value !== undefined) data.push(value);
          else event = field(line, "event") ?? event;
        }
        newline = buffer.search(/\r\n|\r|\n/);
      }
    }
    if (data.length > 0) yield { event, data: data.join("\n") };
  } finally {
    // Stops the download when the consumer leaves early; a no-op once the stream has ended.
    reader.cancel().catch(() => {});
  }
}

/**
 * Yields the `data` of each Server-Sent Event of a response body, as text (multi-line data joined with
 * `\n`), until the stream ends; the events' names are dropped (see {@link sseEvents}).
 */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  for await (const { data } of sseEvents(body)) yield data;
}

/**
 * Yields the `data` of each Server-Sent Event of a response body, as text (multi-line data joined with
 * `\n`), until the stream ends. Comments and other fields are skipped. Aborting the fetch that produced
 * the body makes the iteration throw the abort error.
 */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
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
          if (data.length > 0) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
        newline = buffer.search(/\r\n|\r|\n/);
      }
    }
    if (data.length > 0) yield data.join("\n");
  } finally {
    // Stops the download when the consumer leaves early; a no-op once the stream has ended.
    reader.cancel().catch(() => {});
  }
}

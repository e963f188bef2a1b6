import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sseData, sseEvents } from "../../../ui/src/sse.ts";

/** A byte stream delivering `text` in pieces cut at the given byte offsets. */
function streamOf(text: string, cuts: number[]): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  const bounds = [0, ...cuts, bytes.length];
  return new ReadableStream({
    start(controller) {
      for (let i = 0; i + 1 < bounds.length; i++) controller.enqueue(bytes.slice(bounds[i], bounds[i + 1]));
      controller.close();
    },
  });
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<string[]> {
  const events: string[] = [];
  for await (const data of sseData(stream)) events.push(data);
  return events;
}

describe("sseData", () => {
  const text =
    ': comment\n\ndata: {"text":"héllo 🦙"}\n\nevent: x\ndata: line one\ndata: line two\n\ndata:[DONE]\r\n\r\n';
  const expected = ['{"text":"héllo 🦙"}', "line one\nline two", "[DONE]"];

  it("yields each event's data, joining multi-line data", async () => {
    assert.deepEqual(await collect(streamOf(text, [])), expected);
  });

  it("gives the same events however the bytes are split, even inside a UTF-8 character or CRLF", async () => {
    const length = new TextEncoder().encode(text).length;
    for (let cut = 1; cut < length; cut++) {
      assert.deepEqual(await collect(streamOf(text, [cut])), expected, `cut at byte ${cut}`);
    }
    const everyByte = Array.from({ length: length - 1 }, (_, i) => i + 1);
    assert.deepEqual(await collect(streamOf(text, everyByte)), expected);
  });

  it("yields a last event that lacks its blank line", async () => {
    assert.deepEqual(await collect(streamOf("data: a\n\ndata: b\n", [])), ["a", "b"]);
  });

  it("names each event by its last event: line, reset after every event", async () => {
    const events = [];
    for await (const event of sseEvents(streamOf(text, [7, 40]))) events.push(event);
    assert.deepEqual(events, [
      { event: undefined, data: '{"text":"héllo 🦙"}' },
      { event: "x", data: "line one\nline two" },
      { event: undefined, data: "[DONE]" },
    ]);
  });
});

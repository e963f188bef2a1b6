import assert from "node:assert/strict";
import type { ServerResponse } from "node:http";
import { describe, it } from "node:test";
import { overloaded } from "../../../src/errors.ts";
import { errorBody } from "../../../src/server/errorBody.ts";
import { SseStream } from "../../../src/server/SseStream.ts";

/** A stand-in for Node's `ServerResponse` that records the status, headers and written text. */
function recordingResponse() {
  const recorded = { status: 0, headers: {} as Record<string, string>, text: "", flushed: false };
  const response = {
    destroyed: false,
    writableEnded: false,
    writeHead(status: number, headers: Record<string, string>) {
      recorded.status = status;
      recorded.headers = headers;
    },
    flushHeaders() {
      recorded.flushed = true;
    },
    write(chunk: string) {
      recorded.text += chunk;
      return true;
    },
    end(chunk?: string) {
      if (chunk !== undefined) recorded.text += chunk;
      response.writableEnded = true;
    },
  };
  return { response, raw: response as unknown as ServerResponse, recorded };
}

describe("SseStream", () => {
  it("sends the event-stream headers at once, keeping the reply's own", () => {
    const { raw, recorded } = recordingResponse();
    new SseStream(raw, { "x-request-id": "abc" });
    assert.equal(recorded.status, 200);
    assert.equal(recorded.headers["content-type"], "text/event-stream; charset=utf-8");
    assert.equal(recorded.headers["cache-control"], "no-cache");
    assert.equal(recorded.headers["x-accel-buffering"], "no");
    assert.equal(recorded.headers["x-request-id"], "abc");
    assert.ok(recorded.flushed);
  });

  it("frames OpenAI's events: one data line of JSON each, then data: [DONE]", () => {
    const { raw, recorded } = recordingResponse();
    const stream = new SseStream(raw, {});
    stream.send({ a: 1, text: "two\nlines" });
    stream.send({ b: 2 });
    stream.end();
    assert.equal(recorded.text, 'data: {"a":1,"text":"two\\nlines"}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n');
    assert.ok(stream.closed);
  });

  it("sends a failure as the error body's event, then [DONE]", () => {
    const { raw, recorded } = recordingResponse();
    const stream = new SseStream(raw, {});
    const error = overloaded("busy");
    stream.fail(error);
    assert.equal(recorded.text, `data: ${JSON.stringify(errorBody(error))}\n\ndata: [DONE]\n\n`);
  });

  it("names events and leaves out [DONE] in the Responses and Anthropic framing", () => {
    const { raw, recorded } = recordingResponse();
    const stream = new SseStream(
      raw,
      {},
      { done: false, eventName: (payload) => (payload as { type: string }).type },
    );
    stream.send({ type: "message_start" });
    stream.end();
    assert.equal(recorded.text, 'event: message_start\ndata: {"type":"message_start"}\n\n');
  });

  it("drops writes once ended or once the client has gone", () => {
    const ended = recordingResponse();
    const stream = new SseStream(ended.raw, {});
    stream.end();
    stream.send({ late: true });
    stream.end();
    assert.equal(ended.recorded.text, "data: [DONE]\n\n");
    const gone = recordingResponse();
    const orphan = new SseStream(gone.raw, {});
    gone.response.destroyed = true;
    orphan.send({ lost: true });
    orphan.end();
    assert.equal(gone.recorded.text, "");
    assert.ok(orphan.closed);
  });
});

/** bench/lib/serveBench.ts: vLLM `bench serve`'s metric definitions and the queued-at-once driver. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { queuedAtOnce, type ServeRequestResult, summariseServe } from "../../bench/lib/serveBench.ts";
import { sseEvents } from "../../bench/lib/sseEvents.ts";

/** A request sent at `startMs` whose tokens arrive at the given times. */
function request(startMs: number, arrivals: number[], promptTokens = 10): ServeRequestResult {
  const first = arrivals[0] as number;
  return {
    startMs,
    endMs: arrivals.at(-1) as number,
    ttftMs: first - startMs,
    itlMs: arrivals.slice(1).map((time, index) => time - (arrivals[index] as number)),
    tokens: arrivals.length,
    promptTokens,
  };
}

describe("summariseServe", () => {
  it("computes TTFT, TPOT = (E2EL - TTFT) / (n - 1), ITL, E2EL and the throughputs as vLLM", () => {
    const summary = summariseServe(2, [
      request(0, [100, 110, 130], 10), // TTFT 100, E2EL 130, TPOT 15, gaps 10 and 20
      request(0, [200, 240], 30), // TTFT 200, E2EL 240, TPOT 40, gap 40
      request(500, [1000], 20), // one token: TTFT 500, E2EL 500, no TPOT
    ]);
    assert.equal(summary.requests, 3);
    assert.equal(summary.durationMs, 1000);
    assert.equal(summary.outputTokens, 6);
    assert.equal(summary.promptTokens, 60);
    assert.equal(summary.requestsPerS, 3);
    assert.equal(summary.outputTokPerS, 6);
    assert.equal(summary.totalTokPerS, 66);
    assert.deepEqual(summary.ttft, { mean: 800 / 3, median: 200, p99: 200 + 0.98 * 300 });
    assert.equal(summary.tpot.mean, 27.5);
    assert.equal(summary.tpot.median, 27.5);
    assert.equal(summary.itl.median, 20);
    assert.equal(summary.itl.mean, 70 / 3);
    assert.equal(summary.e2el.median, 240);
  });

  it("gives NaN latencies and throughputs for no requests", () => {
    const summary = summariseServe(1, []);
    assert.equal(summary.requests, 0);
    assert.ok(Number.isNaN(summary.ttft.mean) && Number.isNaN(summary.tpot.median));
    assert.ok(Number.isNaN(summary.requestsPerS));
  });
});

describe("queuedAtOnce", () => {
  it("keeps at most `concurrency` in flight, starts the next as one ends, and returns results in send order", async () => {
    let inFlight = 0;
    let most = 0;
    const order: number[] = [];
    const results = await queuedAtOnce([5, 1, 3, 2, 4], 2, async (delay) => {
      inFlight++;
      most = Math.max(most, inFlight);
      order.push(delay);
      await new Promise((resolve) => setTimeout(resolve, delay));
      inFlight--;
      return request(delay, [delay + 1], delay);
    });
    assert.equal(most, 2);
    assert.deepEqual(order, [5, 1, 3, 2, 4]);
    assert.deepEqual(
      results.map((result) => result.promptTokens),
      [5, 1, 3, 2, 4],
    );
  });
});

describe("bench sseEvents (the web UI's parser, timed)", () => {
  it("yields each data event, [DONE] included, stamped no earlier than the chunk that completed it", async () => {
    const encoder = new TextEncoder();
    const chunks = ['data: {"a":1}\n\ndata: {"b"', ":2}\n\n: comment\n\n", "data: [DONE]\n\n"];
    let read = 0;
    const readAt: number[] = [];
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const chunk = chunks[read++];
        if (chunk === undefined) controller.close();
        else {
          readAt.push(performance.now());
          controller.enqueue(encoder.encode(chunk));
        }
      },
    });
    const events = [];
    for await (const event of sseEvents(body)) events.push(event);
    assert.deepEqual(
      events.map((event) => event.data),
      ['{"a":1}', '{"b":2}', "[DONE]"],
    );
    // Each event is stamped no earlier than the chunk that completed it was produced.
    for (const [index, chunk] of [0, 1, 2].entries())
      assert.ok(events[index]!.arrivedMs >= readAt[chunk]!, `event ${index}`);
  });
});

/**
 * Graceful shutdown on SIGTERM: in-flight requests finish within `--shutdown-timeout`; past it, a
 * stream ends with an error event then `[DONE]`, a non-streamed request gets a 503 error body; the
 * process exits 0 either way. Two servers: each test ends its own.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sseData } from "../../ui/src/sse.ts";
import { startTestServer, TEST_MODEL, type TestServer } from "../helpers/testServer.ts";

/**
 * Reads a chat stream to its end, stopping the server (SIGTERM) as soon as the first content arrives and
 * `running` requests hold a slot (`vllm:num_requests_running`; requests sent together can reach a slot in
 * either order).
 * @returns the stream's events and the server's exit (`server.stop()`).
 */
async function streamThroughShutdown(
  response: Response,
  server: TestServer,
  running = 1,
): Promise<{ events: unknown[]; exited: Promise<number | null> }> {
  const events: unknown[] = [];
  let exited: Promise<number | null> | undefined;
  for await (const event of sseEvents(response)) {
    events.push(event);
    if (!exited && (event as Chunk).choices?.[0]?.delta.content) {
      await runningAtLeast(server, running);
      exited = server.stop();
    }
  }
  assert.ok(exited, "the stream produced no content");
  assert.equal(events.at(-1), "[DONE]");
  return { events, exited };
}

/** Waits (up to 5 s) until at least `count` requests hold a slot, as `/metrics` reports. */
async function runningAtLeast(server: TestServer, count: number): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    if (Number(/^vllm:num_requests_running\{[^}]*\} (\S+)/m.exec(metrics)?.[1]) >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`fewer than ${count} requests ever held a slot`);
}

/** Waits (up to 60 s) until at least `count` requests wait in the queue, as `/metrics` reports. */
async function waitingAtLeast(server: TestServer, count: number): Promise<void> {
  for (let attempt = 0; attempt < 1200; attempt++) {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    if (Number(/^vllm:num_requests_waiting\{[^}]*\} (\S+)/m.exec(metrics)?.[1]) >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`fewer than ${count} requests ever waited in the queue`);
}

/** The SSE `data:` payloads of a response as they arrive (JSON-parsed; `[DONE]` kept as the string). */
async function* sseEvents(response: Response): AsyncGenerator<unknown> {
  for await (const data of sseData(response.body as ReadableStream<Uint8Array>)) {
    yield data === "[DONE]" ? data : JSON.parse(data);
  }
}

type Chunk = {
  choices: { delta: { content?: string }; finish_reason: string | null }[];
  usage?: { completion_tokens: number };
  error?: { code: string };
};

const messages = [{ role: "user", content: "Tell me a story." }];

describe("graceful shutdown", () => {
  it("lets a stream in flight at SIGTERM complete, then exits 0", async () => {
    // A --shutdown-timeout no machine's speed reaches: the 600 tokens finish however slow the machine is.
    const server = await startTestServer(["--max-num-seqs", "2", "--shutdown-timeout", "3600"]);
    const response = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages,
      max_tokens: 600,
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(response.status, 200);
    // SIGTERM as soon as the generation is under way.
    const { events, exited } = await streamThroughShutdown(response, server);
    const chunks = events.slice(0, -1) as Chunk[];
    assert.ok(
      chunks.every((chunk) => chunk.error === undefined),
      "no error event",
    );
    assert.equal(
      chunks.find((chunk) => chunk.choices[0]?.finish_reason)?.choices[0]?.finish_reason,
      "length",
    );
    assert.equal(chunks.at(-1)?.usage?.completion_tokens, 600, "the whole generation was sent");
    assert.equal(await exited, 0);
    assert.ok(server.logs.some((line) => line.msg === "shutting down"));
    const closed = server.logs.find((line) => line.msg === "server closed");
    assert.equal(closed?.drained, true);
    assert.equal(closed?.aborted, 0);
  });

  it("past --shutdown-timeout, ends a stream with an error event then [DONE], answers 503, exits 0", async () => {
    const server = await startTestServer([
      "--shutdown-timeout",
      "1",
      "--max-num-seqs",
      "2",
      "--max-model-len",
      "2048",
    ]);
    // Neither request sets max_tokens: stories260K never ends a chat on its own, so both run to the
    // end of the 2048-token context (its training context), far longer than the 1 s the server gives them.
    const plain = server.post("/v1/chat/completions", { model: TEST_MODEL, messages });
    const response = await server.post("/v1/chat/completions", { model: TEST_MODEL, messages, stream: true });
    assert.equal(response.status, 200);
    const { events, exited } = await streamThroughShutdown(response, server, 2);
    const last = events.at(-2) as { object: string; code: number; error: { code: string; type: string } };
    assert.equal(last.object, "error");
    assert.equal(last.code, 503);
    assert.equal(last.error.code, "shutting_down");
    assert.ok(
      (events.slice(0, -2) as Chunk[]).every((chunk) => chunk.choices[0]?.finish_reason === null),
      "the stream was cut before it finished",
    );
    const refused = await plain;
    assert.equal(refused.status, 503);
    const body = (await refused.json()) as { error: { code: string } };
    assert.equal(body.error.code, "shutting_down");
    assert.equal(await exited, 0);
    const closed = server.logs.find((line) => line.msg === "server closed");
    assert.equal(closed?.drained, false);
    // Both had a slot at SIGTERM (the engine reports a job's start when it takes a slot): both ran to the deadline.
    assert.equal(closed?.aborted, 2);
    assert.doesNotMatch(server.stderr(), /Unhandled|uncaught|Error:/i);
  });

  it("answers requests still queued at SIGTERM, plain and streamed, with 503 while the running one keeps going (issues #14, #31)", async () => {
    const server = await startTestServer([
      "--shutdown-timeout",
      "3600",
      "--max-num-seqs",
      "1",
      "--max-model-len",
      "2048",
    ]);
    // One slot: the stream runs (to the end of the 2048-token context), the other two wait in the queue.
    // The drain deadline is beyond any machine's time for 2048 tokens.
    const response = await server.post("/v1/chat/completions", { model: TEST_MODEL, messages, stream: true });
    assert.equal(response.status, 200);
    // The running stream is read in the background; `order` records what happened when.
    const order: string[] = [];
    let contentAfterRefusals = 0;
    const rest: unknown[] = [];
    const reading = (async () => {
      for await (const event of sseEvents(response)) {
        rest.push(event);
        if ((event as Chunk).choices?.[0]?.delta.content && order.includes("refused")) contentAfterRefusals++;
      }
      order.push("stream done");
    })();
    const queuedPlain = server.post("/v1/chat/completions", { model: TEST_MODEL, messages, max_tokens: 4 });
    const queuedStream = server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages,
      max_tokens: 4,
      stream: true,
    });
    await waitingAtLeast(server, 2);
    const exited = server.stop();
    const refused = await Promise.all([queuedPlain, queuedStream]);
    order.push("refused");
    for (const answer of refused) {
      // The streamed one too: no 200 and SSE error event, its headers wait for a slot it never got.
      assert.equal(answer.status, 503);
      assert.match(answer.headers.get("content-type") ?? "", /application\/json/);
      assert.equal(((await answer.json()) as { error: { code: string } }).error.code, "shutting_down");
    }
    await reading;
    // At once: both were answered while the running stream was still producing, and it went on after them.
    assert.deepEqual(order, ["refused", "stream done"]);
    assert.ok(contentAfterRefusals > 0, "the running stream kept producing after the 503s");
    assert.equal(rest.at(-1), "[DONE]");
    assert.ok(
      (rest.slice(0, -1) as Chunk[]).every((chunk) => chunk.error === undefined),
      "the running stream finished without an error",
    );
    assert.equal(await exited, 0);
    const closed = server.logs.find((line) => line.msg === "server closed");
    assert.equal(closed?.abortedWaiting, 2);
    assert.equal(closed?.aborted, 0);
  });
  it("a second SIGTERM while draining ends the stream with the shutdown error event then [DONE], and exits 1", async () => {
    const server = await startTestServer(["--shutdown-timeout", "3600", "--max-model-len", "2048"]);
    // No max_tokens: the stream runs to the end of the 2048-token context, and the drain deadline is far.
    const response = await server.post("/v1/chat/completions", { model: TEST_MODEL, messages, stream: true });
    assert.equal(response.status, 200);
    const events: unknown[] = [];
    let exited: Promise<number | null> | undefined;
    for await (const event of sseEvents(response)) {
      events.push(event);
      if (!exited && (event as Chunk).choices?.[0]?.delta.content) {
        await runningAtLeast(server, 1);
        exited = server.stop();
        // The first signal drains (the stream keeps going); the second one must not cut it mid-event.
        while (!server.logs.some((line) => line.msg === "shutting down")) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        server.process.kill("SIGTERM");
      }
    }
    assert.ok(exited, "the stream produced no content");
    assert.equal(events.at(-1), "[DONE]");
    const last = events.at(-2) as { object: string; error: { code: string } };
    assert.equal(last.object, "error");
    assert.equal(last.error.code, "shutting_down");
    assert.equal(await exited, 1);
    assert.ok(server.logs.some((line) => line.msg === "second signal: ending in-flight requests now"));
  });
});

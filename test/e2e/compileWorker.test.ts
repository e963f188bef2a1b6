/**
 * The constraint compiler's worker thread seen through the server: a client that disconnects while its
 * schema waits for (or is in) the compiler is noticed, its request generates nothing and leaves nothing
 * in flight, and the next guided request is answered.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

/** The sum of a metric's samples in the server's `/metrics` text. */
async function metric(server: TestServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  let sum = 0;
  for (const match of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm")))
    sum += Number(match[1]);
  return sum;
}

describe("guided requests whose client leaves while the schema compiles", () => {
  const server = useTestServer();

  it("generate nothing, leave nothing in flight, and the compiler answers the next request", async () => {
    // A first guided request, so that the worker is up and its automata built.
    const warm = await server.post("/v1/completions", {
      model: TEST_MODEL,
      prompt: "Once",
      max_tokens: 4,
      guided_choice: ["yes", "no"],
    });
    assert.equal(warm.status, 200);
    const tokensBefore = await metric(server, "vllm:generation_tokens_total");
    // About half a second of compiling, then one queued behind it that would generate 1,800 tokens.
    const slow = { type: "string", enum: Array.from({ length: 60_000 }, (_, i) => `value-${i}`) };
    const left = [
      { model: TEST_MODEL, prompt: "Once", max_tokens: 8, guided_json: slow },
      {
        model: TEST_MODEL,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 1800,
        stream: true,
        response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "integer" } } },
      },
    ];
    const controllers = left.map(() => new AbortController());
    const sent = left.map((body, i) =>
      fetch(`${server.url}${"prompt" in body ? "/v1/completions" : "/v1/chat/completions"}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: controllers[i]!.signal,
      }).catch((error: Error) => error),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const controller of controllers) controller.abort();
    for (const outcome of await Promise.all(sent)) assert.ok(outcome instanceof Error, "the client left");
    // The next guided request is answered at once, by a fresh worker: the abandoned compilation ended.
    const next = await server.post("/v1/completions", {
      model: TEST_MODEL,
      prompt: "Once",
      max_tokens: 4,
      guided_json: { type: "integer" },
    });
    assert.equal(next.status, 200);
    assert.match(((await next.json()) as { choices: { text: string }[] }).choices[0]!.text, /^-?\d*$/);
    assert.equal(await metric(server, "vllm:num_requests_running"), 0);
    const generated = (await metric(server, "vllm:generation_tokens_total")) - tokensBefore;
    assert.ok(generated <= 4, `only the last request generated (${generated} tokens)`);
    // Nothing left in flight: the server drains at once.
    assert.equal(await server.stop(), 0);
    const closed = server.logs.find((line) => line.msg === "server closed");
    assert.equal(closed?.drained, true);
    assert.equal(closed?.aborted, 0);
  });
});

/**
 * The HTTP contract in-process: the app with the fake engine (`test/helpers/fakeEngine.ts`) through
 * Fastify's `inject`, no process and no model. Status codes and error bodies (422 vs 400, 404, 405, 415),
 * the response bodies, and the SSE framing of streams: `data:` events, the usage chunk, `[DONE]`, the
 * final error event, and a framing that any client reads the same wherever the bytes are split.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { internalError } from "../../src/errors.ts";
import type { ChatCompletionChunk, ChatCompletionResponse } from "../../src/protocol/chat.ts";
import type { CompletionResponse } from "../../src/protocol/completions.ts";
import type { ModelList } from "../../src/protocol/models.ts";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { sseEventsOf, useFakeApp, withFakeApp } from "../helpers/fakeApp.ts";
import { FakeEngine, fakeContext, fakeDetokenize } from "../helpers/fakeEngine.ts";

/** The `data` of each SSE event of a body delivered in `chunks`, read by the web UI's parser. */
async function readEvents(chunks: readonly Uint8Array[]): Promise<string[]> {
  return (await sseEventsOf(chunks)).map((event) => event.data);
}

/** Asserts the OpenAI framing of a raw stream body: `data: {json}\n\n` events, ended by `data: [DONE]\n\n`. */
function assertOpenAiFraming(payload: string): void {
  assert.ok(
    payload.endsWith("data: [DONE]\n\n"),
    `no [DONE] at the end: ${JSON.stringify(payload.slice(-40))}`,
  );
  const events = payload.split("\n\n").slice(0, -1);
  for (const event of events)
    assert.match(event, /^data: (\{.*\}|\[DONE\])$/s, `not one data line: ${event}`);
}

const chatBody = { model: "fake-model", messages: [{ role: "user", content: "Hi" }] };

describe("HTTP contract (in-process, fake engine)", () => {
  const fake = useFakeApp({ engines: [new FakeEngine({ names: ["fake-model", "fake-alias"] })] });

  it("lists the served names at GET /v1/models", async () => {
    const response = await fake.app.inject({ method: "GET", url: "/v1/models" });
    assert.equal(response.statusCode, 200);
    const list = response.json() as ModelList;
    assert.deepEqual(
      list.data.map((model) => [model.id, model.root]),
      [
        ["fake-model", "fake-model"],
        ["fake-alias", "fake-model"],
      ],
    );
  });

  it("answers a chat completion with the engine's text and its usage", async () => {
    const response = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: chatBody,
    });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers["content-type"]), /^application\/json/);
    const body = response.json() as ChatCompletionResponse;
    assert.equal(body.object, "chat.completion");
    assert.equal(body.model, "fake-model");
    assert.equal(body.choices[0]?.message.content, "Hello, world!");
    assert.equal(body.choices[0]?.finish_reason, "stop");
    assert.equal(body.usage.completion_tokens, 13);
    assert.equal(body.usage.prompt_tokens, fake.engine.submitted.at(-1)?.promptTokens.length);
    assert.ok(response.headers["x-request-id"]);
  });

  it("maps max_tokens and stop to the engine request and finish_reason", async () => {
    const short = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: { ...chatBody, max_tokens: 5 },
    });
    const shortBody = short.json() as ChatCompletionResponse;
    assert.equal(shortBody.choices[0]?.message.content, "Hello");
    assert.equal(shortBody.choices[0]?.finish_reason, "length");
    const stopped = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: { ...chatBody, stop: [", "] },
    });
    const stoppedBody = stopped.json() as ChatCompletionResponse;
    assert.equal(stoppedBody.choices[0]?.message.content, "Hello");
    assert.equal(fake.engine.submitted.at(-1)?.stop.join(), ", ");
  });

  it("answers a completion", async () => {
    const response = await fake.app.inject({
      method: "POST",
      url: "/v1/completions",
      payload: { model: "fake-alias", prompt: "abc", max_tokens: 4 },
    });
    assert.equal(response.statusCode, 200);
    const body = response.json() as CompletionResponse;
    assert.equal(body.model, "fake-alias");
    assert.equal(body.choices[0]?.text, "Hell");
    assert.deepEqual(fake.engine.submitted.at(-1)?.promptTokens, [97, 98, 99]);
  });

  it("422 with FastAPI's detail for a wrong type, 400 naming the field for a value out of range", async () => {
    const wrongType = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: { ...chatBody, temperature: "hot" },
    });
    assert.equal(wrongType.statusCode, 422);
    const typeBody = wrongType.json() as ErrorBody;
    assert.equal(typeBody.object, "error");
    assert.equal(typeBody.code, 422);
    assert.deepEqual(typeBody.detail?.[0]?.loc, ["body", "temperature"]);
    const outOfRange = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: { ...chatBody, temperature: 5 },
    });
    assert.equal(outOfRange.statusCode, 400);
    const rangeBody = outOfRange.json() as ErrorBody;
    assert.equal(rangeBody.error.param, "temperature");
    assert.equal(rangeBody.error.type, "invalid_request_error");
    assert.equal(rangeBody.detail, undefined);
  });

  it("404 naming the served models for an unknown model", async () => {
    const response = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: { ...chatBody, model: "nope" },
    });
    assert.equal(response.statusCode, 404);
    const body = response.json() as ErrorBody;
    assert.equal(body.error.code, "model_not_found");
    assert.match(body.message, /fake-model/);
  });

  it("405 with Allow for another method on a known path, 404 for an unknown path", async () => {
    const wrongMethod = await fake.app.inject({ method: "GET", url: "/v1/chat/completions" });
    assert.equal(wrongMethod.statusCode, 405);
    assert.equal(wrongMethod.headers.allow, "POST");
    assert.equal((wrongMethod.json() as ErrorBody).code, 405);
    const unknown = await fake.app.inject({ method: "GET", url: "/v1/nothing" });
    assert.equal(unknown.statusCode, 404);
  });

  it("400 for malformed JSON, 415 for another Content-Type", async () => {
    const malformed = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      headers: { "content-type": "application/json" },
      payload: "{",
    });
    assert.equal(malformed.statusCode, 400);
    assert.equal((malformed.json() as ErrorBody).error.code, "malformed_json");
    const text = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      headers: { "content-type": "text/plain" },
      payload: "hello",
    });
    assert.equal(text.statusCode, 415);
  });

  it("streams chat chunks: the role first, the text, finish_reason, the usage chunk, then [DONE]", async () => {
    const response = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: { ...chatBody, stream: true, stream_options: { include_usage: true } },
    });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers["content-type"]), /^text\/event-stream/);
    assertOpenAiFraming(response.payload);
    const events = await readEvents([response.rawPayload]);
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1).map((data) => JSON.parse(data) as ChatCompletionChunk);
    assert.deepEqual(chunks[0]?.choices[0]?.delta, { role: "assistant", content: "" });
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
    assert.equal(text, "Hello, world!");
    const finish = chunks.filter((chunk) => chunk.choices[0]?.finish_reason);
    assert.deepEqual(
      finish.map((chunk) => chunk.choices[0]?.finish_reason),
      ["stop"],
    );
    const usage = chunks.at(-1);
    assert.deepEqual(usage?.choices, []);
    assert.equal(usage?.usage?.completion_tokens, 13);
    assert.ok(chunks.slice(0, -1).every((chunk) => chunk.usage === undefined || chunk.usage === null));
  });

  it("sends the usage so far on every chunk under continuous_usage_stats, and no usage chunk without include_usage", async () => {
    const continuous = await fake.app.inject({
      method: "POST",
      url: "/v1/completions",
      payload: {
        prompt: "ab",
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      },
    });
    const chunks = (await readEvents([continuous.rawPayload]))
      .slice(0, -1)
      .map((data) => JSON.parse(data) as CompletionResponse);
    assert.deepEqual(
      chunks.map((chunk) => [
        chunk.choices.length,
        chunk.usage?.prompt_tokens,
        chunk.usage?.completion_tokens,
      ]),
      [
        [1, 2, 1],
        [1, 2, 2],
        [1, 2, 3],
        [1, 2, 3],
        [0, 2, 3],
      ],
    );
    const without = await fake.app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: { ...chatBody, max_tokens: 2, stream: true, stream_options: { include_usage: false } },
    });
    const events = await readEvents([without.rawPayload]);
    assert.ok(events.slice(0, -1).every((data) => !("usage" in JSON.parse(data))));
  });

  it("frames a stream so that a client reads the same events wherever the bytes are split", async () => {
    const response = await fake.app.inject({
      method: "POST",
      url: "/v1/completions",
      payload: { prompt: "é ✓", max_tokens: 6, stream: true, stream_options: { include_usage: true } },
    });
    assertOpenAiFraming(response.payload);
    const bytes = response.rawPayload;
    const whole = await readEvents([bytes]);
    assert.ok(whole.length >= 4);
    for (let at = 1; at < bytes.length; at++) {
      assert.deepEqual(
        await readEvents([bytes.subarray(0, at), bytes.subarray(at)]),
        whole,
        `split at ${at}`,
      );
    }
    const oneByOne = Array.from(bytes, (byte) => Uint8Array.of(byte));
    assert.deepEqual(await readEvents(oneByOne), whole);
  });

  it("ends a stream that fails after it started with the error event, then [DONE]", async () => {
    await withFakeApp({ failAfter: { tokens: 3, error: new Error("boom") } }, async (failing) => {
      const response = await failing.inject({
        method: "POST",
        url: "/v1/chat/completions",
        payload: { ...chatBody, stream: true },
      });
      assert.equal(response.statusCode, 200);
      assertOpenAiFraming(response.payload);
      const events = await readEvents([response.rawPayload]);
      assert.equal(events.at(-1), "[DONE]");
      const error = JSON.parse(events.at(-2) as string) as ErrorBody;
      const expected = internalError();
      assert.equal(error.object, "error");
      assert.equal(error.code, expected.status);
      assert.deepEqual(error.error, {
        message: expected.message,
        type: expected.type,
        param: null,
        code: expected.code,
      });
      const text = events
        .slice(0, -2)
        .map((data) => (JSON.parse(data) as ChatCompletionChunk).choices[0]?.delta.content ?? "")
        .join("");
      assert.equal(text, "Hel");
    });
  });

  it("refuses a request's own chat_template unless the served model's chat settings trust it", async () => {
    const payload = { ...chatBody, chat_template: "{{ messages[0].content }}!" };
    const refused = await fake.app.inject({ method: "POST", url: "/v1/chat/completions", payload });
    assert.equal(refused.statusCode, 400);
    assert.equal((refused.json() as ErrorBody).error.param, "chat_template");
    const context = fakeContext();
    const trusting = new FakeEngine({ names: ["trusting"] });
    context.registry.add(trusting, { chat: { template: null, trustRequestTemplate: true } });
    await withFakeApp(context, async (open) => {
      const response = await open.inject({
        method: "POST",
        url: "/v1/chat/completions",
        payload: { ...payload, model: "trusting" },
      });
      assert.equal(response.statusCode, 200);
      assert.equal(fakeDetokenize(trusting.submitted[0]?.promptTokens ?? []), "Hi!");
    });
  });

  it("answers 503 as plain JSON, before any stream opens, when the engine's queue is full", async () => {
    await withFakeApp({ full: true }, async (full) => {
      const response = await full.inject({
        method: "POST",
        url: "/v1/chat/completions",
        payload: { ...chatBody, stream: true },
      });
      assert.equal(response.statusCode, 503);
      assert.match(String(response.headers["content-type"]), /^application\/json/);
      assert.ok(response.headers["retry-after"]);
      assert.equal((response.json() as ErrorBody).code, 503);
    });
  });
});

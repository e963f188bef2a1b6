/**
 * POST /v1/messages (Anthropic Messages) and /v1/messages/count_tokens in-process on the fake engine:
 * the message shape and its stop reasons, the streamed events in Anthropic's order (each `event:` line
 * naming its `type`, no `[DONE]`), and errors in Anthropic's shape (`{type: "error", error: {type, message}}`).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { injectedEvents, useFakeApp } from "../helpers/fakeApp.ts";
import { fakeDetokenize } from "../helpers/fakeEngine.ts";

type Message = {
  id: string;
  type: string;
  role: string;
  model: string;
  content: { type: string; text: string }[];
  stop_reason: string | null;
  stop_sequence: string | null;
  usage: { input_tokens: number; output_tokens: number };
};
type AnthropicError = { type: string; error: { type: string; message: string } };
type StreamEvent = {
  type: string;
  index?: number;
  message?: Message;
  delta?: { type?: string; text?: string; stop_reason?: string };
  usage?: { output_tokens: number };
};

const body = { model: "fake-model", max_tokens: 64, messages: [{ role: "user", content: "Hi" }] };

/** Asserts Anthropic's error shape with `type`, and returns its message. */
function anthropicError(payload: unknown, type: string): string {
  const error = payload as AnthropicError;
  assert.equal(error.type, "error");
  assert.equal(error.error.type, type);
  assert.deepEqual(Object.keys(error).sort(), ["error", "type"]);
  assert.equal(typeof error.error.message, "string");
  return error.error.message;
}

describe("POST /v1/messages (in-process, fake engine)", () => {
  const fake = useFakeApp();

  it("answers an Anthropic message: one text block, end_turn, the usage", async () => {
    const response = await fake.post("/v1/messages", { ...body, system: "Be brief." });
    assert.equal(response.statusCode, 200);
    const message = response.json() as Message;
    assert.match(message.id, /^msg_/);
    assert.equal(message.type, "message");
    assert.equal(message.role, "assistant");
    assert.equal(message.model, "fake-model");
    assert.deepEqual(message.content, [{ type: "text", text: "Hello, world!" }]);
    assert.equal(message.stop_reason, "end_turn");
    assert.equal(message.stop_sequence, null);
    const prompt = fake.engine.submitted.at(-1)?.promptTokens ?? [];
    assert.match(fakeDetokenize(prompt), /Be brief\.[\s\S]*Hi/);
    assert.equal(message.usage.input_tokens, prompt.length);
    assert.equal(message.usage.output_tokens, 13);
  });

  it("stops with max_tokens and with stop_sequence, naming the sequence", async () => {
    const cut = (await fake.post("/v1/messages", { ...body, max_tokens: 5 })).json() as Message;
    assert.equal(cut.stop_reason, "max_tokens");
    assert.equal(cut.content[0]?.text, "Hello");
    const stopped = (
      await fake.post("/v1/messages", { ...body, stop_sequences: ["world"] })
    ).json() as Message;
    assert.equal(stopped.stop_reason, "stop_sequence");
    assert.equal(stopped.stop_sequence, "world");
    assert.equal(stopped.content[0]?.text, "Hello, ");
  });

  it("streams message_start, one text block's start / deltas / stop, message_delta, message_stop", async () => {
    const response = await fake.post("/v1/messages", { ...body, max_tokens: 5, stream: true });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers["content-type"]), /^text\/event-stream/);
    assert.ok(!response.payload.includes("[DONE]"));
    const events = await injectedEvents(response);
    const data = events.map((event) => JSON.parse(event.data) as StreamEvent);
    assert.deepEqual(
      events.map((event) => event.event),
      data.map((event) => event.type),
    );
    assert.deepEqual(
      data.map((event) => event.type),
      [
        "message_start",
        "content_block_start",
        ...Array<string>(5).fill("content_block_delta"),
        "content_block_stop",
        "message_delta",
        "message_stop",
      ],
    );
    const start = data[0]?.message;
    assert.deepEqual(start?.content, []);
    assert.equal(start?.stop_reason, null);
    assert.equal(start?.usage.input_tokens, fake.engine.submitted.at(-1)?.promptTokens.length);
    const text = data
      .filter((event) => event.type === "content_block_delta")
      .map((event) => {
        assert.equal(event.index, 0);
        assert.equal(event.delta?.type, "text_delta");
        return event.delta?.text;
      })
      .join("");
    assert.equal(text, "Hello");
    const final = data.at(-2);
    assert.equal(final?.delta?.stop_reason, "max_tokens");
    assert.equal(final?.usage?.output_tokens, 5);
  });

  it("answers the errors in Anthropic's shape: a missing max_tokens, a value out of range, an unknown model", async () => {
    const { max_tokens: _, ...withoutMax } = body;
    const missing = await fake.post("/v1/messages", withoutMax);
    assert.equal(missing.statusCode, 400, "Anthropic answers a missing field with 400, not FastAPI's 422");
    assert.match(anthropicError(missing.json(), "invalid_request_error"), /max_tokens/);
    // Anthropic's temperature is 0..1.
    const hot = await fake.post("/v1/messages", { ...body, temperature: 1.5 });
    assert.equal(hot.statusCode, 400);
    assert.match(anthropicError(hot.json(), "invalid_request_error"), /temperature/);
    const unknown = await fake.post("/v1/messages", { ...body, model: "nope" });
    assert.equal(unknown.statusCode, 404);
    assert.match(anthropicError(unknown.json(), "not_found_error"), /fake-model/);
  });

  it("counts the prompt's tokens at /v1/messages/count_tokens as the generation would see them", async () => {
    const { max_tokens: _, ...countBody } = body;
    const response = await fake.post("/v1/messages/count_tokens", countBody);
    assert.equal(response.statusCode, 200);
    const counted = (response.json() as { input_tokens: number }).input_tokens;
    await fake.post("/v1/messages", body);
    assert.equal(counted, fake.engine.submitted.at(-1)?.promptTokens.length);
    assert.ok(counted > "Hi".length);
  });
});

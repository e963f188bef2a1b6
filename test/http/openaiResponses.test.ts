/**
 * POST /v1/responses in-process on the fake engine: the whole response object, the streamed
 * `response.*` events in OpenAI's order (each `event:` line naming its `type`, sequence numbers from 0,
 * no `[DONE]`), and the 400 / 422 answers for what the stateless server refuses.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { injectedEvents, useFakeApp } from "../helpers/fakeApp.ts";
import { fakeDetokenize } from "../helpers/fakeEngine.ts";

type OutputText = { type: string; text: string };
type ResponseObject = {
  object: string;
  status: string;
  model: string;
  incomplete_details: { reason: string } | null;
  max_output_tokens: number | null;
  output: { type: string; role: string; status: string; content: OutputText[] }[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number } | null;
};
type StreamEvent = { type: string; sequence_number: number; delta?: string; response?: ResponseObject };

describe("POST /v1/responses (in-process, fake engine)", () => {
  const fake = useFakeApp();

  it("answers a response object holding the engine's text as one output_text, with its usage", async () => {
    const response = await fake.post("/v1/responses", {
      model: "fake-model",
      instructions: "Be brief.",
      input: "Hi",
    });
    assert.equal(response.statusCode, 200);
    const body = response.json() as ResponseObject;
    assert.equal(body.object, "response");
    assert.equal(body.status, "completed");
    assert.equal(body.model, "fake-model");
    assert.equal(body.output.length, 1);
    assert.equal(body.output[0]?.type, "message");
    assert.equal(body.output[0]?.role, "assistant");
    assert.deepEqual(
      body.output[0]?.content.map((part) => [part.type, part.text]),
      [["output_text", "Hello, world!"]],
    );
    const prompt = fake.engine.submitted.at(-1)?.promptTokens ?? [];
    assert.match(fakeDetokenize(prompt), /Be brief\.[\s\S]*Hi/);
    assert.deepEqual(body.usage && [body.usage.input_tokens, body.usage.output_tokens], [prompt.length, 13]);
    assert.equal(body.usage?.total_tokens, prompt.length + 13);
  });

  it("is incomplete with reason max_output_tokens when max_output_tokens cuts the text", async () => {
    const response = await fake.post("/v1/responses", { input: "Hi", max_output_tokens: 5 });
    assert.equal(response.statusCode, 200);
    const body = response.json() as ResponseObject;
    assert.equal(body.status, "incomplete");
    assert.deepEqual(body.incomplete_details, { reason: "max_output_tokens" });
    assert.equal(body.max_output_tokens, 5);
    assert.equal(body.output[0]?.content[0]?.text, "Hello");
    assert.equal(fake.engine.submitted.at(-1)?.maxTokens, 5);
  });

  it("streams created, in_progress, the item and part, the deltas, their done events, then completed", async () => {
    const response = await fake.post("/v1/responses", { input: "Hi", stream: true });
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
      data.map((event) => event.sequence_number),
      data.map((_, index) => index),
    );
    const deltas = data.filter((event) => event.type === "response.output_text.delta");
    assert.equal(deltas.map((event) => event.delta).join(""), "Hello, world!");
    // The order with the deltas folded into one entry.
    const order = data
      .map((event) => event.type)
      .filter((type, index, all) => type !== "response.output_text.delta" || all[index - 1] !== type);
    assert.deepEqual(order, [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const first = data[0]?.response;
    assert.equal(first?.status, "in_progress");
    assert.deepEqual(first?.output, []);
    const last = data.at(-1)?.response;
    assert.equal(last?.status, "completed");
    assert.equal(last?.output[0]?.content[0]?.text, "Hello, world!");
    assert.equal(last?.usage?.output_tokens, 13);
  });

  it("ends a stream cut by max_output_tokens with response.incomplete", async () => {
    const response = await fake.post("/v1/responses", { input: "Hi", stream: true, max_output_tokens: 3 });
    const data = (await injectedEvents(response)).map((event) => JSON.parse(event.data) as StreamEvent);
    const last = data.at(-1);
    assert.equal(last?.type, "response.incomplete");
    assert.equal(last?.response?.incomplete_details?.reason, "max_output_tokens");
    assert.equal(last?.response?.output[0]?.content[0]?.text, "Hel");
  });

  it("400 naming the field for what a stateless server refuses: store and previous_response_id", async () => {
    for (const [field, value] of [
      ["store", true],
      ["previous_response_id", "resp_123"],
    ] as const) {
      const submitted = fake.engine.submitted.length;
      const response = await fake.post("/v1/responses", { input: "Hi", [field]: value });
      assert.equal(response.statusCode, 400, field);
      const body = response.json() as ErrorBody;
      assert.equal(body.error.param, field);
      assert.equal(body.error.type, "invalid_request_error");
      assert.equal(body.error.code, "unsupported_field");
      assert.equal(fake.engine.submitted.length, submitted, `${field} reached the engine`);
    }
  });

  it("422 with FastAPI's detail for an input of the wrong type, 404 for an unknown model", async () => {
    const wrongType = await fake.post("/v1/responses", { input: 3 });
    assert.equal(wrongType.statusCode, 422);
    assert.deepEqual((wrongType.json() as ErrorBody).detail?.[0]?.loc, ["body", "input"]);
    const unknown = await fake.post("/v1/responses", { model: "nope", input: "Hi" });
    assert.equal(unknown.statusCode, 404);
    assert.equal((unknown.json() as ErrorBody).error.code, "model_not_found");
  });
});

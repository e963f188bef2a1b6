// Client compatibility: the official `@anthropic-ai/sdk` npm client against POST /v1/messages and
// /v1/messages/count_tokens, by base URL and key only (`x-api-key`), on stories260K: text, streaming
// (events and the MessageStream helper), tool_use / tool_result, stop sequences, output_config.format,
// count_tokens, and errors raised as the SDK's typed errors (Anthropic's error shape).
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";
import { FORCED_MAX_TOKENS, weatherArgsJsonSchema, weatherArgsSchema, weatherTool } from "./shared.ts";

const weather: Anthropic.Tool = {
  ...weatherTool,
  input_schema: weatherArgsJsonSchema,
};

/** Greedy sampling (a spread: this SDK version's types no longer list `temperature`; the API still takes it). */
const greedy = { temperature: 0 };

describe("@anthropic-ai/sdk: Messages API", () => {
  let client: Anthropic;
  const server = useTestServer(["--api-key", "sk-ant-test"]);
  before(async () => {
    client = new Anthropic({ baseURL: server.url, apiKey: "sk-ant-test", maxRetries: 0 });
  });

  const story = {
    model: TEST_MODEL,
    system: "You tell stories.",
    messages: [{ role: "user" as const, content: "Once upon a time" }],
    temperature: 0,
  };

  it("messages.create: text content, stop_reason max_tokens and usage", async () => {
    const message = await client.messages.create({ ...story, max_tokens: 8 });
    assert.equal(message.type, "message");
    assert.equal(message.role, "assistant");
    assert.match(message.id, /^msg_/);
    const [block] = message.content;
    assert.ok(block?.type === "text" && block.text.length > 0, JSON.stringify(message.content));
    assert.equal(message.stop_reason, "max_tokens");
    assert.equal(message.usage.output_tokens, 8);
    assert.ok(message.usage.input_tokens > 0);
  });

  it("streaming: Anthropic's event sequence, and MessageStream's text and finalMessage() equal the non-streamed", async () => {
    const plain = await client.messages.create({ ...story, max_tokens: 12 });
    const types: string[] = [];
    let text = "";
    for await (const event of await client.messages.create({ ...story, max_tokens: 12, stream: true })) {
      types.push(event.type);
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
      if (event.type === "message_delta") {
        assert.equal(event.delta.stop_reason, "max_tokens");
        assert.equal(event.usage.output_tokens, 12);
      }
    }
    const distinct = types.filter((type, index) => type !== types[index - 1]);
    assert.deepEqual(distinct, [
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const first = plain.content[0];
    assert.equal(text, first?.type === "text" ? first.text : undefined);
    const stream = client.messages.stream({ ...story, max_tokens: 12 });
    let streamed = "";
    stream.on("text", (delta) => {
      streamed += delta;
    });
    const final = await stream.finalMessage();
    assert.equal(streamed, text);
    assert.deepEqual(final.content, plain.content);
    assert.equal(final.stop_reason, "max_tokens");
  });

  it("stop_sequences: stop_reason stop_sequence naming it", async () => {
    const message = await client.messages.create({
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Once upon a time" }],
      max_tokens: 100,
      ...greedy,
      stop_sequences: ["Lily", "Tom", "the", "a"],
    });
    assert.equal(message.stop_reason, "stop_sequence");
    assert.ok(["Lily", "Tom", "the", "a"].includes(message.stop_sequence ?? ""), message.stop_sequence ?? "");
  });

  it("tool_choice any: a tool_use block whose input validates, streamed too; the tool_result goes back", async () => {
    const body = {
      model: TEST_MODEL,
      messages: [{ role: "user" as const, content: "What is the weather in Paris?" }],
      tools: [weather],
      tool_choice: { type: "any" as const },
      max_tokens: FORCED_MAX_TOKENS,
      temperature: 0,
    };
    const message = await client.messages.create(body);
    assert.equal(message.stop_reason, "tool_use");
    const use = message.content.find((block) => block.type === "tool_use");
    assert.ok(use?.type === "tool_use", JSON.stringify(message.content));
    assert.equal(use.name, "get_weather");
    assert.ok(weatherArgsSchema.safeParse(use.input).success, JSON.stringify(use.input));

    const final = await client.messages.stream(body).finalMessage();
    const streamed = final.content.find((block) => block.type === "tool_use");
    assert.ok(streamed?.type === "tool_use");
    assert.deepEqual(streamed.input, use.input);
    assert.equal(final.stop_reason, "tool_use");

    const answer = await client.messages.create({
      model: TEST_MODEL,
      messages: [
        body.messages[0] as Anthropic.MessageParam,
        { role: "assistant", content: message.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "21 degrees" }] },
      ],
      tools: [weather],
      max_tokens: 8,
      ...greedy,
    });
    assert.equal(answer.type, "message");
  });

  it("output_config.format: the text is JSON that validates against the schema", async () => {
    const message = await client.messages.create({
      ...story,
      max_tokens: FORCED_MAX_TOKENS,
      output_config: { format: { type: "json_schema", schema: weatherArgsJsonSchema } },
    });
    const [block] = message.content;
    assert.ok(block?.type === "text", JSON.stringify(message.content));
    weatherArgsSchema.parse(JSON.parse(block.text));
    assert.equal(message.stop_reason, "end_turn");
  });

  it("count_tokens counts the prompt as messages.create renders it", async () => {
    const counted = await client.messages.countTokens({
      model: TEST_MODEL,
      system: story.system,
      messages: story.messages,
    });
    const message = await client.messages.create({ ...story, max_tokens: 1 });
    assert.equal(counted.input_tokens, message.usage.input_tokens);
  });

  it("errors are Anthropic's shape and the SDK's typed errors; a Bearer token works as well as x-api-key", async () => {
    await assert.rejects(
      new Anthropic({ baseURL: server.url, apiKey: "wrong", maxRetries: 0 }).messages.create({
        ...story,
        max_tokens: 4,
      }),
      Anthropic.AuthenticationError,
    );
    await assert.rejects(
      client.messages.create({ ...story, model: "nope", max_tokens: 4 }),
      Anthropic.NotFoundError,
    );
    await assert.rejects(
      // stories260K's template has no thinking block: thinking is refused.
      client.messages.create({ ...story, max_tokens: 4, thinking: { type: "adaptive" } }),
      (error: unknown) => {
        assert.ok(error instanceof Anthropic.BadRequestError);
        assert.deepEqual(Object.keys(error.error as object).sort(), ["error", "type"]);
        assert.equal((error.error as { error: { type: string } }).error.type, "invalid_request_error");
        assert.match(error.message, /does not support thinking/);
        return true;
      },
    );
    const bearer = await fetch(`${server.url}/v1/messages`, {
      method: "POST",
      headers: { authorization: "Bearer sk-ant-test", "content-type": "application/json" },
      body: JSON.stringify({ ...story, max_tokens: 2 }),
    });
    assert.equal(bearer.status, 200);
    const missing = await fetch(`${server.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": "sk-ant-test", "content-type": "application/json" },
      body: JSON.stringify({ messages: story.messages }),
    });
    assert.equal(missing.status, 400);
    const body = (await missing.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, "error");
    assert.equal(body.error.type, "invalid_request_error");
  });
});

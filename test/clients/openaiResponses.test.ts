// Client compatibility: the official `openai` npm client's Responses API (`client.responses.create`,
// `client.responses.stream`) against POST /v1/responses, by base URL and key only, on stories260K.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import OpenAI from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";
import {
  characterSchema,
  FORCED_MAX_TOKENS,
  weatherArgsJsonSchema,
  weatherArgsSchema,
  weatherTool,
} from "./shared.ts";

const weatherFunction: OpenAI.Responses.FunctionTool = {
  type: "function",
  ...weatherTool,
  parameters: weatherArgsJsonSchema,
  strict: true,
};

/** OpenAI's documented order of a text response's events. */
const TEXT_EVENTS = [
  "response.created",
  "response.in_progress",
  "response.output_item.added",
  "response.content_part.added",
  "response.output_text.delta",
  "response.output_text.done",
  "response.content_part.done",
  "response.output_item.done",
];

describe("openai client: Responses API", () => {
  let client: OpenAI;
  const server = useTestServer();
  before(async () => {
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "sk-test", maxRetries: 0 });
  });

  it("responses.create: a string input gives a completed message, output_text and usage", async () => {
    const response = await client.responses.create({
      model: TEST_MODEL,
      input: "Once upon a time",
      instructions: "You tell stories.",
      max_output_tokens: 200,
      temperature: 0,
    });
    assert.equal(response.object, "response");
    assert.match(response.id, /^resp_/);
    assert.ok(["completed", "incomplete"].includes(response.status ?? ""));
    const [item] = response.output;
    assert.equal(item?.type, "message");
    assert.ok(response.output_text.length > 0);
    assert.ok((response.usage?.input_tokens ?? 0) > 0);
    assert.equal(
      response.usage?.total_tokens,
      (response.usage?.input_tokens ?? 0) + (response.usage?.output_tokens ?? 0),
    );
    assert.equal(response.instructions, "You tell stories.");
  });

  it("max_output_tokens cuts the response: status incomplete, reason max_output_tokens", async () => {
    const response = await client.responses.create({
      model: TEST_MODEL,
      input: [{ role: "user", content: [{ type: "input_text", text: "Once upon a time" }] }],
      max_output_tokens: 3,
      temperature: 0,
    });
    assert.equal(response.status, "incomplete");
    assert.equal(response.incomplete_details?.reason, "max_output_tokens");
    assert.equal(response.usage?.output_tokens, 3);
  });

  it("stream: true gives OpenAI's event order with rising sequence numbers, the text equal to the non-streamed", async () => {
    const body = { model: TEST_MODEL, input: "Once upon a time", max_output_tokens: 12, temperature: 0 };
    const plain = await client.responses.create(body);
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create({ ...body, stream: true })) events.push(event);
    const types = events.map((event) => event.type);
    const distinct = types.filter((type, index) => type !== types[index - 1]);
    assert.deepEqual(distinct, [...TEXT_EVENTS, "response.incomplete"]);
    events.forEach((event, index) => {
      assert.equal(event.sequence_number, index);
    });
    const text = events
      .flatMap((event) => (event.type === "response.output_text.delta" ? [event.delta] : []))
      .join("");
    assert.equal(text, plain.output_text);
    const last = events.at(-1);
    assert.ok(last?.type === "response.incomplete");
    assert.equal(last.response.usage?.output_tokens, 12);
  });

  it("responses.stream: text deltas and finalResponse() work unchanged", async () => {
    const stream = client.responses.stream({
      model: TEST_MODEL,
      input: "Once upon a time",
      max_output_tokens: 16,
      temperature: 0,
    });
    let text = "";
    stream.on("response.output_text.delta", (event) => {
      text += event.delta;
    });
    const final = await stream.finalResponse();
    assert.equal(final.output_text, text);
    assert.ok(text.length > 0);
  });

  it("text.format json_schema (zodTextFormat) with responses.parse gives a parsed object", async () => {
    const response = await client.responses.parse({
      model: TEST_MODEL,
      input: "Describe a character.",
      text: { format: zodTextFormat(characterSchema, "character") },
      max_output_tokens: FORCED_MAX_TOKENS,
      temperature: 0,
    });
    assert.equal(response.status, "completed");
    assert.ok(characterSchema.safeParse(response.output_parsed).success, response.output_text);
  });

  it("a forced function tool gives a function_call item, streamed too; its output goes back as input", async () => {
    const body = {
      model: TEST_MODEL,
      input: "What is the weather in Paris?",
      tools: [weatherFunction],
      tool_choice: "required" as const,
      max_output_tokens: FORCED_MAX_TOKENS,
      temperature: 0,
    };
    const response = await client.responses.create(body);
    const call = response.output.find((item) => item.type === "function_call");
    assert.ok(call?.type === "function_call", JSON.stringify(response.output));
    assert.equal(call.name, "get_weather");
    assert.ok(weatherArgsSchema.safeParse(JSON.parse(call.arguments)).success, call.arguments);
    assert.equal(response.status, "completed");

    const stream = client.responses.stream(body);
    let args = "";
    stream.on("response.function_call_arguments.delta", (event) => {
      args += event.delta;
    });
    const final = await stream.finalResponse();
    const streamed = final.output.find((item) => item.type === "function_call");
    assert.ok(streamed?.type === "function_call");
    assert.equal(streamed.arguments, call.arguments);
    assert.equal(args, call.arguments);

    const followUpBody = {
      model: TEST_MODEL,
      input: [
        { role: "user" as const, content: "What is the weather in Paris?" },
        call,
        { type: "function_call_output" as const, call_id: call.call_id, output: '{"temperature": 21}' },
      ],
      max_output_tokens: 8,
      temperature: 0,
    };
    // Under tool_choice "auto", strict: true needs the family's tool-call marker; this model has none.
    await assert.rejects(
      client.responses.create({ ...followUpBody, tools: [weatherFunction] }),
      (error: unknown) => {
        assert.ok(error instanceof OpenAI.BadRequestError, String(error));
        assert.match(error.message, /strict: true under tool_choice "auto"/);
        return true;
      },
    );
    const followUp = await client.responses.create({
      ...followUpBody,
      tools: [{ ...weatherFunction, strict: false }],
    });
    assert.ok(followUp.output.length > 0);
  });

  it("previous_response_id, store: true and non-function tools are a 400 BadRequestError naming the field", async () => {
    for (const [extra, param] of [
      [{ previous_response_id: "resp_123" }, "previous_response_id"],
      [{ store: true }, "store"],
      [{ tools: [{ type: "web_search" }] }, "tools[0].type"],
    ] as const) {
      await assert.rejects(
        client.responses.create({ model: TEST_MODEL, input: "Hi", ...(extra as object) }),
        (error: unknown) => {
          assert.ok(error instanceof OpenAI.BadRequestError, String(error));
          assert.equal((error.error as { param?: string }).param, param);
          assert.match(error.message, /not supported/);
          return true;
        },
      );
    }
    const unknown = await server.post("/v1/responses", { model: "nope", input: "Hi" });
    assert.equal(unknown.status, 404);
  });
});

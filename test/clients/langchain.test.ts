// Client compatibility: LangChain's `ChatOpenAI` (`@langchain/openai` 1.2), pointed at lmserve by
// `configuration.baseURL` and `apiKey` only, on stories260K. Tests of features still being built carry
// node:test's `todo` with the reason; whoever ships the feature removes the `todo`.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AIMessageChunk, UsageMetadata } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { NotFoundError } from "openai";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";
import { characterSchema, FORCED_MAX_TOKENS, weatherArgsSchema, weatherTool } from "./shared.ts";

const prompt = "Tell me about a girl and her dog.";

/** A message's usage: LangChain's types resolve `usage_metadata` to never under exactOptionalPropertyTypes. */
function usageOf(message: { usage_metadata?: unknown }): UsageMetadata | undefined {
  return message.usage_metadata as UsageMetadata | undefined;
}

describe("LangChain ChatOpenAI against lmserve", () => {
  const server = useTestServer();

  /** A chat model that knows only the server's base URL and a key. */
  function chat(maxTokens: number): ChatOpenAI {
    return new ChatOpenAI({
      model: TEST_MODEL,
      apiKey: "sk-test",
      configuration: { baseURL: `${server.url}/v1` },
      temperature: 0,
      maxTokens,
      maxRetries: 0,
    });
  }

  it("invoke returns the message, finish reason and usage", async () => {
    const message = await chat(16).invoke(prompt);
    assert.ok(typeof message.content === "string" && message.content.length > 0);
    assert.equal(message.response_metadata.finish_reason, "length");
    assert.equal(message.response_metadata.model_name, TEST_MODEL);
    assert.equal(usageOf(message)?.output_tokens, 16);
    assert.ok((usageOf(message)?.input_tokens ?? 0) > 0);
    assert.equal(usageOf(message)?.total_tokens, (usageOf(message)?.input_tokens ?? 0) + 16);
  });

  it("stream yields chunks that concatenate to the invoked message, with usage", async () => {
    const expected = await chat(16).invoke(prompt);
    const chunks: AIMessageChunk[] = [];
    for await (const chunk of await chat(16).stream(prompt)) chunks.push(chunk);
    assert.ok(chunks.length > 2, `${chunks.length} chunks`);
    const text = chunks.map((chunk) => (typeof chunk.content === "string" ? chunk.content : "")).join("");
    assert.equal(text, expected.content);
    const withUsage = chunks.find((chunk) => chunk.usage_metadata !== undefined);
    const usage = withUsage && usageOf(withUsage);
    assert.equal(usage?.output_tokens, usageOf(expected)?.output_tokens);
    assert.equal(usage?.input_tokens, usageOf(expected)?.input_tokens);
  });

  it("an unknown model is the openai SDK's NotFoundError carrying our message", async () => {
    const model = new ChatOpenAI({
      model: "no-such-model",
      apiKey: "sk-test",
      configuration: { baseURL: `${server.url}/v1` },
      maxRetries: 0,
    });
    let caught: unknown;
    try {
      await model.invoke(prompt);
    } catch (error) {
      caught = error;
    }
    assert.ok(caught instanceof NotFoundError, String(caught));
    assert.equal(caught.status, 404);
    assert.equal(caught.code, "model_not_found");
    assert.ok(
      caught.message.startsWith(
        `404 The model \`no-such-model\` does not exist. Available models: ${TEST_MODEL}.`,
      ),
      caught.message,
    );
  });

  it("withStructuredOutput(zod schema) returns an object that validates", async () => {
    const structured = chat(FORCED_MAX_TOKENS).withStructuredOutput(characterSchema, { name: "character" });
    const object = await structured.invoke("Describe a story character.");
    assert.deepEqual(characterSchema.parse(object), object);
  });

  it("bindTools with tool_choice 'required' gives a tool call whose args match the schema", async () => {
    const getWeather = tool(async ({ city, unit }) => `It is sunny in ${city} (${unit}).`, {
      ...weatherTool,
      schema: weatherArgsSchema,
    });
    const model = chat(FORCED_MAX_TOKENS).bindTools([getWeather], {
      tool_choice: "required",
      parallel_tool_calls: false,
    });
    const message = await model.invoke("What is the weather in Paris?");
    assert.equal(message.response_metadata.finish_reason, "tool_calls");
    assert.deepEqual(message.invalid_tool_calls ?? [], []);
    assert.equal(message.tool_calls?.length, 1);
    const call = message.tool_calls?.[0];
    assert.equal(call?.name, weatherTool.name);
    assert.match(call?.id ?? "", /\S/);
    const args = weatherArgsSchema.parse(call?.args);
    // The call round-trips through the tool itself.
    assert.equal(await getWeather.invoke(args), `It is sunny in ${args.city} (${args.unit}).`);
  });
});

// Client compatibility: the Vercel AI SDK (`ai` 6 with `@ai-sdk/openai-compatible` 2), pointed at
// lmserve by base URL and key only, on stories260K. Two documented provider settings are used where the
// feature needs them, as with any OpenAI-compatible server: `includeUsage: true` (the provider then
// sends `stream_options.include_usage`, without which OpenAI too streams no usage) and
// `supportsStructuredOutputs: true` (the provider then sends the zod schema as `response_format`
// json_schema instead of bare JSON mode). Tests of features still being built carry node:test's
// `todo` with the reason; whoever ships the feature removes the `todo`.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { APICallError, generateObject, generateText, streamObject, streamText, type ToolSet, tool } from "ai";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";
import { characterSchema, FORCED_MAX_TOKENS, weatherArgsSchema, weatherTool } from "./shared.ts";

const prompt = "Tell me about a girl and her dog.";

describe("Vercel AI SDK (openai-compatible provider) against lmserve", () => {
  let baseURL: string;
  const server = useTestServer();
  before(async () => {
    baseURL = `${server.url}/v1`;
  });

  /** The provider as its docs configure it for an OpenAI-compatible server, plus `extra` settings. */
  function provider(extra: { includeUsage?: boolean; supportsStructuredOutputs?: boolean } = {}) {
    return createOpenAICompatible({ name: "lmserve", baseURL, apiKey: "sk-test", ...extra });
  }

  // The AI SDK's Tool type is not assignable to its own ToolSet under exactOptionalPropertyTypes.
  const weather = {
    [weatherTool.name]: tool({ description: weatherTool.description, inputSchema: weatherArgsSchema }),
  } as unknown as ToolSet;

  it("generateText returns the text, finish reason and usage", async () => {
    const result = await generateText({
      model: provider()(TEST_MODEL),
      prompt,
      maxOutputTokens: 16,
      temperature: 0,
    });
    assert.ok(result.text.length > 0);
    assert.equal(result.finishReason, "length");
    assert.equal(result.usage.outputTokens, 16);
    assert.ok((result.usage.inputTokens ?? 0) > 0);
    assert.equal(result.usage.totalTokens, (result.usage.inputTokens ?? 0) + 16);
    assert.equal(result.response.modelId, TEST_MODEL);
    assert.deepEqual(result.warnings, []);
  });

  it("streamText streams the same text as generateText, and its usage with includeUsage", async () => {
    const request = { prompt, maxOutputTokens: 16, temperature: 0 };
    const expected = await generateText({ model: provider()(TEST_MODEL), ...request });
    const errors: unknown[] = [];
    const result = streamText({
      model: provider({ includeUsage: true })(TEST_MODEL),
      ...request,
      onError: ({ error }) => {
        errors.push(error);
      },
    });
    const parts: string[] = [];
    for await (const part of result.textStream) parts.push(part);
    assert.deepEqual(errors, []);
    assert.ok(parts.length > 1, "text arrives in several parts");
    assert.equal(parts.join(""), expected.text);
    assert.equal(await result.text, expected.text);
    assert.equal(await result.finishReason, "length");
    const usage = await result.usage;
    assert.equal(usage.outputTokens, expected.usage.outputTokens);
    assert.equal(usage.inputTokens, expected.usage.inputTokens);
    assert.equal(usage.totalTokens, expected.usage.totalTokens);
  });

  it("an unknown model is an APICallError carrying our status and message", async () => {
    let caught: unknown;
    try {
      await generateText({ model: provider()("no-such-model"), prompt, maxRetries: 0 });
    } catch (error) {
      caught = error;
    }
    assert.ok(APICallError.isInstance(caught), String(caught));
    assert.equal(caught.statusCode, 404);
    assert.equal(
      caught.message,
      `The model \`no-such-model\` does not exist. Available models: ${TEST_MODEL}.`,
    );
    assert.equal(caught.isRetryable, false);
  });

  it("generateObject returns an object that validates against the zod schema", async () => {
    const result = await generateObject({
      model: provider({ supportsStructuredOutputs: true })(TEST_MODEL),
      schema: characterSchema,
      schemaName: "character",
      prompt: "Describe a story character.",
      maxOutputTokens: FORCED_MAX_TOKENS,
      temperature: 0,
    });
    assert.equal(result.finishReason, "stop");
    assert.deepEqual(characterSchema.parse(result.object), result.object);
  });

  it("streamObject streams partial objects and ends with one that validates", async () => {
    const errors: unknown[] = [];
    const result = streamObject({
      model: provider({ supportsStructuredOutputs: true })(TEST_MODEL),
      schema: characterSchema,
      schemaName: "character",
      prompt: "Describe a story character.",
      maxOutputTokens: FORCED_MAX_TOKENS,
      temperature: 0,
      onError: ({ error }) => {
        errors.push(error);
      },
    });
    const partials: unknown[] = [];
    for await (const partial of result.partialObjectStream) partials.push(partial);
    assert.deepEqual(errors, []);
    assert.ok(partials.length > 1, "several partial objects");
    const object = await result.object;
    assert.deepEqual(characterSchema.parse(object), object);
    assert.deepEqual(partials.at(-1), object);
  });

  it("generateText with a tool and toolChoice 'required' returns calls that match the tool's schema", async () => {
    const result = await generateText({
      model: provider()(TEST_MODEL),
      prompt: "What is the weather in Paris?",
      tools: weather,
      toolChoice: "required",
      maxOutputTokens: FORCED_MAX_TOKENS,
      temperature: 0,
    });
    assert.equal(result.finishReason, "tool-calls");
    assert.ok(result.toolCalls.length >= 1);
    for (const call of result.toolCalls) {
      assert.equal(call.toolName, weatherTool.name);
      assert.match(call.toolCallId, /\S/);
      weatherArgsSchema.parse(call.input);
    }
  });

  it("streamText with a tool and toolChoice 'required' assembles streamed calls that match the schema", async () => {
    const errors: unknown[] = [];
    const result = streamText({
      model: provider()(TEST_MODEL),
      prompt: "What is the weather in Paris?",
      tools: weather,
      toolChoice: "required",
      maxOutputTokens: FORCED_MAX_TOKENS,
      temperature: 0,
      onError: ({ error }) => {
        errors.push(error);
      },
    });
    await result.consumeStream();
    assert.deepEqual(errors, []);
    assert.equal(await result.finishReason, "tool-calls");
    const calls = await result.toolCalls;
    assert.ok(calls.length >= 1);
    for (const call of calls) {
      assert.equal(call.toolName, weatherTool.name);
      weatherArgsSchema.parse(call.input);
    }
  });
});

// Client compatibility: the official `openai` npm client (v6), pointed at lmserve by base URL and key
// only, on stories260K. Tests of features still being built carry node:test's `todo` with the reason;
// whoever ships the feature removes the `todo` (the test must then pass as written).
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import OpenAI, { type APIError } from "openai";
import { zodFunction, zodResponseFormat } from "openai/helpers/zod";
import { startTestServer, TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";
import {
  characterSchema,
  FORCED_MAX_TOKENS,
  GREEDY_START,
  weatherArgsSchema,
  weatherTool,
} from "./shared.ts";

const chatMessages: OpenAI.ChatCompletionMessageParam[] = [
  { role: "system", content: "You tell short stories." },
  { role: "user", content: "Tell me about a girl and her dog." },
];

/** A greedy chat request that forces one call of the weather tool, its parameters given as a zod schema. */
function forcedWeatherCall() {
  return {
    model: TEST_MODEL,
    messages: [{ role: "user" as const, content: "What is the weather in Paris?" }],
    tools: [zodFunction({ ...weatherTool, parameters: weatherArgsSchema })],
    tool_choice: "required" as const,
    parallel_tool_calls: false,
    max_tokens: FORCED_MAX_TOKENS,
    temperature: 0,
  };
}

/** A client that knows only the server's base URL and a key. No retries: a 429 must surface as is. */
function clientFor(server: TestServer, apiKey = "sk-test"): OpenAI {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0 });
}

/** An error response as the server sends it: the HTTP status and the OpenAI `error` object. */
type RawError = {
  status: number;
  error: { message: string; type: string; param: string | null; code: string };
};

/** The error body the server sends for a raw POST (or a GET when `body` is undefined). */
async function rawErrorBody(
  server: TestServer,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<RawError> {
  const response =
    body === undefined
      ? await fetch(`${server.url}${path}`, { headers })
      : await server.post(path, body, headers);
  const json = (await response.json()) as { error: RawError["error"] };
  return { status: response.status, error: json.error };
}

/**
 * Asserts that `promise` rejects with the SDK's `errorClass`, carrying the server's status, message,
 * type, code and param exactly as the raw error body gives them.
 */
async function rejectsLike<E extends APIError>(
  promise: Promise<unknown>,
  errorClass: new (...args: never[]) => E,
  raw: RawError,
): Promise<E> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof errorClass, `expected ${errorClass.name}, got ${String(caught)}`);
  assert.equal(caught.status, raw.status);
  assert.equal(caught.message, `${raw.status} ${raw.error.message}`);
  assert.equal(caught.type, raw.error.type);
  assert.equal(caught.code, raw.error.code);
  assert.equal(caught.param, raw.error.param);
  return caught;
}

describe("openai SDK against lmserve", () => {
  let client: OpenAI;
  const server = useTestServer();
  before(async () => {
    client = clientFor(server);
  });

  it("models.list() lists the served model", async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    assert.deepEqual(ids, [TEST_MODEL]);
    const model = await client.models.retrieve(TEST_MODEL);
    assert.equal(model.object, "model");
    assert.equal(model.id, TEST_MODEL);
  });

  it("completions.create, not streamed and streamed, give the same text and usage", async () => {
    const request = { model: TEST_MODEL, prompt: "Once upon a time", max_tokens: 24, temperature: 0 };
    const completion = await client.completions.create(request);
    const text = completion.choices[0]?.text ?? "";
    assert.ok(text.startsWith(GREEDY_START), text);
    assert.equal(completion.choices[0]?.finish_reason, "length");
    assert.equal(completion.usage?.completion_tokens, 24);

    const stream = await client.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamed = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.text ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(streamed, text);
    assert.equal(finish, "length");
    assert.equal(usage?.completion_tokens, completion.usage?.completion_tokens);
    assert.equal(usage?.prompt_tokens, completion.usage?.prompt_tokens);
  });

  it("chat.completions.create, not streamed and streamed, give the same message and usage", async () => {
    const request = { model: TEST_MODEL, messages: chatMessages, max_tokens: 20, temperature: 0 };
    const completion = await client.chat.completions.create(request);
    assert.equal(completion.object, "chat.completion");
    assert.match(completion.id, /^chatcmpl-/);
    const message = completion.choices[0]?.message;
    assert.equal(message?.role, "assistant");
    assert.ok(typeof message?.content === "string" && message.content.length > 0);
    assert.equal(completion.usage?.completion_tokens, 20);

    const stream = await client.chat.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "";
    let role: string | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      assert.equal(chunk.object, "chat.completion.chunk");
      role ??= chunk.choices[0]?.delta.role;
      content += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(role, "assistant");
    assert.equal(content, message?.content);
    assert.equal(usage?.completion_tokens, completion.usage?.completion_tokens);
    assert.equal(usage?.prompt_tokens, completion.usage?.prompt_tokens);
  });

  it("the chat.completions.stream() helper emits chunk, content, content.delta and content.done", async () => {
    const expected = await client.chat.completions.create({
      model: TEST_MODEL,
      messages: chatMessages,
      max_tokens: 16,
      temperature: 0,
    });
    const runner = client.chat.completions.stream({
      model: TEST_MODEL,
      messages: chatMessages,
      max_tokens: 16,
      temperature: 0,
      stream_options: { include_usage: true },
    });
    let chunks = 0;
    let deltas = "";
    let snapshot = "";
    const done: string[] = [];
    runner.on("chunk", () => chunks++);
    runner.on("content", (_delta, contentSnapshot) => {
      snapshot = contentSnapshot;
    });
    runner.on("content.delta", (event) => {
      deltas += event.delta;
      assert.equal(event.snapshot, deltas);
    });
    runner.on("content.done", (event) => done.push(event.content));
    const final = await runner.finalChatCompletion();
    const content = expected.choices[0]?.message.content;
    assert.ok(chunks >= 3, `${chunks} chunks`);
    assert.equal(deltas, content);
    assert.equal(snapshot, content);
    assert.deepEqual(done, [content]);
    assert.equal(final.choices[0]?.message.content, content);
    assert.equal(final.choices[0]?.finish_reason, "length");
    assert.equal(final.usage?.completion_tokens, 16);
    assert.equal(await runner.finalContent(), content);
  });

  it("NotFoundError for an unknown model, with our message", async () => {
    const body = { model: "no-such-model", messages: chatMessages };
    const raw = await rawErrorBody(server, "/v1/chat/completions", body);
    assert.equal(
      raw.error.message,
      `The model \`no-such-model\` does not exist. Available models: ${TEST_MODEL}.`,
    );
    await rejectsLike(client.chat.completions.create(body), OpenAI.NotFoundError, raw);
    const rawModel = await rawErrorBody(server, "/v1/models/no-such-model", undefined);
    assert.equal(rawModel.status, 404);
    await rejectsLike(client.models.retrieve("no-such-model"), OpenAI.NotFoundError, rawModel);
  });

  it("BadRequestError for a prompt plus max_tokens beyond the context, with our message", async () => {
    const body = { model: TEST_MODEL, messages: chatMessages, max_tokens: 100_000 };
    const raw = await rawErrorBody(server, "/v1/chat/completions", body);
    assert.equal(raw.status, 400);
    assert.match(raw.error.message, /^This model's maximum context length is \d+ tokens\./);
    const error = await rejectsLike(client.chat.completions.create(body), OpenAI.BadRequestError, raw);
    assert.equal(error.param, "max_tokens");
  });

  it("UnprocessableEntityError for a field of the wrong type, with our message", async () => {
    const body = { model: TEST_MODEL, prompt: "Once", max_tokens: "many" };
    const raw = await rawErrorBody(server, "/v1/completions", body);
    assert.equal(raw.status, 422);
    assert.match(raw.error.message, /^max_tokens: /);
    await rejectsLike(
      client.completions.create(body as unknown as OpenAI.CompletionCreateParamsNonStreaming),
      OpenAI.UnprocessableEntityError,
      raw,
    );
  });

  it("chat.completions.parse() with zodResponseFormat returns a parsed object", async () => {
    const completion = await client.chat.completions.parse({
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Describe a story character as JSON." }],
      response_format: zodResponseFormat(characterSchema, "character"),
      max_tokens: FORCED_MAX_TOKENS,
      temperature: 0,
    });
    const message = completion.choices[0]?.message;
    assert.equal(completion.choices[0]?.finish_reason, "stop");
    assert.ok(message?.parsed, `parsed from ${message?.content}`);
    assert.deepEqual(characterSchema.parse(JSON.parse(message.content ?? "")), message.parsed);
  });

  it("chat.completions.stream() with zodResponseFormat parses in content.done", async () => {
    const runner = client.chat.completions.stream({
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Describe a story character as JSON." }],
      response_format: zodResponseFormat(characterSchema, "character"),
      max_tokens: FORCED_MAX_TOKENS,
      temperature: 0,
    });
    const parsed: unknown[] = [];
    runner.on("content.done", (event) => parsed.push(event.parsed));
    const final = await runner.finalChatCompletion();
    assert.equal(parsed.length, 1);
    assert.deepEqual(characterSchema.parse(parsed[0]), final.choices[0]?.message.parsed);
  });

  it("a zodFunction tool with tool_choice 'required' gives a call whose arguments match the schema", async () => {
    const completion = await client.chat.completions.parse({
      ...forcedWeatherCall(),
    });
    const choice = completion.choices[0];
    assert.equal(choice?.finish_reason, "tool_calls");
    const calls = choice?.message.tool_calls ?? [];
    assert.equal(calls.length, 1);
    const call = calls[0];
    assert.ok(call?.type === "function");
    assert.match(call.id, /\S/);
    assert.equal(call.function.name, weatherTool.name);
    const args = weatherArgsSchema.parse(JSON.parse(call.function.arguments));
    assert.deepEqual(call.function.parsed_arguments, args);
  });

  it("a streamed tool call emits tool_calls.function.arguments events that assemble to valid arguments", async () => {
    const runner = client.chat.completions.stream({
      ...forcedWeatherCall(),
    });
    let deltas = "";
    const done: { name: string; arguments: string; parsed: unknown }[] = [];
    runner.on("tool_calls.function.arguments.delta", (event) => {
      deltas += event.arguments_delta;
    });
    runner.on("tool_calls.function.arguments.done", (event) =>
      done.push({ name: event.name, arguments: event.arguments, parsed: event.parsed_arguments }),
    );
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0]?.finish_reason, "tool_calls");
    assert.equal(done.length, 1);
    assert.equal(done[0]?.name, weatherTool.name);
    assert.equal(deltas, done[0]?.arguments);
    assert.deepEqual(weatherArgsSchema.parse(JSON.parse(deltas)), done[0]?.parsed);
  });
});

describe("openai SDK error classes of server limits", () => {
  it("AuthenticationError for a wrong key, with our message", async () => {
    const server = await startTestServer(["--api-key", "sk-right"]);
    try {
      const body = { model: TEST_MODEL, prompt: "Once", max_tokens: 4 };
      const raw = await rawErrorBody(server, "/v1/completions", body, { authorization: "Bearer sk-wrong" });
      assert.equal(raw.status, 401);
      await rejectsLike(
        clientFor(server, "sk-wrong").completions.create(body),
        OpenAI.AuthenticationError,
        raw,
      );
      const completion = await clientFor(server, "sk-right").completions.create(body);
      assert.equal(completion.usage?.completion_tokens, 4);
    } finally {
      await server.stop();
    }
  });

  // `--rate-limit 1/min` admits one request per minute per client: the second one at once is refused.
  it("RateLimitError with Retry-After past the limit, with our message", async () => {
    const server = await startTestServer(["--rate-limit", "1/min"]);
    try {
      const client = clientFor(server);
      const body = { model: TEST_MODEL, prompt: "Once", max_tokens: 4 };
      const first = await client.completions.create(body);
      assert.equal(first.usage?.completion_tokens, 4);
      const raw = await rawErrorBody(server, "/v1/completions", body, { authorization: "Bearer sk-test" });
      assert.equal(raw.status, 429);
      const error = await rejectsLike(client.completions.create(body), OpenAI.RateLimitError, raw);
      assert.match(error.headers?.get("retry-after") ?? "", /^\d+$/);
    } finally {
      await server.stop();
    }
  });
});

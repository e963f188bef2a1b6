// Tool calling end to end on stories260K through the official `openai` client: forced calls
// (`tool_choice` "required" / named, enforced by a grammar, so even this untrained model calls validly),
// auto parsing of real tool-call markup (a Hermes template, with a regex making the model write the
// markup), `tool_choice: "none"`, the ChatML fallback, tool-result conversations and the 4xx answers.
// Streamed and non-streamed responses of the same request must agree.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import type OpenAI from "openai";
import { projectRoot } from "../../src/paths.ts";
import { ajvValidator } from "../helpers/structuredAjv.ts";
import { startTestServer, TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const weatherParameters = {
  type: "object",
  properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const timeParameters = {
  type: "object",
  properties: { zone: { enum: ["UTC", "CET", "PST"] }, hours24: { type: "boolean" } },
  required: ["zone", "hours24"],
  additionalProperties: false,
};
const weather: OpenAI.ChatCompletionFunctionTool = {
  type: "function",
  function: { name: "get_weather", description: "Current weather in a city", parameters: weatherParameters },
};
const time: OpenAI.ChatCompletionFunctionTool = {
  type: "function",
  function: { name: "get_time", description: "Current time in a zone", parameters: timeParameters },
};
const validators: Record<string, (value: unknown) => boolean> = {
  get_weather: ajvValidator(weatherParameters),
  get_time: ajvValidator(timeParameters),
};
const messages: OpenAI.ChatCompletionMessageParam[] = [
  { role: "user", content: "What is the weather in Paris?" },
];
/** Qwen2.5's template (`<tool_call>` markup: the `hermes` parser is detected from it). */
const hermesTemplate = readFileSync(join(projectRoot, "test/fixtures/templates/qwen2.5.jinja"), "utf8");
/** ChatML that renders the tools (so `detectToolParser` picks `generic`). */
const genericTemplate = `{%- if tools %}{{- '<|im_start|>system\\nTools: ' + (tools | tojson) + '<|im_end|>\\n' -}}{%- endif %}
{%- for message in messages -%}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}`;

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const hermesCall = (city: string) =>
  `<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}", "unit": "celsius"}}\n</tool_call>`;
/** A regex whose only match is "Hello, " then two Hermes calls (Paris, Rome): the model must write them. */
const twoHermesCalls = escapeRegex(`Hello, ${hermesCall("Paris")}\n${hermesCall("Rome")}`);

/** A call as compared between responses (ids are random). */
type Call = { name: string; arguments: string };
/** What a response says, streamed or not, in one comparable shape. */
type Outcome = { content: string | null; calls: Call[]; finish: string | null | undefined; ids: string[] };

function outcomeOf(completion: OpenAI.ChatCompletion): Outcome {
  const choice = completion.choices[0];
  const calls = (choice?.message.tool_calls ?? []).filter((call) => call.type === "function");
  return {
    content: choice?.message.content ?? null,
    calls: calls.map((call) => ({ name: call.function.name, arguments: call.function.arguments })),
    finish: choice?.finish_reason,
    ids: calls.map((call) => call.id),
  };
}

/** Assembles a chat stream as OpenAI's delta rules say: content appended, calls by `index`. */
async function outcomeOfStream(stream: AsyncIterable<OpenAI.ChatCompletionChunk>): Promise<Outcome> {
  let content: string | null = null;
  const calls: (Call & { id: string })[] = [];
  let finish: string | null | undefined;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.content) content = (content ?? "") + choice.delta.content;
    for (const fragment of choice.delta.tool_calls ?? []) {
      const call = calls[fragment.index];
      if (!call) {
        assert.equal(fragment.index, calls.length, "a call's first fragment comes in index order");
        assert.ok(fragment.id && fragment.type === "function" && fragment.function?.name, "first fragment");
        calls.push({
          id: fragment.id,
          name: fragment.function.name,
          arguments: fragment.function.arguments ?? "",
        });
      } else call.arguments += fragment.function?.arguments ?? "";
    }
    finish = choice.finish_reason ?? finish;
  }
  return {
    content,
    calls: calls.map(({ name, arguments: args }) => ({ name, arguments: args })),
    finish,
    ids: calls.map((call) => call.id),
  };
}

function assertValidCalls(outcome: Outcome, names: readonly string[]): void {
  assert.ok(outcome.calls.length >= 1, `a call, got ${JSON.stringify(outcome)}`);
  for (const call of outcome.calls) {
    assert.ok(names.includes(call.name), call.name);
    const validate = validators[call.name];
    assert.ok(validate?.(JSON.parse(call.arguments)), `${call.name}(${call.arguments})`);
  }
  for (const id of outcome.ids) assert.match(id, /^call_[A-Za-z0-9]{24}$/);
  assert.equal(outcome.finish, "tool_calls");
}

describe("tool calling (stories260K, ChatML fallback template)", () => {
  let client: OpenAI;
  /** Runs one request streamed and not; asserts both agree; returns the non-streamed outcome. */
  const both = async (body: Omit<OpenAI.ChatCompletionCreateParamsNonStreaming, "model">) => {
    const plain = outcomeOf(await client.chat.completions.create({ model: TEST_MODEL, ...body }));
    const streamed = await outcomeOfStream(
      await client.chat.completions.create({ model: TEST_MODEL, ...body, stream: true }),
    );
    assert.deepEqual({ ...streamed, ids: [] }, { ...plain, ids: [] });
    return plain;
  };
  const errorOf = async (body: Record<string, unknown>) => {
    const response = await server.post("/v1/chat/completions", { model: TEST_MODEL, messages, ...body });
    const json = (await response.json()) as { error: { message: string; param: string | null } };
    return { status: response.status, ...json.error };
  };

  const server = useTestServer(["--trust-request-chat-template"]);
  before(async () => {
    client = server.client;
  });

  it("a forced call cut by max_tokens finishes with length, the partial call kept out of content (as vLLM)", async () => {
    for (const tool_choice of [
      "required",
      { type: "function", function: { name: "get_weather" } },
    ] as const) {
      const outcome = await both({
        messages,
        tools: [weather, time],
        tool_choice,
        max_tokens: 5,
        temperature: 0,
      });
      assert.deepEqual({ ...outcome, ids: [] }, { content: null, calls: [], finish: "length", ids: [] });
    }
  });

  it("tool_choice 'required' returns one valid call, content null, streamed and not", async () => {
    const outcome = await both({ messages, tools: [weather, time], tool_choice: "required", temperature: 0 });
    assertValidCalls(outcome, ["get_weather", "get_time"]);
    assert.equal(outcome.calls.length, 1);
    assert.equal(outcome.content, null);
  });

  it("a named tool_choice returns a call of that tool, streamed and not", async () => {
    const named = { type: "function", function: { name: "get_time" } } as const;
    const outcome = await both({ messages, tools: [weather, time], tool_choice: named, temperature: 0 });
    assertValidCalls(outcome, ["get_time"]);
    assert.equal(outcome.calls.length, 1);
  });

  it("parallel_tool_calls true forces an array: one or more valid calls, the same streamed", async () => {
    const outcome = await both({
      messages,
      tools: [weather],
      tool_choice: "required",
      parallel_tool_calls: true,
      seed: 4,
      max_tokens: 600,
    });
    assertValidCalls(outcome, ["get_weather"]);
  });

  it("chat.completions.stream() emits the call's argument events and a final completion", async () => {
    const runner = client.chat.completions.stream({
      model: TEST_MODEL,
      messages,
      tools: [weather],
      tool_choice: "required",
      temperature: 0,
    });
    const done: { name: string; arguments: string }[] = [];
    runner.on("tool_calls.function.arguments.done", (event) =>
      done.push({ name: event.name, arguments: event.arguments }),
    );
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0]?.finish_reason, "tool_calls");
    assert.deepEqual(done, outcomeOf(final).calls);
    assertValidCalls(outcomeOf(final), ["get_weather"]);
  });

  it("runTools with a named tool calls the function once with arguments that validate", async () => {
    const received: unknown[] = [];
    const runner = client.chat.completions.runTools({
      model: TEST_MODEL,
      messages,
      tools: [
        {
          type: "function",
          function: {
            name: "get_weather",
            description: "Current weather in a city",
            parameters: weatherParameters,
            parse: JSON.parse,
            function: (args: unknown) => {
              received.push(args);
              return "Sunny, 21 C";
            },
          },
        },
      ],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      temperature: 0,
    });
    assert.equal(await runner.finalFunctionToolCallResult(), "Sunny, 21 C");
    assert.equal(received.length, 1);
    assert.ok(validators.get_weather?.(received[0]));
  });

  it("a conversation with the call and its tool result renders and answers", async () => {
    const first = await client.chat.completions.create({
      model: TEST_MODEL,
      messages,
      tools: [weather],
      tool_choice: "required",
      temperature: 0,
    });
    const call = first.choices[0]?.message.tool_calls?.[0];
    assert.ok(call?.type === "function");
    const conversation: OpenAI.ChatCompletionMessageParam[] = [
      ...messages,
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: "Sunny, 21 C" },
    ];
    for (const template of [undefined, hermesTemplate]) {
      const answer = await client.chat.completions.create({
        model: TEST_MODEL,
        messages: conversation,
        tools: [weather],
        max_tokens: 12,
        temperature: 0,
        ...(template ? { chat_template: template } : {}),
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      const choice = answer.choices[0];
      assert.equal(choice?.finish_reason, "length");
      assert.ok((choice?.message.content ?? "").length > 0);
      assert.equal(choice?.message.tool_calls, undefined);
    }
  });

  it("auto with a Hermes template parses the markup: content before, calls, nothing leaks", async () => {
    const body = { messages, tools: [weather], chat_template: hermesTemplate, guided_regex: twoHermesCalls };
    const outcome = await both(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assert.equal(outcome.content, "Hello, ");
    assert.deepEqual(outcome.calls, [
      { name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' },
      { name: "get_weather", arguments: '{"city":"Rome","unit":"celsius"}' },
    ]);
    assertValidCalls(outcome, ["get_weather"]);
    const single = await both({
      ...body,
      parallel_tool_calls: false,
    } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assert.deepEqual(single.calls, outcome.calls.slice(0, 1));
  });

  it("tool_choice 'none' never returns calls: the same markup stays content", async () => {
    const body = {
      messages,
      tools: [weather],
      tool_choice: "none",
      chat_template: hermesTemplate,
      guided_regex: twoHermesCalls,
    };
    const outcome = await both(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assert.deepEqual(outcome.calls, []);
    assert.equal(outcome.content, `Hello, ${hermesCall("Paris")}\n${hermesCall("Rome")}`);
    assert.equal(outcome.finish, "stop");
  });

  it("auto without a tool parser (ChatML fallback) returns plain content, as vLLM without one", async () => {
    // The output is forced to be exactly a generic-format call; only a template that renders the tools
    // (here: `generic` detected) makes it a call.
    const forced = {
      type: "object",
      properties: { name: { const: "get_weather" }, arguments: weatherParameters },
      required: ["name", "arguments"],
      additionalProperties: false,
    };
    const body = { messages, tools: [weather], tool_choice: "auto", guided_json: forced, temperature: 0 };
    const plain = await both(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assert.deepEqual(plain.calls, []);
    assert.equal(plain.finish, "stop");
    assert.equal(JSON.parse(plain.content ?? "").name, "get_weather");
    const generic = await both({
      ...body,
      chat_template: genericTemplate,
    } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assertValidCalls(generic, ["get_weather"]);
    assert.equal(generic.content, null);
  });

  it("answers 400 for a named tool that is not among the tools, and other invalid tool use", async () => {
    const missing = await errorOf({
      tools: [weather],
      tool_choice: { type: "function", function: { name: "nope" } },
    });
    assert.equal(missing.status, 400);
    assert.equal(missing.param, "tool_choice");
    assert.match(missing.message, /'nope'.*get_weather/);
    const noTools = await errorOf({ tool_choice: "required" });
    assert.deepEqual([noTools.status, noTools.param], [400, "tools"]);
    const twice = await errorOf({ tools: [weather, weather], tool_choice: "auto" });
    assert.deepEqual([twice.status, twice.param], [400, "tools[1].function.name"]);
    const withFormat = await errorOf({
      tools: [weather],
      tool_choice: "required",
      response_format: { type: "json_object" },
    });
    assert.deepEqual([withFormat.status, withFormat.param], [400, "tool_choice"]);
    assert.match(withFormat.message, /response_format/);
    assert.equal((await errorOf({ tools: [weather], tool_choice: "sometimes" })).status, 422);
  });
});

describe("--tool-call-parser", () => {
  it("makes tool_choice auto parse that format with a template that has none", async () => {
    const server = await startTestServer(["--tool-call-parser", "hermes", "--trust-request-chat-template"]);
    try {
      const outcome = outcomeOf(
        await server.client.chat.completions.create({
          model: TEST_MODEL,
          messages,
          tools: [weather],
          guided_regex: twoHermesCalls,
        } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming),
      );
      assert.equal(outcome.calls.length, 2);
      assertValidCalls(outcome, ["get_weather"]);
    } finally {
      await server.stop();
    }
  });

  it("refuses an unknown parser name at startup with exit code 2", async () => {
    await assert.rejects(startTestServer(["--tool-call-parser", "nope"]), (error: Error) => {
      assert.match(error.message, /exited with 2/);
      assert.match(
        error.message,
        /Unknown --tool-call-parser 'nope'; known: hermes, llama3_json, mistral, generic/,
      );
      return true;
    });
  });
});

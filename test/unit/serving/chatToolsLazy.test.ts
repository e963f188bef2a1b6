// `strict: true` tools under `tool_choice: "auto"` (issue 26 item 4): `resolveToolCalling` gives a lazy
// grammar (`LazyToolGrammar`) whose triggers are the family's call openings; `chatGrammar` builds it as
// the served request would (a `Grammar` with `lazy`); from its first trigger, llama.cpp's grammar engine
// admits the family's calls whose strict arguments validate (and the non-strict tool with any arguments),
// refuses schema breaches, and the family's parser reads every admitted text back. Families with no
// grammar, and strict tools the markup cannot hold, are a 400 naming `tools[i].function.strict`.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { thinkingMarkup } from "../../../src/chat/reasoningParsers/index.ts";
import { ApiError } from "../../../src/errors.ts";
import type { ChatCompletionRequest } from "../../../src/protocol/chat.ts";
import { chatGrammar } from "../../../src/serving/guided/chatGrammar.ts";
import { resolveToolCalling } from "../../../src/serving/guided/chatTools.ts";
import { checkRequest } from "../../../src/serving/request/requestChecks.ts";
import { type CommonRequest, requestFields } from "../../../src/serving/request/requestFields.ts";
import { type Call, FAMILIES } from "../../helpers/familyCallWriters.ts";
import { runParser } from "../../helpers/parserSuite.ts";
import { ajvValidator } from "../../helpers/structuredAjv.ts";
import { nativeMatcher } from "../structured/nativeMatcher.ts";

const weather = {
  type: "object",
  properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
  required: ["city", "days"],
  additionalProperties: false,
};
const note = {
  type: "object",
  properties: { text: { type: "string" }, level: { type: "integer" } },
  required: ["text"],
};
const tools = [
  { type: "function" as const, function: { name: "get_weather", parameters: weather, strict: true } },
  { type: "function" as const, function: { name: "note", parameters: note } },
];
const validWeather = ajvValidator(weather);
const TEMPLATES = join(import.meta.dirname, "../../../native/build/llama.cpp/models/templates");
const template = (file: string) => readFileSync(join(TEMPLATES, file), "utf8");

function request(extra: Partial<ChatCompletionRequest> = {}): ChatCompletionRequest {
  return {
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    tools,
    ...extra,
  } as ChatCompletionRequest;
}

/** The served grammar of an auto request with a strict tool, its matcher and the family's parser. */
async function lazy(body: ChatCompletionRequest, file: string) {
  const calling = resolveToolCalling(body, undefined, template(file));
  assert.equal(calling.mode, "auto");
  assert.ok(calling.lazy, "a lazy grammar");
  const grammar = await chatGrammar(requestFields(body as CommonRequest), calling, "none");
  assert.ok(grammar?.lazy);
  const matches = await nativeMatcher(grammar.gbnf, grammar.root ?? "root");
  const parse = (text: string): { content: string; calls: Call[] } => {
    assert.ok(calling.parser);
    const half = Math.floor(text.length / 2);
    const result = runParser({ toolParser: calling.parser, tools }, [text.slice(0, half), text.slice(half)]);
    return {
      content: result.content ?? "",
      calls: result.toolCalls.map((call) => ({
        name: call.function.name,
        args: JSON.parse(call.function.arguments) as Record<string, unknown>,
      })),
    };
  };
  return { calling, grammar, matches, parse };
}

/** Hermes (Qwen2.5's template): `<tool_call>\n{json}\n</tool_call>`. */
const HERMES = {
  file: "Qwen-Qwen2.5-7B-Instruct.jinja",
  write: (calls: Call[]) =>
    calls
      .map(
        (call) => `<tool_call>\n${JSON.stringify({ name: call.name, arguments: call.args })}\n</tool_call>`,
      )
      .join("\n"),
};

/** Mistral's tokenizer v3 form (Mistral Nemo's template, no `[ARGS]`): `[TOOL_CALLS][{json}]` per call. */
const MISTRAL_V3 = {
  file: "mistralai-Mistral-Nemo-Instruct-2407.jinja",
  write: (calls: Call[]) =>
    calls
      .map((call) => `[TOOL_CALLS][${JSON.stringify({ name: call.name, arguments: call.args })}]`)
      .join(""),
};

const CASES: Record<string, { file: string; write: (calls: Call[]) => string }> = {
  hermes: HERMES,
  ...FAMILIES,
  "mistral v3": MISTRAL_V3,
};

describe("strict tools under tool_choice auto: a lazy grammar from the call marker on", () => {
  for (const [family, { file, write }] of Object.entries(CASES)) {
    it(`${family} (${file}): strict calls validate, the non-strict tool is free, breaches refused`, async () => {
      const { calling, grammar, matches, parse } = await lazy(request(), file);
      assert.equal(calling.parser, family.split(" ")[0]);
      const triggers = grammar.lazy?.triggers ?? [];
      const good: Call[][] = [
        [{ name: "get_weather", args: { city: "Paris", days: 3 } }],
        // The non-strict tool: its arguments are not held to its schema (no `text`, an unknown key).
        [{ name: "note", args: { other: "x" } }],
        [
          { name: "get_weather", args: { city: "Oslo", days: 1 } },
          { name: "note", args: { text: "t" } },
        ],
      ];
      for (const calls of good) {
        const text = write(calls);
        assert.ok(
          triggers.some((trigger) => text.startsWith(trigger)),
          `starts at a trigger: ${text}`,
        );
        assert.ok(matches(text), text);
        const parsed = parse(`Let me check. ${text}`);
        assert.equal(parsed.content.trim(), "Let me check.");
        assert.equal(parsed.calls.length, calls.length, text);
        for (const call of parsed.calls) {
          if (call.name === "get_weather") assert.ok(validWeather(call.args), JSON.stringify(call.args));
        }
      }
      for (const calls of [
        [{ name: "get_weather", args: { city: "Paris" } }],
        [{ name: "get_weather", args: { city: "Paris", days: 0 } }],
        [{ name: "get_weather", args: { city: "Paris", days: 2, extra: 1 } }],
        [{ name: "nope", args: {} }],
      ]) {
        assert.ok(!matches(write(calls)), write(calls));
      }
    });
  }

  it("gpt-oss (Harmony): a commentary message to=functions.NAME, one call, after any analysis", async () => {
    const { calling, grammar, matches } = await lazy(request(), "openai-gpt-oss-120b.jinja");
    assert.equal(calling.parser, "openai");
    assert.deepEqual(grammar.lazy?.triggers, ["<|channel|>commentary to=functions."]);
    const write = (call: Call) =>
      `<|channel|>commentary to=functions.${call.name} <|constrain|>json<|message|>${JSON.stringify(call.args)}`;
    for (const call of [
      { name: "get_weather", args: { city: "Paris", days: 3 } },
      { name: "note", args: { other: "x" } },
    ]) {
      assert.ok(matches(write(call)), write(call));
      const text = `<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant${write(call)}`;
      const parsed = runParser({ reasoningParser: "openai_gptoss", toolParser: "openai", tools }, [text]);
      assert.equal(parsed.reasoning, "Look it up.");
      assert.deepEqual(
        parsed.toolCalls.map((entry) => ({
          name: entry.function.name,
          args: JSON.parse(entry.function.arguments),
        })),
        [call],
      );
    }
    for (const call of [
      { name: "get_weather", args: { city: "Paris" } },
      { name: "get_weather", args: { city: "Paris", days: 0 } },
      { name: "nope", args: {} },
    ]) {
      assert.ok(!matches(write(call)), write(call));
    }
  });

  it("the thinking block is skipped: the lazy start carries the reasoning markup", async () => {
    const body = request();
    const calling = resolveToolCalling(body, undefined, template(HERMES.file));
    const open = await chatGrammar(requestFields(body as CommonRequest), calling, "open");
    assert.deepEqual(open?.lazy?.thinking, { open: "<think>", close: "</think>", opened: true });
    const optional = await chatGrammar(requestFields(body as CommonRequest), calling, "optional");
    assert.deepEqual(optional?.lazy?.thinking, { open: "<think>", close: "</think>", opened: false });
  });

  it("Kimi-K2 Thinking: the triggers are watched from the start, as a tool-call section also ends its reasoning", async () => {
    const body = request();
    const calling = resolveToolCalling(body, undefined, template("Kimi-K2-Thinking.jinja"));
    const markup = thinkingMarkup("kimi_k2");
    const grammar = await chatGrammar(
      requestFields(body as CommonRequest),
      calling,
      "open",
      undefined,
      markup,
    );
    assert.deepEqual(grammar?.lazy?.thinking, { open: "<think>", close: "</think>", opened: false });
    // The parser reads such a call after reasoning without </think>: the grammar's triggers are live there.
    const text =
      'Hm.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city":"Rome","days":2}<|tool_call_end|><|tool_calls_section_end|>';
    const parsed = runParser({ reasoningParser: "kimi_k2", toolParser: "kimi_k2", tools }, [text]);
    assert.equal(parsed.reasoning, "Hm.");
    assert.equal(parsed.toolCalls[0]?.function.name, "get_weather");
  });

  it("parallel_tool_calls false: exactly one call", async () => {
    const { matches } = await lazy(request({ parallel_tool_calls: false }), HERMES.file);
    const one = HERMES.write([{ name: "get_weather", args: { city: "Rome", days: 2 } }]);
    assert.ok(matches(one));
    assert.ok(!matches(`${one}\n${one}`));
  });

  it("without a strict tool, auto stays unconstrained", () => {
    const plain = tools.map((tool) => ({ ...tool, function: { ...tool.function, strict: false } }));
    const calling = resolveToolCalling(request({ tools: plain }), undefined, template(HERMES.file));
    assert.equal(calling.lazy, undefined);
  });

  it("a family with no lazy grammar, or a strict tool its markup cannot hold: 400 on tools[i].function.strict", () => {
    const refused = (body: ChatCompletionRequest, file: string | null, param: string) =>
      assert.throws(
        () => resolveToolCalling(body, undefined, file === null ? "{{ messages }}" : template(file)),
        (error: unknown) => error instanceof ApiError && error.status === 400 && error.param === param,
      );
    const second = [tools[1], tools[0]] as ChatCompletionRequest["tools"];
    refused(request({ tools: second }), "meta-llama-Llama-3.1-8B-Instruct.jinja", "tools[1].function.strict");
    refused(request(), null, "tools[0].function.strict");
    const patterned = {
      type: "object",
      properties: { city: { type: "string", pattern: "^[A-Z]" } },
      required: ["city"],
    };
    refused(
      request({
        tools: [{ type: "function", function: { name: "get_weather", parameters: patterned, strict: true } }],
      }),
      "Qwen3-Coder.jinja",
      "tools[0].function.strict",
    );
  });

  it("request checks: stop, ignore_eos and a response_format with a strict tool under auto are a 400", () => {
    const refusedCheck = (extra: Record<string, unknown>, param: string) => {
      const body = { ...request(), ...extra } as CommonRequest;
      assert.throws(
        () => checkRequest(body, requestFields(body)),
        (error: unknown) => error instanceof ApiError && error.status === 400 && error.param === param,
      );
    };
    refusedCheck({ stop: ["x"] }, "stop");
    refusedCheck({ ignore_eos: true }, "ignore_eos");
    refusedCheck({ response_format: { type: "json_object" } }, "tools[0].function.strict");
    const required = { ...request(), tool_choice: "required" } as CommonRequest;
    assert.throws(() => checkRequest({ ...required, stop: ["x"] } as CommonRequest, requestFields(required)));
  });
});

// Forced tool calls in the family's own markup (issue 26 item 4): `resolveToolCalling` picks the native
// form for `hermes` and `llama3_json`, `wrapCalls` writes its grammar, llama.cpp's grammar engine admits
// exactly the wrapped calls, and the family's parser reads each admitted text back into tool calls whose
// arguments validate against the tool's parameters schema (ajv).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { ChatCompletionRequest } from "../../../src/protocol/chat.ts";
import { wrapCalls } from "../../../src/serving/guided/chatGrammar.ts";
import { resolveToolCalling } from "../../../src/serving/guided/chatTools.ts";
import { checkGbnfText, compileConstraint } from "../../../src/structured/index.ts";
import { runParser } from "../../helpers/parserSuite.ts";
import { ajvValidator } from "../../helpers/structuredAjv.ts";
import { nativeMatcher } from "../structured/nativeMatcher.ts";

const weather = {
  type: "object",
  properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
  required: ["city"],
  additionalProperties: false,
};
const tools = [
  { type: "function" as const, function: { name: "get_weather", parameters: weather } },
  { type: "function" as const, function: { name: "ping", parameters: {} } },
];
const TEMPLATES = join(import.meta.dirname, "../../../native/build/llama.cpp/models/templates");
const HERMES_TEMPLATE = readFileSync(join(TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja"), "utf8");
const LLAMA3_TEMPLATE = readFileSync(join(TEMPLATES, "meta-llama-Llama-3.1-8B-Instruct.jinja"), "utf8");

function request(extra: Partial<ChatCompletionRequest>): ChatCompletionRequest {
  return {
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    tools,
    ...extra,
  } as ChatCompletionRequest;
}

/** The grammar, parser and checks of a forced request, as chatGrammar builds them. */
async function forced(body: ChatCompletionRequest, template: string) {
  const calling = resolveToolCalling(body, undefined, template);
  assert.equal(calling.mode, "forced");
  assert.ok(calling.schema);
  const base = compileConstraint("json_schema", calling.schema).gbnf;
  const { gbnf, root } = calling.markup ? wrapCalls(base, calling.markup) : { gbnf: base, root: "root" };
  checkGbnfText(gbnf);
  const matches = await nativeMatcher(gbnf, root);
  /** Parses `text` with the request's parser (in two chunks, to cross a tag) into name + parsed args. */
  const parse = (text: string) => {
    assert.ok(calling.parser);
    const half = Math.floor(text.length / 2);
    const result = runParser({ toolParser: calling.parser, tools }, [text.slice(0, half), text.slice(half)]);
    return result.toolCalls.map((call) => ({
      name: call.function.name,
      args: JSON.parse(call.function.arguments) as unknown,
    }));
  };
  return { calling, matches, parse };
}

const validWeather = ajvValidator(weather);

describe("forced tool calls in the native markup", () => {
  it("hermes, one call: <tool_call> JSON </tool_call>, parsed back by the hermes parser", async () => {
    const { calling, matches, parse } = await forced(request({ tool_choice: "required" }), HERMES_TEMPLATE);
    assert.equal(calling.parser, "hermes");
    const good = [
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>',
      '<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>',
    ];
    for (const text of good) {
      assert.ok(matches(text), text);
      const calls = parse(text);
      assert.equal(calls.length, 1, text);
      const call = calls[0];
      assert.ok(call);
      if (call.name === "get_weather") assert.ok(validWeather(call.args), JSON.stringify(call.args));
    }
    for (const text of [
      '{"name": "ping", "arguments": {}}',
      '<tool_call>\n{"name": "get_weather", "arguments": {"days": 3}}\n</tool_call>',
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "P", "days": 0}}\n</tool_call>',
      '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>',
      `${good[0]}\n${good[1]}`,
    ]) {
      assert.ok(!matches(text), text);
    }
  });

  it("hermes with parallel_tool_calls true admits several calls, each read back", async () => {
    const body = request({ tool_choice: "required", parallel_tool_calls: true });
    const { calling, matches, parse } = await forced(body, HERMES_TEMPLATE);
    assert.equal(calling.markup?.repeat, true);
    const one = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>';
    const two = `${one}\n<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>`;
    assert.ok(matches(one));
    assert.ok(matches(two));
    assert.deepEqual(
      parse(two).map((call) => call.name),
      ["get_weather", "ping"],
    );
  });

  it("a named choice forces that function only", async () => {
    const body = request({ tool_choice: { type: "function", function: { name: "get_weather" } } });
    const { matches, parse } = await forced(body, HERMES_TEMPLATE);
    const text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>';
    assert.ok(matches(text));
    assert.deepEqual(parse(text), [{ name: "get_weather", args: { city: "Rome" } }]);
    assert.ok(!matches('<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>'));
  });

  it("llama3_json: the bare {name, parameters} object, parsed by the llama3_json parser", async () => {
    const { calling, matches, parse } = await forced(request({ tool_choice: "required" }), LLAMA3_TEMPLATE);
    assert.equal(calling.parser, "llama3_json");
    const text = '{"name": "get_weather", "parameters": {"city": "Lima", "days": 2}}';
    assert.ok(matches(text));
    assert.ok(!matches('{"name": "get_weather", "arguments": {"city": "Lima"}}'));
    const calls = parse(text);
    assert.deepEqual(calls, [{ name: "get_weather", args: { city: "Lima", days: 2 } }]);
    assert.ok(validWeather(calls[0]?.args));
  });

  it("llama3_json with parallel_tool_calls true, and families without a native form, use the generic JSON", () => {
    const parallel = resolveToolCalling(
      request({ tool_choice: "required", parallel_tool_calls: true }),
      undefined,
      LLAMA3_TEMPLATE,
    );
    assert.equal(parallel.parser, "generic");
    assert.equal(parallel.markup, undefined);
    // (mistral, once generic here, now has its own markup: toolGrammars.test.ts)
    const granite = resolveToolCalling(request({ tool_choice: "required" }), "granite", "");
    assert.equal(granite.parser, "generic");
    const auto = resolveToolCalling(request({}), undefined, HERMES_TEMPLATE);
    assert.deepEqual([auto.mode, auto.parser, auto.markup], ["auto", "hermes", undefined]);
  });
});

describe("wrapCalls", () => {
  it("adds a start rule with an unused prefix and renames nothing", async () => {
    const gbnf = 'root ::= "x" lmserve-tool-root\nlmserve-tool-root ::= "y"';
    const wrapped = wrapCalls(gbnf, {
      open: "<a>",
      close: "</a>",
      separator: "\n",
      repeat: true,
      argumentsKey: "arguments",
    });
    assert.equal(wrapped.root, "lmserve-toolx-root");
    assert.ok(wrapped.gbnf.startsWith(gbnf));
    assert.match(
      wrapped.gbnf,
      /^lmserve-toolx-root ::= "<a>" root "<\/a>" \( "\\n" "<a>" root "<\/a>" \)\*$/m,
    );
    checkGbnfText(wrapped.gbnf);
    const matches = await nativeMatcher(wrapped.gbnf, wrapped.root);
    assert.ok(matches("<a>xy</a>\n<a>xy</a>"));
    assert.ok(!matches("xy"));
  });
});

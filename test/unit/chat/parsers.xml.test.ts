// The XML-style tool-call parsers (qwen3_coder, seed_oss, glm45/glm47, minimax_m2, minimax,
// muse_glimmer, nemotron_json) on the shared suite: each case parsed whole, one character at a time and
// split at every boundary; plus detection on the real templates of llama.cpp's models/templates.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createChatOutputParser } from "../../../src/chat/outputParser.ts";
import { detectToolParser, resolveToolParserName } from "../../../src/chat/toolParsers/index.ts";
import { convertParameter } from "../../../src/chat/toolParsers/xmlBlock.ts";
import type { ChatTool } from "../../../src/protocol/tools.ts";
import { type Case, runParser, runParserSuites, type Suite } from "../../helpers/parserSuite.ts";

const MARKUP = [
  "<tool_call>",
  "</tool_call>",
  "<function=",
  "</function>",
  "<parameter",
  "</parameter>",
  "<seed:tool_call>",
  "<arg_key>",
  "<arg_value>",
  "<minimax:tool_call>",
  "<invoke",
  "</invoke>",
  "<tool_calls>",
  "<atem:function_calls>",
  "<atem:invoke",
  "<TOOLCALL>",
  "<tool_calls:opensource>",
  "<tool_call:opensource>",
  "<arg_key:opensource>",
  "]<]minimax[>[",
  "<|open|>",
  "<|close|>",
  "<|tool_call:begin|>",
  "<|tool_calls|>",
  "<|calls|>",
  "<function name=",
  "<param",
];

/** MiniMax-M3's namespace token. */
const MM = "]<]minimax[>[";

const TOOLS: ChatTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string" },
          days: { type: "integer" },
          hot: { type: "boolean" },
          ratio: { type: "number" },
          tags: { type: "array", items: { type: "string" } },
          opts: { type: "object" },
          note: { anyOf: [{ type: "string" }, { type: "null" }] },
          code: { type: "string" },
        },
      },
    },
  },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } },
];

const weatherCall = { name: "get_weather", args: { city: "Paris" } };
const timeCall = { name: "get_time", args: { timezone: "Europe/Paris" } };
const typedArgs = {
  city: "Paris",
  days: 3,
  hot: false,
  ratio: 0.5,
  tags: ["a", "b"],
  opts: { x: 1 },
  note: null,
  code: "42",
};
const typedValues: [string, string][] = [
  ["city", "Paris"],
  ["days", "3"],
  ["hot", "False"],
  ["ratio", "0.5"],
  ["tags", '["a", "b"]'],
  ["opts", '{"x": 1}'],
  ["note", "None"],
  ["code", "42"],
];

/** The cases every family shares, its calls written by `write` (name, [key, value] pairs per call). */
function familyCases(write: (calls: [string, [string, string][]][]) => string, halfWritten: string): Case[] {
  const weather = write([["get_weather", [["city", "Paris"]]]]);
  const both = write([
    ["get_weather", [["city", "Paris"]]],
    ["get_time", [["timezone", "Europe/Paris"]]],
  ]);
  return [
    {
      title: "plain text",
      output: "Paris is the capital of France.",
      expect: { content: "Paris is the capital of France." },
    },
    { title: "one call", output: weather, expect: { calls: [weatherCall] } },
    {
      title: "typed parameters (converted per the tools' schemas)",
      output: write([["get_weather", typedValues]]),
      expect: { calls: [{ name: "get_weather", args: typedArgs }] },
    },
    { title: "two parallel calls", output: both, expect: { calls: [weatherCall, timeCall] } },
    {
      title: "text before and after the calls",
      output: `Let me check.\n${both}\nDone.`,
      expect: { content: "Let me check.\nDone.", calls: [weatherCall, timeCall] },
    },
    {
      title: "text that only looks like a tag start",
      output: "Use a < b and <tool or <minimax or <seed: or <TOOL.",
      expect: { content: "Use a < b and <tool or <minimax or <seed: or <TOOL." },
    },
    {
      title: "half-written call at the end falls back to content",
      output: `Checking. ${halfWritten}`,
      expect: { content: `Checking. ${halfWritten}` },
      leaksAllowed: true,
    },
  ];
}

const qwenCall =
  (open: string, close: string, valueLines: boolean) => (calls: [string, [string, string][]][]) =>
    calls
      .map(([name, params]) => {
        const body = params
          .map(([k, v]) =>
            valueLines ? `<parameter=${k}>\n${v}\n</parameter>\n` : `<parameter=${k}>${v}</parameter>\n`,
          )
          .join("");
        return `${open}\n<function=${name}>\n${body}</function>\n${close}`;
      })
      .join("\n");

const glmCall = (newlines: boolean) => (calls: [string, [string, string][]][]) =>
  calls
    .map(([name, params]) => {
      const nl = newlines ? "\n" : "";
      const body = params
        .map(([k, v]) => `<arg_key>${k}</arg_key>${nl}<arg_value>${v}</arg_value>${nl}`)
        .join("");
      return `<tool_call>${name}${nl}${body}</tool_call>`;
    })
    .join("\n");

const invokeCall = (open: string, close: string, ns: string) => (calls: [string, [string, string][]][]) =>
  `${open}\n${calls
    .map(
      ([name, params]) =>
        `<${ns}invoke name="${name}">\n${params.map(([k, v]) => `<${ns}parameter name="${k}">${v}</${ns}parameter>\n`).join("")}</${ns}invoke>\n`,
    )
    .join("")}${close}`;

/** JSON-bodied formats take JSON values as they are (the typed case writes real JSON). */
function jsonValue(text: string): unknown {
  const values: Record<string, unknown> = Object.fromEntries(
    typedValues.map(([k], i) => [k, Object.values(typedArgs)[i]]),
  );
  const found = typedValues.find(([, v]) => v === text);
  return found ? values[found[0]] : text;
}
const jsonCallsOf = (calls: [string, [string, string][]][]) =>
  calls.map(([name, params]) => ({
    name,
    arguments: Object.fromEntries(params.map(([k, v]) => [k, jsonValue(v)])),
  }));

const suites: Record<string, Suite> = {
  qwen3_coder: {
    parser: { toolParser: "qwen3_coder", tools: TOOLS },
    cases: [
      ...familyCases(
        qwenCall("<tool_call>", "</tool_call>", true),
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
      ),
      {
        title: "multi-line string value keeps its inner lines",
        output:
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nline 1\nline 2\n</parameter>\n</function>\n</tool_call>",
        expect: { calls: [{ name: "get_weather", args: { city: "line 1\nline 2" } }] },
      },
      {
        title: "a call whose </tool_call> never came is still a call",
        output: "<tool_call>\n<function=get_time>\n</function>\n",
        expect: { calls: [{ name: "get_time", args: {} }] },
      },
      {
        title: "a forgotten </parameter> ends the value at the next parameter or </function> (as vLLM)",
        output:
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n3\n</function>\n</tool_call>",
        expect: { calls: [{ name: "get_weather", args: { city: "Paris", days: 3 } }] },
      },
      {
        title: "a function never closed falls back to content",
        output: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>",
        expect: {
          content: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>",
        },
        leaksAllowed: true,
      },
      {
        title: "a bare <function=…> without <tool_call> is a call too (as vLLM)",
        output:
          "Checking.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n<function=get_time>\n</function>\nDone.",
        expect: { content: "Checking.\nDone.", calls: [weatherCall, { name: "get_time", args: {} }] },
      },
      {
        title: "a half-written bare <function= at the end is content",
        output: "See <function=get_weather>\n<parameter=city>\nPa",
        expect: { content: "See <function=get_weather>\n<parameter=city>\nPa" },
        leaksAllowed: true,
      },
      {
        title: "hermes JSON inside <tool_call> is not this format: content",
        output: '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
        expect: { content: '<tool_call>{"name": "f", "arguments": {}}</tool_call>' },
        leaksAllowed: true,
      },
      {
        title: "a value not of its type stays a string",
        output:
          "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
        expect: { calls: [{ name: "get_weather", args: { days: "three" } }] },
      },
    ],
  },
  "qwen3_coder without tools": {
    parser: { toolParser: "qwen3_xml" },
    cases: [
      {
        title: "undeclared values: JSON when they parse, else strings",
        output:
          "<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n<parameter=s>\nhello\n</parameter>\n" +
          '<parameter=o>\n{"a": [1]}\n</parameter>\n<parameter=b>\ntrue\n</parameter>\n</function>\n</tool_call>',
        expect: { calls: [{ name: "f", args: { n: 3, s: "hello", o: { a: [1] }, b: true } }] },
      },
    ],
  },
  seed_oss: {
    parser: { toolParser: "seed_oss", tools: TOOLS },
    cases: familyCases(
      qwenCall("<seed:tool_call>", "</seed:tool_call>", false),
      "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n",
    ),
  },
  glm45: {
    parser: { toolParser: "glm45", tools: TOOLS },
    cases: [
      ...familyCases(glmCall(true), "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par"),
      {
        title: "a call without arguments",
        output: "<tool_call>get_time\n</tool_call>",
        expect: { calls: [{ name: "get_time", args: {} }] },
      },
      {
        title: "a key without its value falls back to content",
        output: "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>",
        expect: { content: "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>" },
        leaksAllowed: true,
      },
    ],
  },
  glm47: {
    parser: { toolParser: "glm47", tools: TOOLS },
    cases: familyCases(glmCall(false), "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par"),
  },
  minimax_m2: {
    parser: { toolParser: "minimax_m2", tools: TOOLS },
    cases: familyCases(
      invokeCall("<minimax:tool_call>", "</minimax:tool_call>", ""),
      '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n',
    ),
  },
  muse_glimmer: {
    parser: { toolParser: "muse_glimmer", tools: TOOLS },
    cases: familyCases(
      invokeCall("<atem:function_calls>", "</atem:function_calls>", "atem:"),
      '<atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter name="city">Par',
    ),
  },
  minimax: {
    parser: { toolParser: "minimax", tools: TOOLS },
    cases: familyCases(
      (calls) =>
        `<tool_calls>\n${jsonCallsOf(calls)
          .map((call) => `${JSON.stringify(call)}\n`)
          .join("")}</tool_calls>`,
      '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "Par',
    ),
  },
  nemotron_json: {
    parser: { toolParser: "nemotron_json", tools: TOOLS },
    cases: familyCases(
      (calls) => `<TOOLCALL>${JSON.stringify(jsonCallsOf(calls))}</TOOLCALL>`,
      '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris"}}',
    ),
  },
  minicpm5: {
    parser: { toolParser: "minicpm5", tools: TOOLS },
    cases: [
      ...familyCases(
        (calls) =>
          calls
            .map(
              ([name, params]) =>
                `<function name="${name}">${params.map(([k, v]) => `<param name="${k}">${v}</param>`).join("")}</function>`,
            )
            .join("\n"),
        '<function name="get_weather"><param name="city">Par',
      ),
      {
        title: "a CDATA value (the template wraps <, & and line breaks) holding </param>",
        output:
          '<function name="get_weather"><param name="code"><![CDATA[<a href="/x">hi</a> </param>\nx]]></param></function>',
        expect: { calls: [{ name: "get_weather", args: { code: '<a href="/x">hi</a> </param>\nx' } }] },
      },
      {
        title: "a call without parameters",
        output: '<function name="get_time"></function>',
        expect: { calls: [{ name: "get_time", args: {} }] },
      },
      {
        title: "an unclosed CDATA falls back to content",
        output: '<function name="get_weather"><param name="code"><![CDATA[x</param></function>',
        expect: { content: '<function name="get_weather"><param name="code"><![CDATA[x</param></function>' },
        leaksAllowed: true,
      },
    ],
  },
  "minicpm5 + qwen3 reasoning (MiniCPM5's prompt opens <think>)": {
    parser: { toolParser: "minicpm5", tools: TOOLS, reasoningParser: "qwen3", startsInThinking: true },
    cases: [
      {
        title: "reasoning, then a call",
        output:
          'I\'m thinking\n</think>\n\n<function name="get_weather"><param name="city">Paris</param></function>',
        expect: { reasoning: "I'm thinking", calls: [weatherCall] },
      },
    ],
  },
  hy_v3: {
    parser: { toolParser: "hy_v3", tools: TOOLS },
    cases: familyCases(
      (calls) =>
        `<tool_calls:opensource>\n${calls
          .map(
            ([name, params]) =>
              `<tool_call:opensource>${name}<tool_sep:opensource>\n${params
                .map(
                  ([k, v]) =>
                    `<arg_key:opensource>${k}</arg_key:opensource>\n<arg_value:opensource>${v}</arg_value:opensource>\n`,
                )
                .join("")}</tool_call:opensource>\n`,
          )
          .join("")}</tool_calls:opensource>`,
      "<tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n<arg_key:opensource>city",
    ),
  },
  minimax_m3: {
    parser: { toolParser: "minimax_m3", tools: TOOLS },
    cases: [
      ...familyCases(
        (calls) =>
          `${MM}<tool_call>\n${calls
            .map(
              ([name, params]) =>
                `${MM}<invoke name="${name}">${params.map(([k, v]) => `${MM}<${k}>${v}${MM}</${k}>`).join("")}${MM}</invoke>\n`,
            )
            .join("")}${MM}</tool_call>`,
        `${MM}<tool_call>\n${MM}<invoke name="get_weather">${MM}<city>Paris${MM}</city>`,
      ),
      {
        title: "nested elements: <item>s are an array, other keys an object",
        output:
          `${MM}<tool_call>\n${MM}<invoke name="get_weather">${MM}<tags>${MM}<item>a${MM}</item>${MM}<item>b${MM}</item>${MM}</tags>` +
          `${MM}<opts>${MM}<x>1${MM}</x>${MM}<y>${MM}<item>${MM}<item>2${MM}</item>${MM}</item>${MM}</y>${MM}</opts>${MM}</invoke>\n${MM}</tool_call>`,
        expect: { calls: [{ name: "get_weather", args: { tags: ["a", "b"], opts: { x: 1, y: [[2]] } } }] },
      },
      {
        title: "a mismatched close tag falls back to content",
        output: `${MM}<tool_call>\n${MM}<invoke name="get_weather">${MM}<city>Paris${MM}</town>${MM}</invoke>\n${MM}</tool_call>`,
        expect: {
          content: `${MM}<tool_call>\n${MM}<invoke name="get_weather">${MM}<city>Paris${MM}</town>${MM}</invoke>\n${MM}</tool_call>`,
        },
        leaksAllowed: true,
      },
    ],
  },
  kimi_k3: {
    parser: { toolParser: "kimi_k3", tools: TOOLS },
    cases: [
      ...familyCases(
        (calls) =>
          `<|open|>tools<|sep|>${calls
            .map(
              ([name, params], i) =>
                `<|open|>call tool="${name}" index="${i + 1}"<|sep|>${params
                  .map(([k, v]) => `<|open|>argument key="${k}"<|sep|>${v}<|close|>argument<|sep|>`)
                  .join("")}<|close|>call<|sep|>`,
            )
            .join("")}<|close|>tools<|sep|>`,
        '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city"<|sep|>Paris',
      ),
      {
        title: "type attributes, a JSON block, and the response tags dropped",
        output:
          "<|open|>response<|sep|>Sure.<|close|>response<|sep|><|open|>tools<|sep|>" +
          '<|open|>call tool="f" index="1"<|sep|><|open|>argument key="n" type="number"<|sep|>2.5<|close|>argument<|sep|>' +
          '<|open|>argument key="q" type="string"<|sep|>7<|close|>argument<|sep|><|close|>call<|sep|>' +
          '<|open|>call tool="g" index="2"<|sep|><|open|>json type="object"<|sep|>{"a": [1, "&"]}<|close|>json<|sep|><|close|>call<|sep|>' +
          "<|close|>tools<|sep|><|close|>message<|sep|>",
        expect: {
          content: "Sure.",
          calls: [
            { name: "f", args: { n: 2.5, q: "7" } },
            { name: "g", args: { a: [1, "&"] } },
          ],
        },
      },
    ],
  },
  solar_open: {
    parser: { toolParser: "solar_open", tools: TOOLS },
    cases: [
      ...familyCases(
        (calls) =>
          `<|tool_calls|>${jsonCallsOf(calls)
            .map(
              (call, i) =>
                `<|tool_call:begin|>abc${i}<|tool_call:name|>${call.name}<|tool_call:args|>${JSON.stringify(call.arguments)}<|tool_call:end|>`,
            )
            .join("")}<|calls|>`,
        '<|tool_call:begin|>abc<|tool_call:name|>get_weather<|tool_call:args|>{"city": "Par',
      ),
      {
        title: "the content markers are dropped",
        output: "<|content|>Paris.<|end|>",
        expect: { content: "Paris." },
      },
    ],
  },
  "qwen3_coder after reasoning": {
    parser: { reasoningParser: "qwen3", toolParser: "qwen3_coder", tools: TOOLS },
    cases: [
      {
        title: "markup inside <think> stays reasoning",
        output:
          "<think>\nMaybe <tool_call>\n<function=x>\n</function>\n</tool_call>\n</think>\n\n" +
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
        expect: {
          reasoning: "Maybe <tool_call>\n<function=x>\n</function>\n</tool_call>",
          calls: [weatherCall],
        },
      },
    ],
  },
};

runParserSuites(suites, MARKUP);

describe("XML tool parsers: streaming", () => {
  it("streams text before a qwen3_coder call and holds back a possible tag start", () => {
    const parser = createChatOutputParser({ toolParser: "qwen3_coder", newId: () => "call_x" });
    assert.deepEqual(parser.feed("Let me check. <tool_"), { content: "Let me check. " });
    assert.deepEqual(parser.feed("call>\n<function=get_time>\n"), {});
    assert.deepEqual(parser.feed("</function>\n</tool_call>"), {
      toolCalls: [{ index: 0, id: "call_x", name: "get_time", argumentsDelta: "{}" }],
    });
    assert.deepEqual(parser.end(), {});
  });
});

describe("XML tool parsers: convertParameter", () => {
  it("converts by type, keeps text that does not fit, and reads unions and type lists", () => {
    assert.equal(convertParameter("12", { type: "integer" }), 12);
    assert.equal(convertParameter("1.5", { type: "integer" }), "1.5");
    assert.equal(convertParameter("-2e3", { type: "number" }), -2000);
    assert.equal(convertParameter("TRUE", { type: "boolean" }), true);
    assert.equal(convertParameter("yes", { type: "boolean" }), "yes");
    assert.equal(convertParameter("null", { type: "string" }), "null");
    assert.equal(convertParameter("null", { type: ["string", "null"] }), null);
    assert.equal(convertParameter("7", { anyOf: [{ type: "integer" }, { type: "null" }] }), 7);
    assert.deepEqual(convertParameter("[1]", { type: "object" }), "[1]");
    assert.deepEqual(convertParameter("[1]", { type: "array" }), [1]);
    assert.equal(convertParameter("None", { type: "object" }), "None");
    assert.equal(convertParameter("null", undefined), null);
    assert.equal(convertParameter(" plain ", undefined), " plain ");
  });
});

const TEMPLATES = join(import.meta.dirname, "../../../native/build/llama.cpp/models/templates");
const template = (file: string) => readFileSync(join(TEMPLATES, file), "utf8");

describe("XML tool parsers: detection from the real templates", () => {
  const expected: Record<string, string | undefined> = {
    "Qwen3-Coder.jinja": "qwen3_coder",
    "Qwen3.5-4B.jinja": "qwen3_coder",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen3_coder",
    "StepFun3.5-Flash.jinja": "qwen3_coder",
    "ByteDance-Seed-OSS.jinja": "seed_oss",
    "GLM-4.6.jinja": "glm45",
    "GLM-4.7-Flash.jinja": "glm47",
    "poolside-Laguna-S-2.1.jinja": "glm47",
    "poolside-Laguna-XS-2.1.jinja": "glm45",
    "poolside-Laguna-XS.2.jinja": "glm45",
    "MiniMax-M1.jinja": "minimax",
    "MiniMax-M2.jinja": "minimax_m2",
    "MiniMax-M3.jinja": "minimax_m3",
    "tencent-Hy3.jinja": "hy_v3",
    "openbmb-MiniCPM5-1B.jinja": "minicpm5",
    "Kimi-K3.jinja": "kimi_k3",
    "upstage-Solar-Open-100B.jinja": "solar_open",
    "muse-glimmer.jinja": "muse_glimmer",
    "NVIDIA-Nemotron-Nano-v2.jinja": "nemotron_json",
    "unsloth-Apriel-1.5.jinja": "apriel",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "apriel",
    "Reka-Edge.jinja": "hermes",
    "MiMo-VL.jinja": "hermes",
    "Qwen-Qwen3-0.6B.jinja": "hermes",
    "HuggingFaceTB-SmolLM3-3B.jinja": undefined,
  };
  for (const [file, name] of Object.entries(expected)) {
    it(`${file} → ${name ?? "no tools"}`, () => assert.equal(detectToolParser(template(file)), name));
  }

  it("knows vLLM's aliases", () => {
    assert.equal(resolveToolParserName("qwen3_xml"), "qwen3_coder");
    assert.equal(resolveToolParserName("step3p5"), "qwen3_coder");
    assert.equal(resolveToolParserName("poolside_v1"), "glm47");
  });
});

describe("XML tool parsers: fuzz (seeded)", () => {
  const fragments = [
    "<tool_call>",
    "</tool_call>",
    "<tool",
    "<function=f>",
    "</function>",
    "<parameter=a>",
    "</parameter>",
    "<arg_key>a</arg_key>",
    "<arg_value>1</arg_value>",
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    '<invoke name="f">',
    "</invoke>",
    '<parameter name="a">',
    "<seed:tool_call>",
    "</seed:tool_call>",
    "<tool_calls>",
    "</tool_calls>",
    `${MM}<tool_call>`,
    `${MM}</tool_call>`,
    `${MM}<invoke name="f">`,
    `${MM}</invoke>`,
    `${MM}<a>`,
    `${MM}</a>`,
    "]<]mini",
    "<|open|>tools<|sep|>",
    "<|close|>tools<|sep|>",
    '<|open|>call tool="f"<|sep|>',
    "<|close|>call<|sep|>",
    "<|close|>response<|sep|>",
    "<|clo",
    "<|tool_call:begin|>",
    "<|tool_call:name|>f<|tool_call:args|>",
    "<|tool_call:end|>",
    "<|end|>",
    '<function name="f">',
    '<param name="a">',
    "</param>",
    "<![CDATA[",
    "]]>",
    '{"name": "f", "arguments": {"a": 1}}',
    "\n",
    " ",
    "f",
    "1",
    "hello",
  ];
  const parsers = [
    "qwen3_coder",
    "seed_oss",
    "glm45",
    "minimax_m2",
    "minimax_m3",
    "minimax",
    "muse_glimmer",
    "hy_v3",
    "kimi_k3",
    "solar_open",
    "nemotron_json",
    "minicpm5",
  ];
  let seed = 20261203;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x80000000;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

  it("any split gives the whole-text result, and text without calls is kept verbatim", () => {
    for (let iteration = 0; iteration < 3000; iteration++) {
      let output = "";
      for (let n = 1 + Math.floor(random() * 10); n > 0; n--) output += pick(fragments);
      const config = { toolParser: pick(parsers), tools: TOOLS };
      const whole = runParser(config, [output]);
      const chunks: string[] = [];
      for (let i = 0; i < output.length; ) {
        const length = 1 + Math.floor(random() * 5);
        chunks.push(output.slice(i, i + length));
        i += length;
      }
      assert.deepEqual(runParser(config, [...output]), whole, JSON.stringify({ config, output }));
      assert.deepEqual(runParser(config, chunks), whole, JSON.stringify({ config, chunks }));
      if (whole.toolCalls.length === 0 && !["kimi_k3", "solar_open"].includes(config.toolParser)) {
        assert.equal(whole.content ?? "", output, JSON.stringify({ config, output }));
      }
    }
  });
});

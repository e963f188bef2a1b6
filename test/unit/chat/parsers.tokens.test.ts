// The token-delimited, JSON and pythonic tool-call families (src/chat/toolParsers/tokenFormats.ts,
// functionary.ts, pythonic.ts, gemma4.ts): recorded outputs in each model's own format, each parsed whole,
// one character at a time and split at every boundary; and detection on the real chat templates.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  createToolParser,
  detectToolParser,
  resolveToolParserName,
  TOOL_PARSER_NAMES,
} from "../../../src/chat/toolParsers/index.ts";
import { callsFromPythonList } from "../../../src/chat/toolParsers/pythonic.ts";
import { runParser as run, runParserSuites, type Suite } from "../../helpers/parserSuite.ts";

const MARKUP = [
  "<｜tool▁calls▁begin｜>",
  "<｜tool▁call▁begin｜>",
  "<｜tool▁sep｜>",
  "<｜tool▁call▁end｜>",
  "<｜tool▁calls▁end｜>",
  "｜DSML｜",
  "<|tool_calls_section_begin|>",
  "<|tool_call_begin|>",
  "<|tool_call_argument_begin|>",
  "<|tool_call_end|>",
  "<|tool_calls_section_end|>",
  "<|tool_call_start|>",
  "<|tool_call|>",
  "<|tool_call>",
  "<tool_call|>",
  '<|"|>',
  "<function=",
  "</function>",
  ">>>",
  "functools",
  "<|START_ACTION|>",
  "<|END_ACTION|>",
  "<tool_calls>",
  "</tool_calls>",
  "<|tools_prefix|>",
  "<|tools_suffix|>",
  "<|role_sep|>",
  "<|message_sep|>",
  "<|python_start|>",
  "<|python_tag|>",
  "[TOOL_CALLS]",
  "[CALL_ID]",
  "[ARGS]",
];

const weatherCall = { name: "get_weather", args: { city: "Paris", unit: "celsius" } };
const timeCall = { name: "get_time", args: { timezone: "Europe/Paris" } };
const weatherArgs = '{"city": "Paris", "unit": "celsius"}';
const timeArgs = '{"timezone": "Europe/Paris"}';
const weatherJson = `{"name": "get_weather", "arguments": ${weatherArgs}}`;
const timeJson = `{"name": "get_time", "arguments": ${timeArgs}}`;

const dsV3 = (name: string, args: string) =>
  `<｜tool▁call▁begin｜>function<｜tool▁sep｜>${name}\n\`\`\`json\n${args}\n\`\`\`<｜tool▁call▁end｜>`;
const dsV31 = (name: string, args: string) =>
  `<｜tool▁call▁begin｜>${name}<｜tool▁sep｜>${args}<｜tool▁call▁end｜>`;
const dsml = (name: string, params: string) =>
  `<｜DSML｜invoke name="${name}">\n${params}</｜DSML｜invoke>\n`;
const dsmlParam = (key: string, value: string, isString: boolean) =>
  `<｜DSML｜parameter name="${key}" string="${isString}">${value}</｜DSML｜parameter>\n`;
const kimi = (name: string, index: number, args: string) =>
  `<|tool_call_begin|>functions.${name}:${index}<|tool_call_argument_begin|>${args}<|tool_call_end|>`;

const suites: Record<string, Suite> = {
  deepseek_v3: {
    parser: { toolParser: "deepseek_v3" },
    cases: [
      { title: "plain text", output: "Paris is in France.", expect: { content: "Paris is in France." } },
      {
        title: "one call",
        output: `<｜tool▁calls▁begin｜>${dsV3("get_weather", weatherArgs)}<｜tool▁calls▁end｜>`,
        expect: { calls: [weatherCall] },
      },
      {
        title: "two parallel calls",
        output: `<｜tool▁calls▁begin｜>${dsV3("get_weather", weatherArgs)}\n${dsV3("get_time", timeArgs)}<｜tool▁calls▁end｜>`,
        expect: { calls: [weatherCall, timeCall] },
      },
      {
        title: "text before and after the calls",
        output: `Let me check.<｜tool▁calls▁begin｜>${dsV3("get_weather", weatherArgs)}<｜tool▁calls▁end｜> Done.`,
        expect: { content: "Let me check.Done.", calls: [weatherCall] },
      },
      {
        title: "the V3.1 form is read too",
        output: `<｜tool▁calls▁begin｜>${dsV31("get_time", timeArgs)}<｜tool▁calls▁end｜>`,
        expect: { calls: [timeCall] },
      },
      {
        title: "stopped before the section end",
        output: `<｜tool▁calls▁begin｜>${dsV3("get_weather", weatherArgs)}`,
        expect: { calls: [weatherCall] },
      },
      {
        title: "half-written call at the end is content",
        output:
          '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Par',
        expect: {
          content: '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Par',
        },
        leaksAllowed: true,
      },
    ],
  },
  deepseek_v31: {
    parser: { toolParser: "deepseek_v31" },
    cases: [
      { title: "plain text", output: "Bonjour.", expect: { content: "Bonjour." } },
      {
        title: "two parallel calls with text before",
        output: `Checking.<｜tool▁calls▁begin｜>${dsV31("get_weather", weatherArgs)}${dsV31("get_time", timeArgs)}<｜tool▁calls▁end｜>`,
        expect: { content: "Checking.", calls: [weatherCall, timeCall] },
      },
      {
        title: "malformed arguments fall back to content",
        output: "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{city: Paris}<｜tool▁call▁end｜>",
        expect: { content: "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{city: Paris}<｜tool▁call▁end｜>" },
        leaksAllowed: true,
      },
    ],
  },
  deepseek_v32: {
    parser: { toolParser: "deepseek_v32" },
    cases: [
      { title: "plain text", output: "No tools needed.", expect: { content: "No tools needed." } },
      {
        title: "one call (V3.2 function_calls)",
        output: `\n\n<｜DSML｜function_calls>\n${dsml("get_weather", dsmlParam("city", "Paris", true) + dsmlParam("unit", "celsius", true))}</｜DSML｜function_calls>`,
        expect: { calls: [weatherCall] },
      },
      {
        title: "two calls with text before (V4 tool_calls), a non-string parameter",
        output: `Sure.\n\n<｜DSML｜tool_calls>\n${dsml("get_time", dsmlParam("timezone", "Europe/Paris", true))}${dsml("roll", dsmlParam("sides", "6", false) + dsmlParam("dice", '["a", 2]', false))}</｜DSML｜tool_calls>`,
        expect: {
          content: "Sure.\n\n",
          calls: [timeCall, { name: "roll", args: { sides: 6, dice: ["a", 2] } }],
        },
      },
      {
        title: "half-written invoke is content",
        output:
          '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Par',
        expect: {
          content: '<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Par',
        },
        leaksAllowed: true,
      },
    ],
  },
  kimi_k2: {
    parser: { toolParser: "kimi_k2" },
    cases: [
      { title: "plain text", output: "Hello!", expect: { content: "Hello!" } },
      {
        title: "one call",
        output: `<|tool_calls_section_begin|>${kimi("get_weather", 0, weatherArgs)}<|tool_calls_section_end|>`,
        expect: { calls: [weatherCall] },
      },
      {
        title: "two parallel calls, text before",
        output: `I'll check both.<|tool_calls_section_begin|>${kimi("get_weather", 0, weatherArgs)}${kimi("get_time", 1, timeArgs)}<|tool_calls_section_end|>`,
        expect: { content: "I'll check both.", calls: [weatherCall, timeCall] },
      },
      {
        title: "bad arguments fall back to content",
        output:
          "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1]<|tool_call_end|>",
        expect: {
          content: "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1]<|tool_call_end|>",
        },
        leaksAllowed: true,
      },
      {
        title: "a tag prefix at the end is content",
        output: "See <|tool_ca",
        expect: { content: "See <|tool_ca" },
      },
    ],
  },
  pythonic: {
    parser: { toolParser: "pythonic" },
    cases: [
      { title: "plain text", output: "It is sunny [today].", expect: { content: "It is sunny [today]." } },
      {
        title: "one call",
        output: "[get_weather(city='Paris', unit=\"celsius\")]",
        expect: { calls: [weatherCall] },
      },
      {
        title: "two parallel calls with every literal kind",
        output:
          "\n[get_time(timezone='Europe/Paris'), f(a=1, b=-2.5, c=True, d=None, e=[1, 'x'], g={'k': (1, 2)}, h='it\\'s')]",
        expect: {
          calls: [
            timeCall,
            {
              name: "f",
              args: { a: 1, b: -2.5, c: true, d: null, e: [1, "x"], g: { k: [1, 2] }, h: "it's" },
            },
          ],
        },
      },
      {
        title: "Llama 4's python_start wrapper, text after",
        output: "<|python_start|>[get_time(timezone='Europe/Paris')]<|python_end|> ok",
        expect: { content: "ok", calls: [timeCall] },
      },
      {
        title: "positional arguments are content",
        output: "[get_weather('Paris')]",
        expect: { content: "[get_weather('Paris')]" },
      },
      {
        title: "half-written list is content",
        output: "[get_weather(city='Par",
        expect: { content: "[get_weather(city='Par" },
      },
      {
        title: "a list after text is content",
        output: "Call: [f(a=1)]",
        expect: { content: "Call: [f(a=1)]" },
      },
    ],
  },
  lfm2: {
    parser: { toolParser: "lfm2" },
    cases: [
      { title: "plain text", output: "Hi there.", expect: { content: "Hi there." } },
      {
        title: "one call",
        output: '<|tool_call_start|>[get_weather(city="Paris", unit="celsius")]<|tool_call_end|>',
        expect: { calls: [weatherCall] },
      },
      {
        title: "two calls, text around",
        output:
          'Checking.<|tool_call_start|>[get_weather(city="Paris", unit="celsius"), get_time(timezone="Europe/Paris")]<|tool_call_end|>Done.',
        expect: { content: "Checking.Done.", calls: [weatherCall, timeCall] },
      },
      {
        title: "a JSON list is accepted",
        output: `<|tool_call_start|>[${timeJson}]<|tool_call_end|>`,
        expect: { calls: [timeCall] },
      },
      {
        title: "malformed call is content",
        output: "<|tool_call_start|>[get_weather(city=Paris)]<|tool_call_end|>",
        expect: { content: "<|tool_call_start|>[get_weather(city=Paris)]<|tool_call_end|>" },
        leaksAllowed: true,
      },
    ],
  },
  granite: {
    parser: { toolParser: "granite" },
    cases: [
      { title: "plain text", output: "I can help.", expect: { content: "I can help." } },
      { title: "one call", output: `<|tool_call|>[${weatherJson}]`, expect: { calls: [weatherCall] } },
      {
        title: "two calls, text before and after",
        output: `Sure.<|tool_call|>[${weatherJson}, ${timeJson}]\nDone.`,
        expect: { content: "Sure.Done.", calls: [weatherCall, timeCall] },
      },
      {
        title: "half-written list is content",
        output: `<|tool_call|>[${weatherJson}, {"name": "get_ti`,
        expect: { content: `<|tool_call|>[${weatherJson}, {"name": "get_ti` },
        leaksAllowed: true,
      },
    ],
  },
  gemma4: {
    parser: { toolParser: "gemma4" },
    cases: [
      { title: "plain text", output: "Hello, world!", expect: { content: "Hello, world!" } },
      {
        title: "one call",
        output: '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,unit:<|"|>celsius<|"|>}<tool_call|>',
        expect: { calls: [weatherCall] },
      },
      {
        title: "two calls after text, nested values",
        output:
          'Hello, world!\n<|tool_call>call:get_time{timezone:<|"|>Europe/Paris<|"|>}<tool_call|><|tool_call>call:set{config:{theme:<|"|>dark<|"|>,count:3},todos:[<|"|>a, b<|"|>],on:false,x:null,n:1.5e10}<tool_call|>',
        expect: {
          content: "Hello, world!\n",
          calls: [
            timeCall,
            {
              name: "set",
              args: { config: { theme: "dark", count: 3 }, todos: ["a, b"], on: false, x: null, n: 1.5e10 },
            },
          ],
        },
      },
      {
        title: "half-written call is content",
        output: '<|tool_call>call:get_weather{city:<|"|>Par',
        expect: { content: '<|tool_call>call:get_weather{city:<|"|>Par' },
        leaksAllowed: true,
      },
    ],
  },
  functionary_v3_1: {
    parser: { toolParser: "functionary_v3_1" },
    cases: [
      { title: "plain text", output: "Nothing to call.", expect: { content: "Nothing to call." } },
      {
        title: "two calls, text before",
        output: `Let me see.<function=get_weather>${weatherArgs}</function><function=get_time>${timeArgs}</function>`,
        expect: { content: "Let me see.", calls: [weatherCall, timeCall] },
      },
      {
        title: "code after <|python_tag|> is a python call",
        output: "Computing.<|python_tag|>print(6 * 7)\n",
        expect: { content: "Computing.", calls: [{ name: "python", args: { code: "print(6 * 7)" } }] },
      },
      {
        title: "half-written call is content",
        output: '<function=get_weather>{"city": "Pa',
        expect: { content: '<function=get_weather>{"city": "Pa' },
        leaksAllowed: true,
      },
    ],
  },
  functionary_v3_2: {
    parser: { toolParser: "functionary_v3_2" },
    cases: [
      { title: "text to the user", output: "all\nHello there!", expect: { content: "Hello there!" } },
      { title: "one call", output: `get_weather\n${weatherArgs}`, expect: { calls: [weatherCall] } },
      {
        title: "text, then two calls",
        output: `all\nChecking.\n>>>get_weather\n${weatherArgs}\n>>>get_time\n${timeArgs}`,
        expect: { content: "Checking.\n", calls: [weatherCall, timeCall] },
      },
      {
        title: "a first line that is no recipient is content",
        output: "Hello there, how are you?",
        expect: { content: "Hello there, how are you?" },
      },
      {
        title: "half-written arguments are content",
        output: 'get_weather\n{"city": "Pa',
        expect: { content: 'get_weather\n{"city": "Pa' },
      },
    ],
  },
  firefunction_v2: {
    parser: { toolParser: "firefunction_v2" },
    cases: [
      {
        title: "plain text",
        output: "Use functools.partial here.",
        expect: { content: "Use functools.partial here." },
        leaksAllowed: true,
      },
      { title: "one call", output: ` functools[${weatherJson}]`, expect: { calls: [weatherCall] } },
      {
        title: "two calls after text",
        output: `Sure. functools[${weatherJson}, ${timeJson}]`,
        expect: { content: "Sure. ", calls: [weatherCall, timeCall] },
      },
      {
        title: "half-written list is content",
        output: ' functools[{"name": "get_weather"',
        expect: { content: ' functools[{"name": "get_weather"' },
        leaksAllowed: true,
      },
    ],
  },
  command_r: {
    parser: { toolParser: "command_r" },
    cases: [
      { title: "plain text", output: "Here is the answer.", expect: { content: "Here is the answer." } },
      {
        title: "R7B action list, two calls",
        output: `<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": ${weatherArgs}},\n    {"tool_call_id": "1", "tool_name": "get_time", "parameters": ${timeArgs}}\n]<|END_ACTION|>`,
        expect: { calls: [weatherCall, timeCall] },
      },
      {
        title: "Command R+ Action: block after text",
        output: `I will look it up.\nAction:\n\`\`\`json\n[\n    {\n        "tool_name": "get_time",\n        "parameters": ${timeArgs}\n    }\n]\n\`\`\``,
        expect: { content: "I will look it up.\n", calls: [timeCall] },
      },
      {
        title: "half-written action is content",
        output: '<|START_ACTION|>[{"tool_name": "get_weather", "parame',
        expect: { content: '<|START_ACTION|>[{"tool_name": "get_weather", "parame' },
        leaksAllowed: true,
      },
    ],
  },
  apriel: {
    parser: { toolParser: "apriel" },
    cases: [
      { title: "plain text", output: "All good.", expect: { content: "All good." } },
      {
        title: "one call",
        output: `\n<tool_calls>[${weatherJson}]</tool_calls>`,
        expect: { calls: [weatherCall] },
      },
      {
        title: "two calls, text around",
        output: `Checking.\n<tool_calls>[${weatherJson}, ${timeJson}]</tool_calls>\nDone.`,
        expect: { content: "Checking.\nDone.", calls: [weatherCall, timeCall] },
      },
      {
        title: "JSON lines (MiniMax-M1)",
        output: `<tool_calls>\n${weatherJson}\n${timeJson}\n</tool_calls>`,
        expect: { calls: [weatherCall, timeCall] },
      },
      {
        title: "malformed list is content",
        output: "<tool_calls>[{bad}]</tool_calls>",
        expect: { content: "<tool_calls>[{bad}]</tool_calls>" },
        leaksAllowed: true,
      },
    ],
  },
  apertus: {
    parser: { toolParser: "apertus" },
    cases: [
      { title: "plain text", output: "Hi.", expect: { content: "Hi." } },
      {
        title: "two calls after text",
        output: `Sure.<|tools_prefix|>[{"get_weather": ${weatherArgs}}, {"get_time": ${timeArgs}}]<|tools_suffix|>`,
        expect: { content: "Sure.", calls: [weatherCall, timeCall] },
      },
      {
        title: "half-written list is content",
        output: '<|tools_prefix|>[{"get_weather": {"city"',
        expect: { content: '<|tools_prefix|>[{"get_weather": {"city"' },
        leaksAllowed: true,
      },
    ],
  },
  gigachat3: {
    parser: { toolParser: "gigachat3" },
    cases: [
      { title: "plain text", output: "Привет!", expect: { content: "Привет!" } },
      {
        title: "one call",
        output: `<|message_sep|>\n\nfunction call<|role_sep|>\n${weatherJson}`,
        expect: { calls: [weatherCall] },
      },
      {
        title: "text before a call",
        output: `Сейчас проверю.<|message_sep|>\n\nfunction call<|role_sep|>\n${timeJson}`,
        expect: { content: "Сейчас проверю.", calls: [timeCall] },
      },
      {
        title: "half-written call is content",
        output: '<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "get_weather", "argu',
        expect: { content: 'function call<|role_sep|>\n{"name": "get_weather", "argu' },
        leaksAllowed: true,
      },
    ],
  },
  "mistral (each template's form)": {
    parser: { toolParser: "mistral" },
    cases: [
      {
        title: "Mistral Small 3.2: name[CALL_ID]id[ARGS], two calls after text",
        output: `Checking.[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]${weatherArgs}[TOOL_CALLS]get_time[CALL_ID]000000002[ARGS]${timeArgs}`,
        expect: { content: "Checking.", calls: [weatherCall, timeCall] },
      },
      {
        title: "Ministral 3 / Devstral: name[ARGS]",
        output: `[TOOL_CALLS]get_time[ARGS]${timeArgs}`,
        expect: { calls: [timeCall] },
      },
      {
        title: "Mistral Nemo: a JSON list",
        output: `[TOOL_CALLS][${weatherJson}, ${timeJson}]`,
        expect: { calls: [weatherCall, timeCall] },
      },
      {
        title: "a bad call id falls back to content",
        output: `[TOOL_CALLS]get_time[CALL_ID]no way[ARGS]${timeArgs}`,
        expect: { content: `[TOOL_CALLS]get_time[CALL_ID]no way[ARGS]${timeArgs}` },
        leaksAllowed: true,
      },
    ],
  },
  "deepseek_r1 reasoning + deepseek_v3 calls": {
    parser: { reasoningParser: "deepseek_r1", toolParser: "deepseek_v3" },
    cases: [
      {
        title: "thinking, then a call",
        output: `I need the weather.\n</think>\n\n<｜tool▁calls▁begin｜>${dsV3("get_weather", weatherArgs)}<｜tool▁calls▁end｜>`,
        expect: { reasoning: "I need the weather.", calls: [weatherCall] },
      },
    ],
  },
};

runParserSuites(suites, MARKUP);

describe("token-family parser registry", () => {
  it("creates every listed parser, and the aliases resolve", () => {
    for (const name of TOOL_PARSER_NAMES) assert.ok(createToolParser(name));
    assert.equal(resolveToolParserName("deepseek_v4"), "deepseek_v32");
    assert.equal(resolveToolParserName("llama4_pythonic"), "pythonic");
    assert.equal(resolveToolParserName("lfm2.5"), "lfm2");
    assert.equal(resolveToolParserName("cohere"), "command_r");
  });

  it("streams text before a call at once and emits the call when it closes", () => {
    const parser = createToolParser("kimi_k2", { newId: () => "call_x" });
    assert.deepEqual(parser.feed("One moment.<|tool_calls_sec"), { content: "One moment." });
    assert.deepEqual(
      parser.feed('tion_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a":'),
      {},
    );
    assert.deepEqual(parser.feed(" 1}<|tool_call_end|>"), {
      toolCalls: [{ index: 0, id: "call_x", name: "f", argumentsDelta: '{"a":1}' }],
    });
    assert.deepEqual(parser.end(), {});
  });

  it("the pythonic reader evaluates nothing", () => {
    assert.equal(callsFromPythonList("[f(a=__import__('os'))]"), undefined);
    assert.equal(callsFromPythonList("[f(a=1+1)]"), undefined);
    assert.equal(callsFromPythonList("[]"), undefined);
  });
});

const TEMPLATES = join(import.meta.dirname, "../../../native/build/llama.cpp/models/templates");

/** Each template of the token / JSON / pythonic families and the parser its text must select. */
const DETECTIONS: Record<string, string | undefined> = {
  "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek_v3",
  "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek_v3",
  "llama-cpp-deepseek-r1.jinja": "deepseek_v3",
  "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek_v31",
  "deepseek-ai-DeepSeek-V3.2.jinja": "deepseek_v32",
  "deepseek-ai-DeepSeek-V4.jinja": "deepseek_v32",
  "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": "deepseek_v32",
  "Kimi-K2-Instruct.jinja": "kimi_k2",
  "Kimi-K2-Thinking.jinja": "kimi_k2",
  "moonshotai-Kimi-K2.jinja": "kimi_k2",
  "LFM2-8B-A1B.jinja": "lfm2",
  "LFM2.5-8B-A1B.jinja": "lfm2",
  "LFM2.5-Instruct.jinja": "lfm2",
  "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite",
  "ibm-granite-granite-4.0.jinja": "hermes",
  "ibm-granite-granite-4.1.jinja": "hermes",
  "google-gemma-4-31B-it.jinja": "gemma4",
  "google-gemma-4-31B-it-interleaved.jinja": "gemma4",
  "meetkai-functionary-medium-v3.1.jinja": "functionary_v3_1",
  "meetkai-functionary-medium-v3.2.jinja": "functionary_v3_2",
  "fireworks-ai-llama-3-firefunction-v2.jinja": "firefunction_v2",
  "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "command_r",
  "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command_r",
  "Cohere2MoE.jinja": "command_r",
  "unsloth-Apriel-1.5.jinja": "apriel",
  "Apriel-1.6-15b-Thinker-fixed.jinja": "apriel",
  "MiniMax-M1.jinja": "minimax",
  "Apertus-8B-Instruct.jinja": "apertus",
  "GigaChat3-10B-A1.8B.jinja": "gigachat3",
  "GigaChat3.1-10B-A1.8B.jinja": "gigachat3",
  "Bielik-11B-v3.0-Instruct.jinja": "hermes",
  "microsoft-Phi-3.5-mini-instruct.jinja": undefined,
  "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral",
  "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral",
  "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
  "unsloth-mistral-Devstral-Small-2507.jinja": "mistral",
  "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3_json",
  "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3_json",
  "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3_json",
};

describe("token-family detection on the real templates", () => {
  for (const [file, expected] of Object.entries(DETECTIONS)) {
    it(`${file} → ${expected ?? "no tools"}`, () => {
      assert.equal(detectToolParser(readFileSync(join(TEMPLATES, file), "utf8")), expected);
    });
  }
});

describe("token-family parser fuzz (seeded)", () => {
  const fragments = [
    ...MARKUP,
    "<｜tool▁call",
    "<|tool_",
    "function",
    "get_weather",
    "call:f",
    "functions.f:0",
    "Action:\n```json",
    "```",
    "all\n",
    "f\n",
    "[f(a=1)]",
    "(",
    ")",
    "=",
    "'",
    "\n",
    " ",
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    "hi",
    '{"a": 1}',
    weatherJson,
    `[${timeJson}]`,
    '{"tool_name": "f", "parameters": {}}',
  ];
  const names = TOOL_PARSER_NAMES.filter((name) => !["hermes", "llama3_json", "generic"].includes(name));
  let seed = 20261203;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x80000000;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

  it("any split gives the whole-text result, and nothing throws", () => {
    for (let iteration = 0; iteration < 3000; iteration++) {
      let output = "";
      for (let n = 1 + Math.floor(random() * 8); n > 0; n--) output += pick(fragments);
      const toolParser = pick(names);
      const whole = run({ toolParser }, [output]);
      const chunks: string[] = [];
      for (let i = 0; i < output.length; ) {
        const length = 1 + Math.floor(random() * 5);
        chunks.push(output.slice(i, i + length));
        i += length;
      }
      assert.deepEqual(run({ toolParser }, [...output]), whole, JSON.stringify({ toolParser, output }));
      assert.deepEqual(run({ toolParser }, chunks), whole, JSON.stringify({ toolParser, chunks }));
    }
  });
});

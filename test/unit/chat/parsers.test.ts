// The shared suite of every output parser: recorded model outputs, each parsed whole, one character at a
// time, and split in two at every boundary, which must all give the same result.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ChatOutputParserOptions, createChatOutputParser } from "../../../src/chat/outputParser.ts";
import { runParser as run, runParserSuites, type Suite } from "../../helpers/parserSuite.ts";

const MARKUP = [
  "<tool_call>",
  "</tool_call>",
  "<|python_tag|>",
  "[TOOL_CALLS]",
  "[ARGS]",
  "<think>",
  "</think>",
];

const weather = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}';
const time = '{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}';
const weatherCall = { name: "get_weather", args: { city: "Paris", unit: "celsius" } };
const timeCall = { name: "get_time", args: { timezone: "Europe/Paris" } };

const suites: Record<string, Suite> = {
  hermes: {
    parser: { toolParser: "hermes" },
    cases: [
      {
        title: "plain text",
        output: "The capital of France is Paris.",
        expect: { content: "The capital of France is Paris." },
      },
      {
        title: "one call",
        output: `<tool_call>\n${weather}\n</tool_call>`,
        expect: { calls: [weatherCall] },
      },
      {
        title: "two calls",
        output: `<tool_call>\n${weather}\n</tool_call>\n<tool_call>\n${time}\n</tool_call>`,
        expect: { calls: [weatherCall, timeCall] },
      },
      {
        title: "text before call",
        output: `Let me check the weather.\n<tool_call>\n${weather}\n</tool_call>`,
        expect: { content: "Let me check the weather.\n", calls: [weatherCall] },
      },
      {
        title: "text after a call",
        output: `<tool_call>\n${weather}\n</tool_call>\n\nDone.`,
        expect: { content: "Done.", calls: [weatherCall] },
      },
      {
        title: "whitespace before a first call is dropped",
        output: `\n\n<tool_call>\n${weather}\n</tool_call>`,
        expect: { calls: [weatherCall] },
      },
      { title: "whitespace-only output is kept", output: "\n \n", expect: { content: "\n \n" } },
      {
        title: "call not closed before the end",
        output: `<tool_call>\n${weather}\n`,
        expect: { calls: [weatherCall] },
      },
      {
        title: "malformed JSON falls back to content",
        output: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>',
        expect: {
          content: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>',
        },
        leaksAllowed: true,
      },
      {
        title: "call without a name falls back to content",
        output: '<tool_call>{"arguments": {}}</tool_call>',
        expect: { content: '<tool_call>{"arguments": {}}</tool_call>' },
        leaksAllowed: true,
      },
      {
        title: "text that only looks like a tag start",
        output: "Use a < b and <tool or <tool_c.",
        expect: { content: "Use a < b and <tool or <tool_c." },
      },
      {
        title: "arguments given as a JSON string",
        output:
          '<tool_call>{"name": "get_time", "arguments": "{\\"timezone\\": \\"Europe/Paris\\"}"}</tool_call>',
        expect: { calls: [timeCall] },
      },
    ],
  },
  llama3_json: {
    parser: { toolParser: "llama3_json" },
    cases: [
      { title: "plain text", output: "Paris is the capital.", expect: { content: "Paris is the capital." } },
      {
        title: "one call",
        output: '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}',
        expect: { calls: [weatherCall] },
      },
      {
        title: "a call after blank lines",
        output: '\n\n{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}',
        expect: { calls: [weatherCall] },
      },
      {
        title: "one call after <|python_tag|>",
        output: '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}',
        expect: { calls: [weatherCall] },
      },
      {
        title: "two calls separated by ;",
        output: `{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}; ${time}`,
        expect: { calls: [weatherCall, timeCall] },
      },
      {
        title: "text before a tagged call",
        output: `I'll look that up.<|python_tag|>${weather}`,
        expect: { content: "I'll look that up.", calls: [weatherCall] },
      },
      {
        title: "text before a call on its own line",
        output: `Sure.\n  {"type": "function", "name": "get_time", "parameters": {"timezone": "Europe/Paris"}}`,
        expect: { content: "Sure.\n  ", calls: [timeCall] },
      },
      {
        title: "malformed JSON call falls back to content",
        output: '{"name": "get_weather", "parameters": {"city": "Paris"}',
        expect: { content: '{"name": "get_weather", "parameters": {"city": "Paris"}' },
      },
      {
        title: "a JSON answer is content",
        output: '{"answer": 42}\nThat is all.',
        expect: { content: '{"answer": 42}\nThat is all.' },
      },
      {
        title: "python code after the tag is content",
        output: '<|python_tag|>brave_search.call(query="weather Paris")',
        expect: { content: '<|python_tag|>brave_search.call(query="weather Paris")' },
        leaksAllowed: true,
      },
      {
        title: "braces inside a line are content",
        output: "Write {name} where the name goes.",
        expect: { content: "Write {name} where the name goes." },
      },
    ],
  },
  mistral: {
    parser: { toolParser: "mistral" },
    cases: [
      {
        title: "plain text",
        output: "Bonjour! Paris is sunny.",
        expect: { content: "Bonjour! Paris is sunny." },
      },
      { title: "one call", output: `[TOOL_CALLS][${weather}]`, expect: { calls: [weatherCall] } },
      {
        title: "two calls",
        output: `[TOOL_CALLS] [${weather}, ${time}]`,
        expect: { calls: [weatherCall, timeCall] },
      },
      {
        title: "two calls in the [ARGS] form",
        output:
          '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "celsius"}[TOOL_CALLS]get_time[ARGS]{"timezone": "Europe/Paris"}',
        expect: { calls: [weatherCall, timeCall] },
      },
      {
        title: "text before call",
        output: `Checking the weather.[TOOL_CALLS][${weather}]`,
        expect: { content: "Checking the weather.", calls: [weatherCall] },
      },
      {
        title: "malformed JSON call falls back to content",
        output: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}]',
        expect: { content: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}]' },
        leaksAllowed: true,
      },
      {
        title: "a tag followed by prose falls back to content",
        output: "[TOOL_CALLS] Sorry, no tool fits.",
        expect: { content: "[TOOL_CALLS] Sorry, no tool fits." },
        leaksAllowed: true,
      },
      {
        title: "an unfinished tag at the end is content",
        output: "See [TOOL_CALL",
        expect: { content: "See [TOOL_CALL" },
      },
    ],
  },
  generic: {
    parser: { toolParser: "generic" },
    cases: [
      { title: "plain text", output: "No tool needed.", expect: { content: "No tool needed." } },
      { title: "one call", output: weather, expect: { calls: [weatherCall] } },
      { title: "two calls", output: `  [${weather},${time}]\n`, expect: { calls: [weatherCall, timeCall] } },
      {
        title: "llama.cpp's tool_calls wrapper",
        output: `{"tool_calls": [${time}]}`,
        expect: { calls: [timeCall] },
      },
      {
        title: "llama.cpp's response wrapper",
        output: '{"response": "Hi there"}',
        expect: { content: "Hi there" },
      },
      {
        title: "text before JSON is content",
        output: `Here you go: ${weather}`,
        expect: { content: `Here you go: ${weather}` },
      },
      {
        title: "malformed JSON call falls back to content",
        output: '{"name": "get_weather", "arguments": {"city": "Paris"',
        expect: { content: '{"name": "get_weather", "arguments": {"city": "Paris"' },
      },
      { title: "an empty output", output: "", expect: {} },
    ],
  },
  qwen3: {
    parser: { reasoningParser: "qwen3", toolParser: "hermes" },
    cases: [
      {
        title: "thinking + answer",
        output: "<think>\nThe user greets me. I should greet back.\n</think>\n\nHello! How can I help?",
        expect: { reasoning: "The user greets me. I should greet back.", content: "Hello! How can I help?" },
      },
      {
        title: "thinking + call",
        output: `<think>\nI need the weather tool.\n</think>\n\n<tool_call>\n${weather}\n</tool_call>`,
        expect: { reasoning: "I need the weather tool.", calls: [weatherCall] },
      },
      {
        title: "thinking + text + two calls",
        output: `<think>\nTwo tools.\n\nBoth now.\n</think>\n\nOne moment.\n<tool_call>\n${weather}\n</tool_call>\n<tool_call>\n${time}\n</tool_call>`,
        expect: {
          reasoning: "Two tools.\n\nBoth now.",
          content: "One moment.\n",
          calls: [weatherCall, timeCall],
        },
      },
      { title: "no thinking", output: "Just an answer.", expect: { content: "Just an answer." } },
      {
        title: "empty thinking block",
        output: "<think>\n\n</think>\n\nHi.",
        expect: { content: "Hi." },
      },
      {
        title: "thinking cut off by the token limit",
        output: "<think>\nStill thinking about </thi",
        expect: { reasoning: "Still thinking about </thi" },
      },
      {
        title: "a <think> that is not at the start is content",
        output: "I like <think> tags.",
        expect: { content: "I like <think> tags." },
        leaksAllowed: true,
      },
      {
        title: "thinking + malformed call",
        output: "<think>ok</think><tool_call>{bad}</tool_call>",
        expect: { reasoning: "ok", content: "<tool_call>{bad}</tool_call>" },
        leaksAllowed: true,
      },
    ],
  },
  deepseek_r1: {
    parser: { reasoningParser: "deepseek_r1" },
    cases: [
      {
        title: "prompt opened <think>: thinking + answer",
        output: "Okay, 2 + 2 is 4.\n</think>\n\nThe answer is 4.",
        expect: { reasoning: "Okay, 2 + 2 is 4.", content: "The answer is 4." },
      },
      {
        title: "the model writes <think> anyway",
        output: "<think>\nHmm.\n</think>\n\n4.",
        expect: { reasoning: "Hmm.", content: "4." },
      },
      { title: "never closed", output: "Thinking forever", expect: { reasoning: "Thinking forever" } },
    ],
  },
};

runParserSuites(suites, MARKUP);

describe("output parser streaming", () => {
  it("streams text before a call before the call closes", () => {
    const parser = createChatOutputParser({ toolParser: "hermes", newId: () => "call_x" });
    assert.deepEqual(parser.feed("Let me check. <tool"), { content: "Let me check. " });
    assert.deepEqual(parser.feed('_call>{"name": "f", "arguments": {}'), {});
    assert.deepEqual(parser.feed("}</tool_call>"), {
      toolCalls: [{ index: 0, id: "call_x", name: "f", argumentsDelta: "{}" }],
    });
    assert.deepEqual(parser.end(), {});
  });

  it("streams reasoning as it comes, holding only trailing whitespace and a possible tag", () => {
    const parser = createChatOutputParser({ reasoningParser: "qwen3" });
    assert.deepEqual(parser.feed("<think>\nStep one"), { reasoning: "Step one" });
    assert.equal(parser.inReasoning(), true);
    assert.deepEqual(parser.feed(".\n</th"), { reasoning: "." });
    assert.deepEqual(parser.feed("ink>\n\nAnswer"), { content: "Answer" });
    assert.equal(parser.inReasoning(), false);
  });
});

describe("output parser fuzz (seeded)", () => {
  const fragments = [
    "<tool_call>",
    "</tool_call>",
    "<tool",
    "<|python_tag|>",
    "<|py",
    "[TOOL_CALLS]",
    "[TOOL",
    "[ARGS]",
    "<think>",
    "</think>",
    "</thi",
    "\n",
    " ",
    ";",
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    "hello",
    "f",
    '{"name": "f", "arguments": {"a": 1}}',
    '{"name": "g", "parameters": {}}',
  ];
  const configs: ChatOutputParserOptions[] = [
    { toolParser: "hermes" },
    { toolParser: "llama3_json" },
    { toolParser: "mistral" },
    { toolParser: "generic" },
    { reasoningParser: "qwen3", toolParser: "hermes" },
    { reasoningParser: "deepseek_r1", toolParser: "llama3_json" },
  ];
  let seed = 20240601;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x80000000;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

  it("any split gives the whole-text result, and text without calls is kept verbatim", () => {
    for (let iteration = 0; iteration < 3000; iteration++) {
      let output = "";
      for (let n = 1 + Math.floor(random() * 8); n > 0; n--) output += pick(fragments);
      const config = pick(configs);
      const whole = run(config, [output]);
      const chunks: string[] = [];
      for (let i = 0; i < output.length; ) {
        const length = 1 + Math.floor(random() * 5);
        chunks.push(output.slice(i, i + length));
        i += length;
      }
      assert.deepEqual(run(config, [...output]), whole, JSON.stringify({ config, output }));
      assert.deepEqual(run(config, chunks), whole, JSON.stringify({ config, chunks }));
      if (!config.reasoningParser && whole.toolCalls.length === 0) assert.equal(whole.content ?? "", output);
    }
  });
});

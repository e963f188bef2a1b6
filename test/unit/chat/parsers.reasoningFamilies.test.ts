// The reasoning families of issue 26's second round (kimi_k2, kimi_k3, solar_open, granite, apriel,
// apertus) on the shared parser suite (whole, one character per feed and split at every boundary must
// agree; malformed markup stays content), then on the real templates of llama.cpp's collection: each
// template renders an assistant turn with its reasoning, and the parsers detected from that template read
// the turn (what the model writes after the generation prompt) back into reasoning, content and calls.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { normalizeMessages } from "../../../src/chat/messages.ts";
import {
  createReasoningParser,
  detectReasoningParser,
  promptThinkingState,
  thinkingMarkup,
} from "../../../src/chat/reasoningParsers/index.ts";
import { renderChatTemplate } from "../../../src/chat/renderChatTemplate.ts";
import { detectToolParser } from "../../../src/chat/toolParsers/index.ts";
import { projectRoot } from "../../../src/paths.ts";
import { chatMessagesSchema } from "../../../src/protocol/messages.ts";
import type { ChatTool } from "../../../src/protocol/tools.ts";
import { type Expected, runParser, runParserSuites, summarize } from "../../helpers/parserSuite.ts";

const TOOLS: ChatTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];
const weather = { name: "get_weather", args: { city: "Paris" } };
const K3 = (tag: string) => `<|open|>${tag}<|sep|>`;
const K3c = (tag: string) => `<|close|>${tag}<|sep|>`;

runParserSuites(
  {
    "qwen3, thinking optional (issue 26: whitespace before <think>)": {
      parser: { reasoningParser: "qwen3" },
      cases: [
        {
          title: "a line break before <think>",
          output: "\n<think>\nHm.\n</think>\n\nYes.",
          expect: { reasoning: "Hm.", content: "Yes." },
        },
        {
          title: "spaces and line breaks before <think>",
          output: " \n \n<think>Hm.</think>Yes.",
          expect: { reasoning: "Hm.", content: "Yes." },
        },
        {
          title: "whitespace then an answer without a block stays content as written",
          output: "\n Yes.",
          expect: { content: "\n Yes." },
        },
      ],
    },
    kimi_k2: {
      parser: { reasoningParser: "kimi_k2" },
      cases: [
        {
          title: "<think> block then the answer",
          output: "<think>Let me see.</think>The answer.",
          expect: { reasoning: "Let me see.", content: "The answer." },
        },
        {
          title: "no <think>: reasoning from the start (vLLM's kimi_k2)",
          output: "Let me see.</think>The answer.",
          expect: { reasoning: "Let me see.", content: "The answer." },
        },
        {
          title: "leading whitespace before <think>",
          output: "\n <think>Hm.</think>Yes.",
          expect: { reasoning: "Hm.", content: "Yes." },
        },
        {
          title: "cut off inside the block",
          output: "<think>Still </thi",
          expect: { reasoning: "Still </thi" },
        },
      ],
    },
    "kimi_k2 + kimi_k2 tools": {
      parser: { reasoningParser: "kimi_k2", toolParser: "kimi_k2", tools: TOOLS },
      cases: [
        {
          title: "a tool-call section ends the reasoning without </think>",
          output:
            'Need the weather.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>',
          expect: { reasoning: "Need the weather.", calls: [weather] },
        },
      ],
    },
    kimi_k3: {
      parser: { reasoningParser: "kimi_k3", startsInThinking: true },
      cases: [
        {
          title: "think element then the response element (prompt opened the think element)",
          output: `Let me see.${K3c("think")}${K3("response")}The answer.${K3c("response")}${K3c("message")}`,
          expect: { reasoning: "Let me see.", content: "The answer." },
        },
        {
          title: "the think opener written again is swallowed",
          output: `${K3("think")}Hm.${K3c("think")}${K3("response")}Yes.${K3c("response")}`,
          expect: { reasoning: "Hm.", content: "Yes." },
        },
        {
          title: "cut off inside the think element",
          output: "Still <|close|>thi",
          expect: { reasoning: "Still <|close|>thi" },
        },
      ],
    },
    "kimi_k3 thinking off (prompt opened the response element)": {
      parser: { reasoningParser: "kimi_k3" },
      cases: [
        {
          title: "the response's closing tags are dropped",
          output: `Plain answer.${K3c("response")}${K3c("message")}`,
          expect: { content: "Plain answer." },
        },
        {
          title: "a lone <|close|> that is no tag stays content",
          output: "a <|close|> b",
          expect: { content: "a <|close|> b" },
          leaksAllowed: true,
        },
      ],
    },
    "kimi_k3 + kimi_k3 tools": {
      parser: { reasoningParser: "kimi_k3", toolParser: "kimi_k3", tools: TOOLS, startsInThinking: true },
      cases: [
        {
          title: "reasoning, content and a call",
          output: `Need it.${K3c("think")}${K3("response")}Checking.${K3c("response")}${K3("tools")}<|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Paris${K3c("argument")}${K3c("call")}${K3c("tools")}${K3c("message")}`,
          expect: { reasoning: "Need it.", content: "Checking.", calls: [weather] },
        },
      ],
    },
    solar_open: {
      parser: { reasoningParser: "solar_open" },
      cases: [
        {
          title: "<|think|> block, the next turn header, the content",
          output: "<|think|>Let me see.<|end|><|begin|>assistant<|content|>The answer.<|end|>",
          expect: { reasoning: "Let me see.", content: "The answer." },
        },
        {
          title: "no thinking (low effort): the content marker is dropped",
          output: "<|content|>Quick answer.",
          expect: { content: "Quick answer." },
        },
        {
          title: "cut off inside the block",
          output: "<|think|>Still <|en",
          expect: { reasoning: "Still <|en" },
        },
        {
          title: "text that is no marker stays content",
          output: "x <|begin|>user y",
          expect: { content: "x <|begin|>user y" },
          leaksAllowed: true,
        },
      ],
    },
    "solar_open + solar_open tools": {
      parser: { reasoningParser: "solar_open", toolParser: "solar_open", tools: TOOLS },
      cases: [
        {
          title: "reasoning then a call",
          output:
            '<|think|>Need it.<|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>get_weather<|tool_call:args|>{"city": "Paris"}<|tool_call:end|><|calls|>',
          expect: { reasoning: "Need it.", calls: [weather] },
        },
      ],
    },
    granite: {
      parser: { reasoningParser: "granite" },
      cases: [
        {
          title: "Granite 3.2 phrases (vLLM's granite)",
          output: "Here is my thought process: Let me see. Here is my response: The answer.",
          expect: { reasoning: "Let me see.", content: "The answer." },
        },
        {
          title: "Here's spelling",
          output: "Here's my thought process:\nHm.\nHere's my response:\nYes.",
          expect: { reasoning: "Hm.", content: "Yes." },
        },
        {
          title: "Granite 3.3 <think> and <response> tags",
          output: "<think>Let me see.</think><response>The answer.</response>",
          expect: { reasoning: "Let me see.", content: "The answer." },
        },
        {
          title: "an answer that starts like the phrase is content",
          output: "Here is the answer.",
          expect: { content: "Here is the answer." },
        },
        {
          title: "thought process without a response: reasoning",
          output: "Here is my thought process: still going",
          expect: { reasoning: "still going" },
        },
      ],
    },
    apriel: {
      parser: { reasoningParser: "apriel" },
      cases: [
        {
          title: "reasoning from the start up to [BEGIN FINAL RESPONSE] (Apriel 1.6's prompt opened it)",
          output: "I'm\nthinking\n[BEGIN FINAL RESPONSE]\nHello!\n[END FINAL RESPONSE]\n<|end|>",
          expect: { reasoning: "I'm\nthinking", content: "Hello!\n\n" },
        },
        {
          title: "Apriel 1.5 writes the reasoning header itself",
          output: "Here are my reasoning steps:\nSteps.\n[BEGIN FINAL RESPONSE]\nDone.",
          expect: { reasoning: "Steps.", content: "Done." },
        },
        {
          title: "cut off before the final response",
          output: "Thinking [BEGIN FINAL",
          expect: { reasoning: "Thinking [BEGIN FINAL" },
        },
      ],
    },
    "apriel + apriel tools": {
      parser: { reasoningParser: "apriel", toolParser: "apriel", tools: TOOLS },
      cases: [
        {
          title: "reasoning, then a call after the final-response marker",
          output:
            'Need it.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>',
          expect: { reasoning: "Need it.", calls: [weather] },
        },
      ],
    },
    apertus: {
      parser: { reasoningParser: "apertus" },
      cases: [
        {
          title: "inner block then the answer",
          output: "<|inner_prefix|>Let me see.<|inner_suffix|>The answer.",
          expect: { reasoning: "Let me see.", content: "The answer." },
        },
        { title: "no block", output: "Just an answer.", expect: { content: "Just an answer." } },
      ],
    },
  },
  [
    "<think>",
    "</think>",
    "<|tool_calls_section_begin|>",
    "<|sep|>",
    "<|think|>",
    "<|end|>",
    "<|content|>",
    "<|begin|>",
    "<response>",
    "</response>",
    "[BEGIN FINAL RESPONSE]",
    "[END FINAL RESPONSE]",
    "<|inner_prefix|>",
    "<|inner_suffix|>",
    "Here is my",
  ],
);

const dir = join(projectRoot, "native/build/llama.cpp/models/templates");
const present = existsSync(dir);
const template = (file: string) => readFileSync(join(dir, file), "utf8");

/** Renders `messages` with `file` and `tools` (defaults to {@link TOOLS}). */
function render(
  file: string,
  messages: unknown[],
  addGenerationPrompt: boolean,
  kwargs = {},
  tools: ChatTool[] | null = TOOLS,
): string {
  return renderChatTemplate(template(file), {
    messages: normalizeMessages(chatMessagesSchema.parse(messages)),
    tools,
    addGenerationPrompt,
    bosToken: "<s>",
    eosToken: "</s>",
    kwargs,
  });
}

/**
 * What the model writes after the generation prompt for the assistant turn `assistant`, as the template
 * renders that turn in the history: the turn minus the part it shares with the generation prompt, cut
 * at the first of `stops` (end-of-turn tokens, which end generation and never reach the parsers).
 */
function modelOutput(file: string, assistant: unknown, stops: readonly string[], kwargs = {}) {
  const user = [{ role: "user", content: "Weather in Paris?" }];
  const base = render(file, user, false, kwargs);
  const prompt = render(file, user, true, kwargs);
  const full = render(file, [...user, assistant], false, kwargs);
  assert.ok(full.startsWith(base) && prompt.startsWith(base), file);
  const turn = full.slice(base.length);
  const opening = prompt.slice(base.length);
  let shared = 0;
  while (shared < turn.length && turn[shared] === opening[shared]) shared++;
  let output = turn.slice(shared);
  for (const stop of stops) {
    const at = output.indexOf(stop);
    if (at >= 0) output = output.slice(0, at);
  }
  return { prompt, output };
}

const callOf = (name: string, args: Record<string, unknown>) => ({
  id: "call_1",
  type: "function",
  function: { name, arguments: JSON.stringify(args) },
});

describe("reasoning families on their real templates", { skip: present ? false : `no ${dir}` }, () => {
  const cases: {
    file: string;
    reasoning: string;
    tool: string;
    assistant: Record<string, unknown>;
    stops: string[];
    kwargs?: Record<string, unknown>;
    expect: Expected;
  }[] = [
    {
      // Kimi-K2 Thinking keeps the reasoning of the turns after the last plain answer (a tool-call turn).
      file: "Kimi-K2-Thinking.jinja",
      reasoning: "kimi_k2",
      tool: "kimi_k2",
      assistant: {
        role: "assistant",
        content: "Checking.",
        reasoning_content: "Need the weather.",
        tool_calls: [callOf("get_weather", { city: "Paris" })],
      },
      stops: ["<|im_end|>"],
      expect: { reasoning: "Need the weather.", content: "Checking.", calls: [weather] },
    },
    {
      file: "Kimi-K3.jinja",
      reasoning: "kimi_k3",
      tool: "kimi_k3",
      assistant: {
        role: "assistant",
        content: "Checking.",
        reasoning_content: "Need the weather.",
        tool_calls: [callOf("get_weather", { city: "Paris" })],
      },
      stops: ["<|end_of_msg|>"],
      expect: { reasoning: "Need the weather.", content: "Checking.", calls: [weather] },
    },
    {
      file: "Kimi-K3.jinja",
      reasoning: "kimi_k3",
      tool: "kimi_k3",
      assistant: { role: "assistant", content: "Sunny in Paris.", reasoning_content: "Easy." },
      stops: ["<|end_of_msg|>"],
      expect: { reasoning: "Easy.", content: "Sunny in Paris." },
    },
    {
      // thinking off: the generation prompt opens the response element, the turn has no think element.
      file: "Kimi-K3.jinja",
      reasoning: "kimi_k3",
      tool: "kimi_k3",
      assistant: { role: "assistant", content: "Sunny in Paris." },
      stops: ["<|end_of_msg|>"],
      kwargs: { thinking: false },
      expect: { content: "Sunny in Paris." },
    },
    {
      file: "upstage-Solar-Open-100B.jinja",
      reasoning: "solar_open",
      tool: "solar_open",
      assistant: {
        role: "assistant",
        content: null,
        reasoning: "Need the weather.",
        tool_calls: [callOf("get_weather", { city: "Paris" })],
      },
      stops: ["<|calls|>", "<|flush|>"],
      expect: { reasoning: "Need the weather.", calls: [weather] },
    },
    {
      file: "upstage-Solar-Open-100B.jinja",
      reasoning: "solar_open",
      tool: "solar_open",
      assistant: { role: "assistant", content: "Sunny in Paris.", reasoning: "Easy." },
      stops: ["<|flush|>"],
      expect: { reasoning: "Easy.", content: "Sunny in Paris." },
    },
    {
      // Apriel 1.6's generation prompt ends "Here are my reasoning steps:\n": the output starts inside.
      file: "Apriel-1.6-15b-Thinker-fixed.jinja",
      reasoning: "apriel",
      tool: "apriel",
      assistant: {
        role: "assistant",
        content: "Checking.",
        reasoning_content: "Need the weather.",
        tool_calls: [callOf("get_weather", { city: "Paris" })],
      },
      stops: ["<|end|>"],
      expect: { reasoning: "Need the weather.", content: "Checking.\n", calls: [weather] },
    },
    {
      // Apriel 1.5 renders no reasoning of its own: the turn holds what its system prompt asks for.
      file: "unsloth-Apriel-1.5.jinja",
      reasoning: "apriel",
      tool: "apriel",
      assistant: {
        role: "assistant",
        content: "Here are my reasoning steps:\nEasy.\n[BEGIN FINAL RESPONSE]\nSunny.\n[END FINAL RESPONSE]",
      },
      stops: ["<|end|>"],
      expect: { reasoning: "Easy.", content: "Sunny.\n\n" },
    },
    {
      // MiniCPM5: `<think>` (qwen3) and its own `<function name=…><param name=…>` calls (minicpm5).
      file: "openbmb-MiniCPM5-1B.jinja",
      reasoning: "qwen3",
      tool: "minicpm5",
      assistant: {
        role: "assistant",
        content: "Checking.",
        reasoning_content: "Need the weather.",
        tool_calls: [callOf("get_weather", { city: "Paris" })],
      },
      stops: ["<|im_end|>"],
      expect: { reasoning: "Need the weather.", content: "Checking.\n", calls: [weather] },
    },
    {
      // Granite 3.3 renders no reasoning either: with `thinking` its system prompt asks for
      // `<think></think>` and `<response></response>`, which the turn holds here.
      file: "ibm-granite-granite-3.3-2B-Instruct.jinja",
      reasoning: "granite",
      tool: "granite",
      assistant: { role: "assistant", content: "<think>Easy.</think><response>Sunny.</response>" },
      stops: ["<|end_of_text|>"],
      kwargs: { thinking: true },
      expect: { reasoning: "Easy.", content: "Sunny." },
    },
  ];

  for (const { file, reasoning, tool, assistant, stops, kwargs, expect } of cases) {
    it(`${file}: ${JSON.stringify(expect).slice(0, 60)}`, () => {
      const text = template(file);
      assert.equal(detectReasoningParser(text), reasoning);
      assert.equal(detectToolParser(text), tool);
      const { prompt, output } = modelOutput(file, assistant, stops, kwargs);
      const state = promptThinkingState(prompt, thinkingMarkup(reasoning));
      const options = {
        reasoningParser: reasoning,
        toolParser: tool,
        tools: TOOLS,
        ...(state === undefined ? {} : { startsInThinking: state === "open" }),
        thinkingClosed: state === "closed",
      };
      const whole = runParser(options, [output]);
      assert.deepEqual(summarize(whole), expect, JSON.stringify(output));
      assert.deepEqual(runParser(options, [...output]), whole, "one character per feed");
    });
  }

  it("Granite 3.3's thinking prompt (without tools) names the tags the granite parser reads", () => {
    const prompt = render(
      "ibm-granite-granite-3.3-2B-Instruct.jinja",
      [{ role: "user", content: "Hi" }],
      true,
      { thinking: true },
      null,
    );
    assert.ok(prompt.includes("<think></think>") && prompt.includes("<response></response>"));
  });

  it("Apertus's template writes the inner block the apertus parser reads", () => {
    assert.equal(detectReasoningParser(template("Apertus-8B-Instruct.jinja")), "apertus");
    assert.ok(template("Apertus-8B-Instruct.jinja").includes("'<|inner_prefix|>'"));
  });

  it("Kimi-K2 Instruct (no thinking) gets no reasoning parser; the Thinking template does", () => {
    assert.equal(detectReasoningParser(template("moonshotai-Kimi-K2.jinja")), undefined);
    assert.equal(detectReasoningParser(template("Kimi-K2-Instruct.jinja")), undefined);
  });

  it("the markers of Kimi K3 and Apertus are rendered from control tokens", () => {
    assert.equal(thinkingMarkup("kimi_k3").specialTokens, true);
    assert.equal(thinkingMarkup("apertus").specialTokens, true);
    assert.equal(createReasoningParser("kimi_k2").inReasoning(), true);
    assert.equal(createReasoningParser("granite").inReasoning(), false);
  });
});

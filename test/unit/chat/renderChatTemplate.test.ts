import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { readGgufFileInfo } from "node-llama-cpp";
import { normalizeMessages } from "../../../src/chat/messages.ts";
import { detectReasoningParser, promptOpensThinking } from "../../../src/chat/reasoningParsers/index.ts";
import {
  CHATML_FALLBACK_TEMPLATE,
  promptStartsWithBos,
  type RenderChatTemplateContext,
  renderChatTemplate,
} from "../../../src/chat/renderChatTemplate.ts";
import { detectToolParser } from "../../../src/chat/toolParsers/index.ts";
import { ApiError } from "../../../src/errors.ts";
import { projectRoot, sharedModelsDir } from "../../../src/paths.ts";
import { chatMessagesSchema } from "../../../src/protocol/messages.ts";
import type { ChatTool } from "../../../src/protocol/tools.ts";

const fixture = (name: string) =>
  readFileSync(join(projectRoot, "test/fixtures/templates", `${name}.jinja`), "utf8");

/** The shared conversation: system, user, assistant with a tool call, tool result, user. */
const conversation = normalizeMessages(
  chatMessagesSchema.parse([
    { role: "system", content: "You are a weather bot." },
    { role: "user", content: "What's the weather in Paris?" },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id: "call_abc123",
          type: "function",
          function: { name: "get_weather", arguments: '{"city":"Paris"}' },
        },
      ],
    },
    { role: "tool", tool_call_id: "call_abc123", content: '{"temperature": 18, "sky": "cloudy"}' },
    { role: "user", content: "Thanks! And tomorrow?" },
  ]),
);

const tools: ChatTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

const base: RenderChatTemplateContext = {
  messages: conversation,
  tools,
  addGenerationPrompt: true,
  bosToken: "<s>",
  eosToken: "</s>",
};

const TOOL_RESULT = '{"temperature": 18, "sky": "cloudy"}';
const TOOLS_JSON =
  '{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}';
const QWEN_TOOLS_BLOCK =
  "# Tools\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
  `${TOOLS_JSON}\n</tools>\n\n` +
  "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
  '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n';
const QWEN_TURNS =
  "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n" +
  '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
  `<|im_start|>user\n<tool_response>\n${TOOL_RESULT}\n</tool_response><|im_end|>\n` +
  "<|im_start|>user\nThanks! And tomorrow?<|im_end|>\n<|im_start|>assistant\n";

const expected: Record<string, string> = {
  chatml:
    "<|im_start|>system\nYou are a weather bot.<|im_end|>\n" +
    "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n" +
    "<|im_start|>assistant\n<|im_end|>\n" +
    `<|im_start|>tool\n${TOOL_RESULT}<|im_end|>\n` +
    "<|im_start|>user\nThanks! And tomorrow?<|im_end|>\n<|im_start|>assistant\n",
  llama3:
    "<s><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n\n" +
    'You have access to the following functions. To call a function, respond with JSON in the format {"name": function name, "parameters": dictionary of argument name and its value}.\n\n' +
    `${JSON.stringify(tools[0], null, 4)}\n\n` +
    "You are a weather bot.<|eot_id|>" +
    "<|start_header_id|>user<|end_header_id|>\n\nWhat's the weather in Paris?<|eot_id|>" +
    '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>' +
    `<|start_header_id|>ipython<|end_header_id|>\n\n${TOOL_RESULT}<|eot_id|>` +
    "<|start_header_id|>user<|end_header_id|>\n\nThanks! And tomorrow?<|eot_id|>" +
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
  "qwen2.5": `<|im_start|>system\nYou are a weather bot.\n\n${QWEN_TOOLS_BLOCK}${QWEN_TURNS}`,
  qwen3: `<|im_start|>system\nYou are a weather bot.\n\n${QWEN_TOOLS_BLOCK}${QWEN_TURNS}`,
  mistral:
    "<s>[INST] What's the weather in Paris?[/INST]" +
    '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_abc123"}]</s>' +
    `[TOOL_RESULTS] {"content": ${JSON.stringify(TOOL_RESULT)}, "call_id": "call_abc123"}[/TOOL_RESULTS]` +
    `[AVAILABLE_TOOLS] [${TOOLS_JSON}][/AVAILABLE_TOOLS]` +
    "[INST] You are a weather bot.\n\nThanks! And tomorrow?[/INST]",
  phi3:
    "<|system|>\nYou are a weather bot.<|end|>\n<|user|>\nWhat's the weather in Paris?<|end|>\n" +
    "<|assistant|>\n<|end|>\n<|user|>\nThanks! And tomorrow?<|end|>\n<|assistant|>\n",
  phi4:
    "<|im_start|>system<|im_sep|>You are a weather bot.<|im_end|>" +
    "<|im_start|>user<|im_sep|>What's the weather in Paris?<|im_end|>" +
    "<|im_start|>assistant<|im_sep|><|im_end|>" +
    "<|im_start|>user<|im_sep|>Thanks! And tomorrow?<|im_end|><|im_start|>assistant<|im_sep|>",
  "deepseek-r1":
    "<s>You are a weather bot.<｜User｜>What's the weather in Paris?<｜Assistant｜><｜end▁of▁sentence｜>" +
    "<｜User｜>Thanks! And tomorrow?<｜Assistant｜><think>\n",
};

const detected: Record<string, [string | undefined, string | undefined]> = {
  chatml: [undefined, undefined],
  llama3: ["llama3_json", undefined],
  "qwen2.5": ["hermes", undefined],
  qwen3: ["hermes", "qwen3"],
  mistral: ["mistral", undefined],
  phi3: [undefined, undefined],
  phi4: [undefined, undefined],
  gemma: [undefined, undefined],
  "deepseek-r1": [undefined, "deepseek_r1"],
};

function assertApiError(fn: () => unknown, status: number, param: string, message: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof ApiError);
    assert.equal(error.status, status);
    assert.equal(error.param, param);
    assert.match(error.message, message);
    return true;
  });
}

describe("renderChatTemplate: fixtures with system, user, tool call, tool result, user", () => {
  for (const [name, prompt] of Object.entries(expected)) {
    it(name, () => {
      assert.equal(renderChatTemplate(fixture(name), base), prompt);
    });
  }

  it("gemma, which raises on tool turns, gets the calls and results as text, system merged, roles alternating", () => {
    const prompt = renderChatTemplate(fixture("gemma"), base);
    assert.equal(
      prompt,
      "<s><start_of_turn>user\nYou are a weather bot.\n\nWhat's the weather in Paris?<end_of_turn>\n" +
        '<start_of_turn>model\n{"tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"},"id":"call_abc123"}]}<end_of_turn>\n' +
        `<start_of_turn>user\n${JSON.stringify({ tool_response: { content: TOOL_RESULT, tool: "get_weather", tool_call_id: "call_abc123" } })}` +
        "\n\nThanks! And tomorrow?<end_of_turn>\n<start_of_turn>model\n",
    );
  });

  it("gemma renders an alternating conversation, system text prefixed to the first user turn", () => {
    const messages = normalizeMessages([
      { role: "system", content: "Be brief." },
      { role: "user", content: " Hi " },
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "Weather?" },
    ]);
    assert.equal(
      renderChatTemplate(fixture("gemma"), { ...base, messages }),
      "<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n" +
        "<start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\n",
    );
  });

  it("detects each fixture's tool and reasoning parsers", () => {
    for (const [name, [tool, reasoning]] of Object.entries(detected)) {
      assert.equal(detectToolParser(fixture(name)), tool, name);
      assert.equal(detectReasoningParser(fixture(name)), reasoning, name);
    }
    assert.equal(detectToolParser(CHATML_FALLBACK_TEMPLATE), undefined);
  });
});

describe("renderChatTemplate: variables and options", () => {
  it("the fallback ChatML template renders like the chatml fixture", () => {
    assert.equal(renderChatTemplate(CHATML_FALLBACK_TEMPLATE, base), expected.chatml);
  });

  it("passes tools = none when there are none, so `tools is not none` templates skip them", () => {
    const prompt = renderChatTemplate(fixture("llama3"), { ...base, tools: [] });
    assert.ok(prompt.startsWith("<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date"));
    assert.ok(!prompt.includes("ipython\nCutting"));
  });

  it("spreads chat_template_kwargs: Qwen3 enable_thinking false closes the think block", () => {
    const prompt = renderChatTemplate(fixture("qwen3"), { ...base, kwargs: { enable_thinking: false } });
    assert.ok(prompt.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    assert.equal(promptOpensThinking(prompt), false);
    assert.equal(promptOpensThinking(renderChatTemplate(fixture("deepseek-r1"), base)), true);
  });

  it("our variables win over same-named kwargs", () => {
    const prompt = renderChatTemplate(fixture("chatml"), {
      ...base,
      kwargs: { add_generation_prompt: false },
    });
    assert.ok(prompt.endsWith("<|im_start|>assistant\n"));
  });

  it("without a generation prompt", () => {
    assert.equal(
      renderChatTemplate(fixture("phi3"), { ...base, addGenerationPrompt: false }),
      expected.phi3?.replace(/<\|assistant\|>\n$/, "</s>"),
    );
  });

  it("continue_final_message cuts after the final message's content", () => {
    const messages = normalizeMessages([
      { role: "user", content: "Weather?" },
      { role: "assistant", content: "It is sunny and " },
    ]);
    const ctx = { ...base, messages, addGenerationPrompt: false, continueFinalMessage: true };
    assert.equal(
      renderChatTemplate(fixture("chatml"), ctx),
      "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\nIt is sunny and ",
    );
    // Gemma trims the content, so the cut falls after the trimmed text.
    assert.equal(
      renderChatTemplate(fixture("gemma"), ctx),
      "<s><start_of_turn>user\nWeather?<end_of_turn>\n<start_of_turn>model\nIt is sunny and",
    );
  });

  it("continue_final_message with add_generation_prompt is a 400", () => {
    assertApiError(
      () => renderChatTemplate(fixture("chatml"), { ...base, continueFinalMessage: true }),
      400,
      "continue_final_message",
      /Cannot set both/,
    );
  });

  it("a template that does not parse is a 400", () => {
    assertApiError(() => renderChatTemplate("{{ messages", base), 400, "chat_template", /does not parse/);
  });

  it("renders the same text from the cached template", () => {
    const template = fixture("qwen3");
    assert.equal(renderChatTemplate(template, base), renderChatTemplate(template, base));
  });

  it("promptStartsWithBos says when the template wrote the BOS itself", () => {
    assert.equal(promptStartsWithBos(renderChatTemplate(fixture("llama3"), base), "<s>"), true);
    assert.equal(promptStartsWithBos(renderChatTemplate(fixture("chatml"), base), "<s>"), false);
    assert.equal(promptStartsWithBos("anything", ""), false);
  });
});

const qwen2Path = join(sharedModelsDir, "ggml-vocab-qwen2.gguf");

describe("renderChatTemplate: the real Qwen2 template from GGUF metadata", {
  skip: !existsSync(qwen2Path),
}, () => {
  it("renders the shared conversation", async () => {
    const info = await readGgufFileInfo(qwen2Path, { readTensorInfo: false, logWarnings: false });
    const template = info.metadata.tokenizer?.chat_template;
    assert.equal(typeof template, "string");
    assert.equal(
      renderChatTemplate(template ?? "", base),
      "<|im_start|>system\nYou are a weather bot.<|im_end|>\n" +
        "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n" +
        "<|im_start|>assistant\n<|im_end|>\n" +
        `<|im_start|>tool\n${TOOL_RESULT}<|im_end|>\n` +
        "<|im_start|>user\nThanks! And tomorrow?<|im_end|>\n<|im_start|>assistant\n",
    );
    const noSystem = renderChatTemplate(template ?? "", { ...base, messages: conversation.slice(1, 2) });
    assert.equal(
      noSystem,
      "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n" +
        "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n<|im_start|>assistant\n",
    );
    assert.equal(detectToolParser(template ?? ""), undefined);
  });
});

describe("renderChatTemplate: tool-call arguments that are not a JSON object", () => {
  const qwen3Coder = join(projectRoot, "native/build/llama.cpp/models/templates/Qwen3-Coder.jinja");
  const history = (args: string) =>
    normalizeMessages(
      chatMessagesSchema.parse([
        { role: "user", content: "Weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: args } }],
        },
        { role: "tool", tool_call_id: "c1", content: "sunny" },
      ]),
    );
  const ctx = (args: string): RenderChatTemplateContext => ({
    messages: history(args),
    addGenerationPrompt: true,
    bosToken: "",
    eosToken: "<|im_end|>",
  });

  it("names the field when a template that iterates the arguments fails on text arguments", {
    skip: existsSync(qwen3Coder) ? false : "native/build/llama.cpp is not there (npm ci builds it)",
  }, () => {
    const template = readFileSync(qwen3Coder, "utf8");
    assert.match(
      renderChatTemplate(template, ctx('{"city": "Paris"}')),
      /<parameter=city>\nParis\n<\/parameter>/,
    );
    assert.throws(
      () => renderChatTemplate(template, ctx("city=Paris")),
      (error: unknown) =>
        error instanceof ApiError &&
        error.status === 400 &&
        error.param === "messages[1].tool_calls[0].function.arguments" &&
        /is not a JSON object/.test(error.message),
    );
  });

  it("a template that prints the arguments as text renders them unchanged", () => {
    const rendered = renderChatTemplate(fixture("qwen2.5"), ctx("city=Paris"));
    assert.match(rendered, /city=Paris/);
  });
});

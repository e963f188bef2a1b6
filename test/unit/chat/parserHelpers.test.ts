import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createChatOutputParser } from "../../../src/chat/outputParser.ts";
import { mergeDeltas, OutputAccumulator, toOpenAIToolCallDelta } from "../../../src/chat/parserDelta.ts";
import {
  createReasoningParser,
  detectReasoningParser,
  promptOpensThinking,
  thinkingBudgetClose,
} from "../../../src/chat/reasoningParsers/index.ts";
import { jinjaCode, partialTagSuffix, scanJsonValueEnd } from "../../../src/chat/textScan.ts";
import {
  createToolParser,
  detectToolParser,
  HermesToolParser,
  newToolCallId,
  resolveToolParserName,
} from "../../../src/chat/toolParsers/index.ts";

describe("textScan", () => {
  it("partialTagSuffix finds the longest held-back tag start", () => {
    assert.equal(partialTagSuffix("Hi <tool_", ["<tool_call>"]), 6);
    assert.equal(partialTagSuffix("Hi <", ["<tool_call>", "<|python_tag|>"]), 1);
    assert.equal(partialTagSuffix("Hi <tool_call>", ["<tool_call>"]), 0);
    assert.equal(partialTagSuffix("plain", ["<tool_call>"]), 0);
  });

  it("scanJsonValueEnd honours strings and stops at a mismatch", () => {
    assert.equal(scanJsonValueEnd('{"a": "}{"} tail', 0), 11);
    assert.equal(scanJsonValueEnd('[{"a": "\\"]"}]', 0), 14);
    assert.equal(scanJsonValueEnd('{"a": [1, 2}', 0), 12);
    assert.equal(scanJsonValueEnd('{"a": {', 0), -1);
  });

  it("jinjaCode drops comments and prose", () => {
    assert.equal(jinjaCode("{# tools #}Tools here {{ tools }} {% if x %}"), "{{ tools }}\n{% if x %}");
  });
});

describe("parser registry and detection", () => {
  it("detects tool parsers from template code", () => {
    assert.equal(detectToolParser("{{ '<tool_call>' }}"), "hermes");
    assert.equal(detectToolParser("{{ '[TOOL_CALLS]' }}"), "mistral");
    assert.equal(detectToolParser("{{ '<|python_tag|>' }}"), "llama3_json");
    assert.equal(detectToolParser("{% if message.role == 'ipython' %}"), "llama3_json");
    assert.equal(detectToolParser("{% if tools %}{{ tools | tojson }}{% endif %}"), "generic");
    assert.equal(detectToolParser("{# no tools #}{{ messages }}"), undefined);
  });

  it("detects reasoning parsers and whether the prompt opened <think>", () => {
    assert.equal(detectReasoningParser("{{ '<think>\\n' }}"), "qwen3");
    assert.equal(detectReasoningParser("{{ '<｜Assistant｜><think>\\n' }}"), "deepseek_r1");
    assert.equal(detectReasoningParser("{{ messages }}"), undefined);
    assert.equal(promptOpensThinking("<|im_start|>assistant\n<think>\n"), true);
    assert.equal(promptOpensThinking("<think>\n\n</think>\n\n"), false);
    assert.equal(promptOpensThinking("no thinking"), false);
  });

  it("creates parsers by name and alias, and throws for unknown names", () => {
    assert.ok(createToolParser("qwen") instanceof HermesToolParser);
    assert.equal(resolveToolParserName("llama3"), "llama3_json");
    assert.equal(resolveToolParserName("nope"), undefined);
    assert.throws(() => createToolParser("nope"), /Unknown tool call parser "nope"/);
    assert.throws(() => createReasoningParser("nope"), /Unknown reasoning parser "nope"/);
  });

  it("makes OpenAI-style call ids", () => {
    const id = newToolCallId();
    assert.match(id, /^call_[A-Za-z0-9]{24}$/);
    assert.notEqual(id, newToolCallId());
  });
});

describe("deltas", () => {
  it("map 1:1 onto OpenAI's streaming tool_calls", () => {
    assert.deepEqual(toOpenAIToolCallDelta({ index: 0, id: "call_1", name: "f" }), {
      index: 0,
      id: "call_1",
      type: "function",
      function: { name: "f", arguments: "" },
    });
    assert.deepEqual(toOpenAIToolCallDelta({ index: 1, argumentsDelta: '{"a"' }), {
      index: 1,
      function: { arguments: '{"a"' },
    });
  });

  it("accumulate fragments split across deltas", () => {
    const acc = new OutputAccumulator();
    acc.add({ content: "Hi", toolCalls: [{ index: 0, id: "call_1", name: "f", argumentsDelta: '{"a":' }] });
    acc.add({ toolCalls: [{ index: 0, argumentsDelta: "1}" }] });
    assert.deepEqual(acc.result(), {
      content: "Hi",
      reasoning: null,
      toolCalls: [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"a":1}' } }],
    });
    assert.throws(
      () => acc.add({ toolCalls: [{ index: 3, argumentsDelta: "x" }] }),
      /before its first fragment/,
    );
    assert.deepEqual(mergeDeltas({ content: "a" }, {}, { content: "b", reasoning: "r" }), {
      content: "ab",
      reasoning: "r",
    });
  });
});

describe("max_thinking_tokens", () => {
  it("forces the close text only inside reasoning once the budget is spent", () => {
    const parser = createChatOutputParser({ reasoningParser: "qwen3", toolParser: "hermes" });
    const reasoning = parser.reasoning;
    assert.ok(reasoning);
    assert.equal(thinkingBudgetClose(reasoning, 0, 2), undefined);
    parser.feed("<think>\nLet me");
    assert.equal(thinkingBudgetClose(reasoning, 1, 2), undefined);
    assert.equal(thinkingBudgetClose(reasoning, 2, undefined), undefined);
    const close = thinkingBudgetClose(reasoning, 2, 2);
    assert.equal(close, "\n</think>\n\n");
    parser.feed(close ?? "");
    assert.equal(parser.inReasoning(), false);
    assert.equal(thinkingBudgetClose(reasoning, 5, 2), undefined);
    parser.feed("Answer.");
    assert.deepEqual(parser.end(), {});
  });

  it("a prompt that opened <think> starts inside reasoning", () => {
    const parser = createChatOutputParser({ reasoningParser: "qwen3", startsInThinking: true });
    assert.equal(parser.inReasoning(), true);
    assert.deepEqual(parser.feed("Hmm</think>Yes"), { reasoning: "Hmm", content: "Yes" });
    assert.equal(createChatOutputParser({}).inReasoning(), false);
  });
});

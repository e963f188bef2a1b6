import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createChatOutputParser, type ParserDelta } from "../../../src/chat/index.ts";
import type { GenerationResult } from "../../../src/engine/types.ts";
import { type ChatDeltaOut, ChoiceOutput } from "../../../src/serving/output/chatOutput.ts";

const finished: GenerationResult = {
  finishReason: "stop",
  stopReason: null,
  promptTokens: 3,
  completionTokens: 9,
  cachedTokens: 0,
  cumulativeLogprob: Number.NaN,
};

/** Feeds `pieces` in order, then ends; returns every streaming delta the output produced. */
function run(output: ChoiceOutput, pieces: readonly string[]): ChatDeltaOut[] {
  const deltas: ParserDelta[] = [...pieces.map((piece) => output.feed(piece)), output.end()];
  return deltas.flatMap((delta) => output.streamDeltas(delta));
}

const call = (name: string) => `<tool_call>{"name": "${name}", "arguments": {"x": 1}}</tool_call>`;

describe("ChoiceOutput", () => {
  it("streams plain text as content deltas, and the message holds the same text", () => {
    const output = new ChoiceOutput(createChatOutputParser({}), { parallelToolCalls: true });
    const deltas = run(output, ["Hel", "lo", ""]);
    assert.equal(deltas.map((delta) => delta.content ?? "").join(""), "Hello");
    assert.deepEqual(output.message(), { role: "assistant", content: "Hello" });
    assert.equal(output.finishReason(finished), "stop");
    assert.equal(output.finishReason({ ...finished, finishReason: "length" }), "length");
  });

  it('gives "" as the content of an empty answer, null beside reasoning', () => {
    const empty = new ChoiceOutput(createChatOutputParser({}), { parallelToolCalls: true });
    run(empty, []);
    assert.equal(empty.message().content, "");
    const thinking = new ChoiceOutput(createChatOutputParser({ reasoningParser: "deepseek_r1" }), {
      parallelToolCalls: true,
    });
    run(thinking, ["<think>hmm</think>"]);
    assert.deepEqual(thinking.message(), {
      role: "assistant",
      content: null,
      reasoning_content: "hmm",
      reasoning: "hmm",
    });
  });

  it("separates reasoning from content, streaming both reasoning fields first", () => {
    const output = new ChoiceOutput(createChatOutputParser({ reasoningParser: "deepseek_r1" }), {
      parallelToolCalls: true,
    });
    const deltas = run(output, ["<think>a", "b</think>", "answer"]);
    const reasoning = deltas.filter((delta) => delta.reasoning_content !== undefined);
    assert.ok(reasoning.every((delta) => delta.reasoning === delta.reasoning_content));
    assert.equal(reasoning.map((delta) => delta.reasoning_content).join(""), "ab");
    assert.equal(deltas.map((delta) => delta.content ?? "").join(""), "answer");
    assert.ok(output.reasoning);
    assert.equal(output.message().reasoning_content, "ab");
    assert.equal(output.message().content, "answer");
  });

  it("turns parsed calls into tool_calls and finish_reason tool_calls", () => {
    const output = new ChoiceOutput(createChatOutputParser({ toolParser: "hermes" }), {
      parallelToolCalls: true,
    });
    const deltas = run(output, [call("f"), call("g")]);
    const calls = deltas.flatMap((delta) => delta.tool_calls ?? []);
    assert.deepEqual(
      calls.map((fragment) => [fragment.index, fragment.function?.name, fragment.function?.arguments]),
      [
        [0, "f", '{"x":1}'],
        [1, "g", '{"x":1}'],
      ],
    );
    assert.ok(output.hasToolCalls);
    assert.equal(output.finishReason(finished), "tool_calls");
    // Output cut by max_tokens after complete calls still says so (a later call may be missing).
    assert.equal(output.finishReason({ ...finished, finishReason: "length" }), "length");
    const message = output.message();
    assert.equal(message.content, null);
    assert.deepEqual(
      message.tool_calls?.map((entry) => entry.function.name),
      ["f", "g"],
    );
  });

  it("keeps only the first call when parallel_tool_calls is false", () => {
    const output = new ChoiceOutput(createChatOutputParser({ toolParser: "hermes" }), {
      parallelToolCalls: false,
    });
    run(output, [call("f"), call("g")]);
    assert.deepEqual(
      output.message().tool_calls?.map((entry) => entry.function.name),
      ["f"],
    );
  });

  it("keeps text out of content under a forced tool call (a call cut short)", () => {
    const output = new ChoiceOutput(createChatOutputParser({ toolParser: "hermes" }), {
      parallelToolCalls: true,
      forcedToolCall: true,
    });
    const deltas = run(output, ['<tool_call>{"name": "f", "argu']);
    assert.ok(deltas.every((delta) => delta.content === undefined));
    assert.equal(output.message().content, null);
  });

  it("closes the thinking block once the budget of thinking tokens is spent, once", () => {
    const output = new ChoiceOutput(createChatOutputParser({ reasoningParser: "deepseek_r1" }), {
      parallelToolCalls: true,
    });
    const inject = output.thinkingBudget(2, [7, 8]);
    output.feed("<think>");
    assert.equal(inject(), undefined);
    output.feed("x");
    assert.deepEqual(inject(), [7, 8]);
    output.feed("y");
    assert.equal(inject(), undefined);
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ChatCompletionRequestSchema } from "../../../src/protocol/chat.ts";
import { CompletionRequestSchema } from "../../../src/protocol/completions.ts";
import { requestFields } from "../../../src/serving/requestFields.ts";

const chat = (fields: Record<string, unknown>) =>
  requestFields(
    ChatCompletionRequestSchema.parse({ messages: [{ role: "user", content: "hi" }], ...fields }),
  );
const completion = (fields: Record<string, unknown>) =>
  requestFields(CompletionRequestSchema.parse({ prompt: "p", ...fields }));

describe("requestFields (every alias folded once)", () => {
  it("defaults every field when nothing is given", () => {
    assert.deepEqual(chat({}), {
      maxTokens: undefined,
      topK: -1,
      minP: 0,
      repetitionPenalty: 1,
      minTokens: 0,
      ignoreEos: false,
      maxThinkingTokens: undefined,
      whitespacePattern: undefined,
    });
  });

  it("reads nvext where the top-level field is absent, the top-level field first", () => {
    const nvext = {
      top_k: 3,
      min_p: 0.1,
      repetition_penalty: 1.2,
      min_tokens: 2,
      ignore_eos: true,
      max_thinking_tokens: 5,
      guided_whitespace_pattern: "[ ]?",
    };
    assert.deepEqual(completion({ nvext }), {
      maxTokens: undefined,
      topK: 3,
      minP: 0.1,
      repetitionPenalty: 1.2,
      minTokens: 2,
      ignoreEos: true,
      maxThinkingTokens: 5,
      whitespacePattern: "[ ]?",
    });
    const both = completion({ nvext, top_k: 4, min_p: 0.2, min_tokens: 1, ignore_eos: false });
    assert.deepEqual([both.topK, both.minP, both.minTokens, both.ignoreEos], [4, 0.2, 1, false]);
  });

  it("takes max_completion_tokens before max_tokens on chat, keeps null (until the context ends)", () => {
    assert.equal(chat({ max_tokens: 5, max_completion_tokens: 7 }).maxTokens, 7);
    assert.equal(chat({ max_tokens: 5 }).maxTokens, 5);
    assert.equal(chat({ max_tokens: null }).maxTokens, null);
    assert.equal(completion({ max_tokens: null }).maxTokens, null);
    assert.equal(completion({ max_tokens: 9 }).maxTokens, 9);
  });

  it("takes the whitespace pattern in its three spellings, in order", () => {
    assert.equal(chat({ structured_outputs: { whitespace_pattern: "c" } }).whitespacePattern, "c");
    assert.equal(
      chat({ nvext: { guided_whitespace_pattern: "b" }, structured_outputs: { whitespace_pattern: "c" } })
        .whitespacePattern,
      "b",
    );
    assert.equal(
      chat({ guided_whitespace_pattern: "a", nvext: { guided_whitespace_pattern: "b" } }).whitespacePattern,
      "a",
    );
  });
});

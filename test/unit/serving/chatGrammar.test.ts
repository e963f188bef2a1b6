// The thinking-block wrapper of guided-decoding grammars (`allowThinking`), checked with llama.cpp's own
// grammar engine: the wrapped grammar admits an optional (or, when the prompt opened it, a required)
// `<think>` block before exactly what the original grammar admits.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { REASONING_FAMILIES } from "../../../src/chat/reasoningParsers/index.ts";
import { allowThinking } from "../../../src/serving/chatGrammar.ts";
import { checkGbnfText, compileConstraint } from "../../../src/structured/index.ts";
import { nativeMatcher } from "../structured/nativeMatcher.ts";

const answer = compileConstraint("choice", ["yes", "no"]).gbnf;

describe("allowThinking", () => {
  it("admits an optional thinking block before the answer, and only the answer after it", async () => {
    const wrapped = allowThinking(answer, false);
    checkGbnfText(wrapped);
    const matches = await nativeMatcher(wrapped);
    for (const text of ["yes", "no", "<think>\nHmm, a <b> tag.\n</think>\n\nyes", "<think></think>no"]) {
      assert.ok(matches(text), JSON.stringify(text));
    }
    for (const text of [
      "maybe",
      "<think>x</think>maybe",
      " <think>x</think>yes",
      "<think>x</think>\n\n\n\n\nyes",
    ]) {
      assert.ok(!matches(text), JSON.stringify(text));
    }
  });

  it("requires the close when the prompt opened the block, and admits the max_thinking_tokens close text", async () => {
    const matches = await nativeMatcher(allowThinking(answer, true));
    assert.ok(matches("I wonder.\n</think>\n\nno"));
    assert.ok(matches("</think>yes"));
    assert.ok(!matches("yes"), "the block must be closed first");
    assert.ok(!matches("a </think> b </think>yes"), "the thinking cannot contain </think>");
  });

  it("renames only the rule `root`: not longer names, string literals, classes or comments", () => {
    const gbnf = 'root ::= root-item "root" [root] # root\nroot-item ::= "x" | "(" root ")"';
    const wrapped = allowThinking(gbnf, false);
    const renamed = wrapped.split("\n").slice(4).join("\n");
    assert.equal(
      renamed,
      'lmserve-think-answer ::= root-item "root" [root] # root\nroot-item ::= "x" | "(" lmserve-think-answer ")"',
    );
    checkGbnfText(wrapped);
  });

  it("picks a rule prefix the grammar does not use", () => {
    const wrapped = allowThinking('root ::= lmserve-think-body\nlmserve-think-body ::= "a"', true);
    assert.match(
      wrapped,
      /^root ::= lmserve-thinkx-body "<\/think>" lmserve-thinkx-ws lmserve-thinkx-answer$/m,
    );
    checkGbnfText(wrapped);
  });

  it("wraps with every family's markers: the block closes only at its own close marker", async () => {
    for (const [name, markup] of Object.entries(REASONING_FAMILIES)) {
      if (name === "openai_gptoss") continue;
      const wrapped = allowThinking(answer, false, markup);
      checkGbnfText(wrapped);
      const matches = await nativeMatcher(wrapped);
      const { open, close } = markup;
      const partial = close.slice(0, -1);
      assert.ok(matches("yes"), name);
      assert.ok(matches(`${open}\nA ${partial}x thought.${markup.closeText}no`), `${name}: close text`);
      assert.ok(!matches(`${open}a ${close} b ${close}yes`), `${name}: no close inside`);
      assert.ok(!matches(`${open}a${close}maybe`), `${name}: the answer is constrained`);
    }
  });

  it("Harmony: the answer is the final channel, after an optional analysis message", async () => {
    const matches = await nativeMatcher(allowThinking(answer, false, REASONING_FAMILIES.openai_gptoss));
    assert.ok(matches("<|channel|>final<|message|>yes"));
    assert.ok(
      matches("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>no"),
    );
    assert.ok(!matches("yes"), "the final channel header comes first");
    assert.ok(
      !matches("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>maybe"),
    );
  });
});

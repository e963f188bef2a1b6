// The thinking-block allowance of guided-decoding grammars (`structured/gbnf/thinking.ts`), checked with
// llama.cpp's own grammar engine from the new start rule: the wrapped grammar admits an optional (or, when
// the prompt opened it, a required) `<think>` block before exactly what the original grammar admits.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { REASONING_FAMILIES } from "../../../src/chat/reasoningParsers/index.ts";
import { allowThinking, type RootedGbnf } from "../../../src/structured/gbnf/thinking.ts";
import { checkGbnfText, compileConstraint } from "../../../src/structured/index.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

/** A matcher of `wrapped` from its start rule. */
const matcherOf = (wrapped: RootedGbnf) => nativeMatcher(wrapped.gbnf, wrapped.root);

const answer = compileConstraint("choice", ["yes", "no"]).gbnf;

describe("allowThinking", () => {
  it("admits an optional thinking block before the answer, and only the answer after it", async () => {
    const wrapped = allowThinking(answer, false);
    checkGbnfText(wrapped.gbnf);
    const matches = await matcherOf(wrapped);
    for (const text of [
      "yes",
      "no",
      "<think>\nHmm, a <b> tag.\n</think>\n\nyes",
      "<think></think>no",
      // Leading whitespace before an optional block, as the reasoning parsers skip it (issue 26).
      " <think>x</think>yes",
      "\n\n<think>x</think>\nno",
    ]) {
      assert.ok(matches(text), JSON.stringify(text));
    }
    for (const text of [
      "maybe",
      "<think>x</think>maybe",
      " yes",
      "\n\n\n\n\n<think>x</think>yes",
      "<think>x</think>\n\n\n\n\nyes",
    ]) {
      assert.ok(!matches(text), JSON.stringify(text));
    }
  });

  it("requires the close when the prompt opened the block, and admits the max_thinking_tokens close text", async () => {
    const matches = await matcherOf(allowThinking(answer, true));
    assert.ok(matches("I wonder.\n</think>\n\nno"));
    assert.ok(matches("</think>yes"));
    assert.ok(!matches("yes"), "the block must be closed first");
    assert.ok(!matches("a </think> b </think>yes"), "the thinking cannot contain </think>");
  });

  it("leaves the grammar's text as it is and starts from a rule of its own (no rename)", async () => {
    const gbnf = 'root ::= root-item "root" [root] # root\nroot-item ::= "x" | "(" root ")"';
    const wrapped = allowThinking(gbnf, false);
    assert.ok(wrapped.gbnf.startsWith(`${gbnf}\n`));
    assert.equal(wrapped.root, "lmserve-think-root");
    checkGbnfText(wrapped.gbnf);
    const matches = await matcherOf(wrapped);
    assert.ok(matches("<think>a</think>(xroott)rootr"));
    assert.ok(matches("xroott"));
    assert.ok(!matches("<think>a</think>(<think>b</think>xroott)rootr"), "thinking only before the answer");
  });

  it("starts from the given rule when the grammar's start rule is not root", async () => {
    const wrapped = allowThinking('answer ::= "ok"', false, undefined, "answer");
    const matches = await matcherOf(wrapped);
    assert.ok(matches("<think>x</think>ok"));
    assert.ok(!matches("<think>x</think>no"));
  });

  it("picks a rule prefix the grammar does not use", () => {
    const wrapped = allowThinking('root ::= lmserve-think-body\nlmserve-think-body ::= "a"', true);
    assert.equal(wrapped.root, "lmserve-thinkx-root");
    assert.match(
      wrapped.gbnf,
      /^lmserve-thinkx-root ::= lmserve-thinkx-body "<\/think>" lmserve-thinkx-ws root$/m,
    );
    checkGbnfText(wrapped.gbnf);
  });

  it("wraps with every family's markers: the block closes only at its own close marker", async () => {
    for (const [name, markup] of Object.entries(REASONING_FAMILIES)) {
      if (name === "openai_gptoss") continue;
      const wrapped = allowThinking(answer, false, markup);
      checkGbnfText(wrapped.gbnf);
      const matches = await matcherOf(wrapped);
      const { open, close } = markup;
      const partial = close.slice(0, -1);
      assert.ok(matches("yes"), name);
      assert.ok(matches(`${open}\nA ${partial}x thought.${markup.closeText}no`), `${name}: close text`);
      assert.ok(!matches(`${open}a ${close} b ${close}yes`), `${name}: no close inside`);
      assert.ok(!matches(`${open}a${close}maybe`), `${name}: the answer is constrained`);
    }
  });

  it("Harmony: the answer is the final channel, after an optional analysis message", async () => {
    const matches = await matcherOf(allowThinking(answer, false, REASONING_FAMILIES.openai_gptoss));
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

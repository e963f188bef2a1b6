// `reasoning_effort` reaches the real templates' own knobs: gpt-oss's `Reasoning:` line, Qwen3's
// `enable_thinking`, DeepSeek V3.1's `thinking`; `chat_template_kwargs` win; templates without a knob get nothing.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { reasoningEffortVariables } from "../../../src/chat/reasoningEffort.ts";
import {
  detectReasoningParser,
  promptThinkingState,
  thinkingMarkup,
} from "../../../src/chat/reasoningParsers/index.ts";
import { renderChatTemplate } from "../../../src/chat/renderChatTemplate.ts";

const dir = join(import.meta.dirname, "../../../native/build/llama.cpp/models/templates");
const template = (name: string) => readFileSync(join(dir, name), "utf8");
const messages = [{ role: "user" as const, content: "What is 2 + 2?" }];

function render(name: string, kwargs: Record<string, unknown>): string {
  return renderChatTemplate(template(name), {
    messages,
    addGenerationPrompt: true,
    bosToken: "",
    eosToken: "",
    kwargs,
  });
}

describe("reasoning_effort", { skip: existsSync(dir) ? false : `no templates at ${dir}` }, () => {
  it("sets gpt-oss's reasoning level in its system message", () => {
    const name = "openai-gpt-oss-120b.jinja";
    assert.match(render(name, reasoningEffortVariables(template(name), "high")), /Reasoning: high\n/);
    assert.match(render(name, reasoningEffortVariables(template(name), "low")), /Reasoning: low\n/);
    // gpt-oss knows three levels: none/minimal are its lowest, xhigh its highest.
    assert.match(render(name, reasoningEffortVariables(template(name), "minimal")), /Reasoning: low\n/);
    assert.match(render(name, reasoningEffortVariables(template(name), "xhigh")), /Reasoning: high\n/);
    assert.match(render(name, {}), /Reasoning: medium\n/);
  });

  it("sets Muse Glimmer's reasoning strength in its system message", () => {
    const name = "muse-glimmer.jinja";
    assert.match(render(name, reasoningEffortVariables(template(name), "low")), /Reasoning strength: low\./);
    assert.match(
      render(name, reasoningEffortVariables(template(name), "xhigh")),
      /Reasoning strength: high\./,
    );
    assert.match(render(name, {}), /Reasoning strength: high\./);
  });

  it("turns Qwen3's thinking off for none and leaves it on otherwise", () => {
    const name = "Qwen-Qwen3-0.6B.jinja";
    assert.deepEqual(reasoningEffortVariables(template(name), "none"), { enable_thinking: false });
    assert.ok(
      render(name, reasoningEffortVariables(template(name), "none")).endsWith("<think>\n\n</think>\n\n"),
    );
    assert.ok(!render(name, reasoningEffortVariables(template(name), "high")).includes("</think>"));
  });

  it("turns DeepSeek V3.1's thinking on for an effort and off for none", () => {
    const name = "deepseek-ai-DeepSeek-V3.1.jinja";
    assert.ok(render(name, reasoningEffortVariables(template(name), "medium")).endsWith("<think>"));
    assert.ok(render(name, reasoningEffortVariables(template(name), "none")).endsWith("</think>"));
  });

  it("lets chat_template_kwargs win, and sets nothing without an effort or a knob", () => {
    const name = "Qwen-Qwen3-0.6B.jinja";
    const kwargs = { ...reasoningEffortVariables(template(name), "none"), enable_thinking: true };
    assert.ok(!render(name, kwargs).includes("</think>"));
    assert.deepEqual(reasoningEffortVariables(template(name), undefined), {});
    assert.deepEqual(
      reasoningEffortVariables(template("meta-llama-Llama-3.1-8B-Instruct.jinja"), "high"),
      {},
    );
  });

  it("none closes and high opens (or leaves open) each family's thinking block in the real prompt", () => {
    const families: Record<string, { none: string; high: string | undefined }> = {
      "tencent-Hy3.jinja": { none: "closed", high: "open" },
      "Cohere2MoE.jinja": { none: "closed", high: "open" },
      "MiniMax-M3.jinja": { none: "closed", high: "open" },
      "ByteDance-Seed-OSS.jinja": { none: "closed", high: undefined },
      "Qwen-Qwen3-0.6B.jinja": { none: "closed", high: undefined },
      "GLM-4.7-Flash.jinja": { none: "closed", high: "open" },
      "deepseek-ai-DeepSeek-V3.1.jinja": { none: "closed", high: "open" },
      "google-gemma-4-31B-it.jinja": { none: "closed", high: undefined },
    };
    for (const [name, expected] of Object.entries(families)) {
      const parser = detectReasoningParser(template(name));
      assert.ok(parser, name);
      const markup = thinkingMarkup(parser);
      for (const effort of ["none", "high"] as const) {
        const prompt = render(name, reasoningEffortVariables(template(name), effort));
        assert.equal(promptThinkingState(prompt, markup), expected[effort], `${name} ${effort}`);
      }
    }
  });
});

/**
 * OpenAI's `reasoning_effort` mapped to a chat template's own thinking knob, as the template reads it:
 * gpt-oss, DeepSeek V4, Cohere2, Hy3 and Solar Open read a `reasoning_effort` variable themselves;
 * families with only on/off read `enable_thinking` (Qwen3, Qwen3.5, GLM-4.x, Nemotron, SmolLM3, Gemma 4,
 * Laguna, …) or `thinking` (DeepSeek V3.1 / V3.2, Seed-OSS, Kimi-K3, MiniMax-M3). llama-server maps it
 * the same way (`reasoning_effort` passed through, `enable_thinking` from the reasoning budget).
 */
import type { ReasoningEffort } from "../protocol/common.ts";
import { jinjaCode } from "./textScan.ts";

/** Whether a template's code reads variable `name` (as a whole word, outside comments). */
function readsVariable(code: string, name: string): boolean {
  return new RegExp(`(?<![\\w.'"])${name}(?![\\w'"])`).test(code);
}

/**
 * The template variables `effort` sets for `template`: `reasoning_effort` itself when the template
 * reads it (gpt-oss knows `low`, `medium`, `high`: `none`/`minimal` become `low`, `xhigh` becomes
 * `high` there, since its template writes the value into the system message verbatim); and, where the
 * template reads `enable_thinking` or `thinking`, that flag: off for `none` (and `minimal`, which OpenAI
 * documents as "very few reasoning tokens"), on otherwise. Variables the client set in
 * `chat_template_kwargs` win (the caller spreads these first). `undefined` effort sets nothing.
 */
export function reasoningEffortVariables(
  template: string,
  effort: ReasoningEffort | undefined,
): Record<string, unknown> {
  if (effort === undefined) return {};
  const code = jinjaCode(template);
  const variables: Record<string, unknown> = {};
  if (readsVariable(code, "reasoning_effort")) {
    const gptOss = code.includes("<|channel|>");
    variables.reasoning_effort = gptOss ? gptOssEffort(effort) : effort;
  }
  const on = effort !== "none" && effort !== "minimal";
  if (readsVariable(code, "enable_thinking")) variables.enable_thinking = on;
  if (readsVariable(code, "thinking")) variables.thinking = on;
  return variables;
}

/** gpt-oss's three levels (its template prints `Reasoning: <value>`). */
function gptOssEffort(effort: ReasoningEffort): "low" | "medium" | "high" {
  if (effort === "none" || effort === "minimal" || effort === "low") return "low";
  return effort === "medium" ? "medium" : "high";
}

/**
 * OpenAI's `reasoning_effort` mapped to a chat template's own thinking knob, as the template reads it:
 * gpt-oss, DeepSeek V4, Cohere2, Hy3 and Solar Open read a `reasoning_effort` variable themselves;
 * families with only on/off read `enable_thinking` (Qwen3, Qwen3.5, GLM-4.x, Nemotron, SmolLM3, Gemma 4,
 * Laguna, …) or `thinking` (DeepSeek V3.1 / V3.2, Seed-OSS, Kimi-K3, MiniMax-M3). llama-server maps it
 * the same way (`reasoning_effort` passed through, `enable_thinking` from the reasoning budget).
 * Family knobs of their own: Hunyuan 3's `reasoning_effort` `no_think`/`low`/`high`, Solar Open's
 * `minimal` (for `none`), Command-A's `reasoning`, MiniMax-M3's `thinking_mode`, Seed-OSS's
 * `thinking_budget` (0 for off), Kimi-K3's `thinking_effort` (`low`/`high`/`max`) and Muse Glimmer's
 * `reasoning_strength` (`low`/`medium`/`high`, written into its system message).
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
 * documents as "very few reasoning tokens"), on otherwise; and the family knobs of the module comment. Variables the client set in
 * `chat_template_kwargs` win (the caller spreads these first). `undefined` effort sets nothing.
 */
export function reasoningEffortVariables(
  template: string,
  effort: ReasoningEffort | undefined,
): Record<string, unknown> {
  if (effort === undefined) return {};
  const code = jinjaCode(template);
  const variables: Record<string, unknown> = {};
  const on = effort !== "none" && effort !== "minimal";
  if (readsVariable(code, "reasoning_effort")) {
    if (code.includes("<|channel|>")) variables.reasoning_effort = gptOssEffort(effort);
    else if (code.includes("no_think"))
      variables.reasoning_effort = on ? (effort === "low" ? "low" : "high") : "no_think";
    else if (code.includes("<|think|>") && effort === "none") variables.reasoning_effort = "minimal";
    else variables.reasoning_effort = effort;
  }
  if (readsVariable(code, "enable_thinking")) variables.enable_thinking = on;
  if (readsVariable(code, "thinking")) variables.thinking = on;
  // Command-A / R7B: `reasoning` opens or closes <|START_THINKING|> in the generation prompt.
  if (readsVariable(code, "reasoning") && code.includes("<|START_THINKING|>")) variables.reasoning = on;
  // MiniMax-M3: `thinking_mode` enabled / disabled (unset: adaptive).
  if (readsVariable(code, "thinking_mode")) variables.thinking_mode = on ? "enabled" : "disabled";
  // Seed-OSS: a `thinking_budget` of 0 closes the block in the prompt.
  if (readsVariable(code, "thinking_budget") && !on) variables.thinking_budget = 0;
  // Kimi-K3: `thinking_effort` low / high / max.
  if (readsVariable(code, "thinking_effort") && on) {
    variables.thinking_effort = effort === "low" ? "low" : effort === "xhigh" ? "max" : "high";
  }
  // Muse Glimmer: `reasoning_strength` low / medium / high (its system message's "Reasoning strength:").
  if (readsVariable(code, "reasoning_strength")) variables.reasoning_strength = gptOssEffort(effort);
  return variables;
}

/** gpt-oss's three levels (its template prints `Reasoning: <value>`), also Muse Glimmer's strengths. */
function gptOssEffort(effort: ReasoningEffort): "low" | "medium" | "high" {
  if (effort === "none" || effort === "minimal" || effort === "low") return "low";
  return effort === "medium" ? "medium" : "high";
}

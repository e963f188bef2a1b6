/**
 * The reasoning part of a response's output tokens, for the usage details of the APIs that report it
 * (Responses' `output_tokens_details.reasoning_tokens`, Anthropic's `output_tokens_details.thinking_tokens`).
 */
import type { ChatPlan } from "../chat.ts";

/**
 * The tokens of the reasoning text `text`, re-tokenized with the plan's model (so a few tokens off the
 * generated count where the model split the text differently; the tags around it are not counted), at
 * most `completionTokens`. 0 for an empty text.
 */
export function reasoningTokenCount(plan: ChatPlan, text: string, completionTokens: number): number {
  if (text === "") return 0;
  return Math.min(plan.scheduler.host.tokenize(text, false).length, completionTokens);
}

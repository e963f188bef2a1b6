/**
 * Registry of reasoning parsers by name (vLLM's `--reasoning-parser` names), detection from a chat
 * template, and the helpers the engine needs for `<think>` prompts and `max_thinking_tokens`.
 */
import { jinjaCode } from "../textScan.ts";
import { type ReasoningParser, type ThinkParserOptions, ThinkReasoningParser } from "./think.ts";

export { type ReasoningParser, type ThinkParserOptions, ThinkReasoningParser } from "./think.ts";

/**
 * Reasoning parser names. Both read `<think>…</think>`; they differ only in the default of
 * `startsInThinking`: `deepseek_r1` assumes the prompt opened `<think>` (vLLM's deepseek_r1 parser treats
 * output before `</think>` as reasoning), `qwen3` expects the model to write `<think>` itself.
 */
export const REASONING_PARSER_NAMES = ["deepseek_r1", "qwen3"] as const;

/** One of {@link REASONING_PARSER_NAMES}. */
export type ReasoningParserName = (typeof REASONING_PARSER_NAMES)[number];

/** True when `name` is a registered reasoning parser name. */
export function isReasoningParserName(name: string): name is ReasoningParserName {
  return (REASONING_PARSER_NAMES as readonly string[]).includes(name);
}

/**
 * Creates a fresh parser (one per choice of one request). `options.startsInThinking` overrides the
 * name's default; pass `promptOpensThinking(prompt)` to follow what the rendered prompt actually did.
 * Throws an `Error` for an unknown name (a server configuration mistake, not a client one).
 */
export function createReasoningParser(name: string, options: ThinkParserOptions = {}): ReasoningParser {
  if (!isReasoningParserName(name)) {
    throw new Error(`Unknown reasoning parser "${name}"; known: ${REASONING_PARSER_NAMES.join(", ")}`);
  }
  const startsInThinking = options.startsInThinking ?? name === "deepseek_r1";
  return new ThinkReasoningParser({ ...options, startsInThinking });
}

/**
 * Chooses a reasoning parser from the chat template's code (Jinja comments ignored): a template that mentions `<think>` gets
 * `deepseek_r1` when it is a DeepSeek template (its `<｜Assistant｜>` marker) and `qwen3` otherwise;
 * a template without `<think>` gets `undefined` (no reasoning parsing).
 */
export function detectReasoningParser(template: string): ReasoningParserName | undefined {
  const code = jinjaCode(template);
  if (!code.includes("<think>")) return undefined;
  return code.includes("<｜Assistant｜>") ? "deepseek_r1" : "qwen3";
}

/**
 * True when the rendered prompt leaves a `<think>` block open at its end (its last `<think>` comes after
 * its last `</think>`), so generation starts inside reasoning: DeepSeek-R1's generation prompt ending in
 * `<think>\n`, unlike Qwen3's `enable_thinking: false` prompt which ends `<think>\n\n</think>\n\n`.
 */
export function promptOpensThinking(prompt: string): boolean {
  const open = prompt.lastIndexOf("<think>");
  return open >= 0 && open > prompt.lastIndexOf("</think>");
}

/**
 * The `max_thinking_tokens` check, called by the engine after each generated token: returns the text to
 * force now (the parser's `closeText`, which closes the block so the model goes on with its answer) when
 * the output is still inside reasoning and `thinkingTokens` (tokens generated while `inReasoning()` was
 * true) reached `maxThinkingTokens`; otherwise `undefined`. No budget (`undefined`) never forces.
 */
export function thinkingBudgetClose(
  parser: Pick<ReasoningParser, "inReasoning" | "closeText">,
  thinkingTokens: number,
  maxThinkingTokens: number | undefined,
): string | undefined {
  if (maxThinkingTokens === undefined || !parser.inReasoning()) return undefined;
  return thinkingTokens >= maxThinkingTokens ? parser.closeText : undefined;
}

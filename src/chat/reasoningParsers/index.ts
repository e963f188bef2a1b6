/**
 * Registry of reasoning parsers by name (vLLM's `--reasoning-parser` names), detection from a chat
 * template, and the helpers the engine needs for prompts that open or close the thinking block and for
 * `max_thinking_tokens`.
 */
import { jinjaCode } from "../textScan.ts";
import { HarmonyParser, type HarmonyParserOptions } from "../toolParsers/harmony.ts";
import { type ReasoningParser, type ThinkParserOptions, ThinkReasoningParser } from "./think.ts";

export { HarmonyParser, type HarmonyParserOptions } from "../toolParsers/harmony.ts";
export { type ReasoningParser, type ThinkParserOptions, ThinkReasoningParser } from "./think.ts";

/** The markup of one reasoning family: the markers of its thinking block and how the budget closes it. */
export type ThinkingMarkup = {
  /** The marker that opens a thinking block, e.g. `<think>`. */
  open: string;
  /** The marker that closes it, e.g. `</think>`. */
  close: string;
  /** The text `max_thinking_tokens` forces to close an open block. */
  closeText: string;
  /**
   * For a guided-decoding grammar (`chatGrammar.ts`): GBNF that must follow the close marker before the
   * answer (`""`: bounded whitespace), and GBNF the answer must start with, block or not (`""`: none).
   */
  grammarAfterClose: string;
  grammarAnswerPrefix: string;
  /** Whether the markers are special (control) tokens that the detokenizer renders only when asked. */
  specialTokens: boolean;
  /** Whether the output starts inside the block when the prompt does not say (see `promptThinkingState`). */
  startsInThinking: boolean;
  /** The parser's other markers (`ThinkParserOptions`: `opens`, `closes`, `ends`, `drop`); absent: none. */
  parse?: Pick<ThinkParserOptions, "opens" | "closes" | "ends" | "drop">;
};

const think = (open: string, close: string, extra: Partial<ThinkingMarkup> = {}): ThinkingMarkup => ({
  open,
  close,
  closeText: `\n${close}\n\n`,
  grammarAfterClose: "",
  grammarAnswerPrefix: "",
  specialTokens: false,
  startsInThinking: false,
  ...extra,
});

/**
 * Every reasoning parser by its name (vLLM's `--reasoning-parser` names where vLLM has the family):
 * - `qwen3` (`<think>…</think>`, the model opens the block: Qwen3, QwQ, GLM-4.x, Nemotron, SmolLM3, …) and
 *   `deepseek_r1` (the same markers; output before `</think>` is reasoning even without `<think>`);
 * - `kimi_k2` (Kimi-K2 Thinking, as vLLM's `kimi_k2`: `<think>…</think>`, reasoning from the output's
 *   start, also ended by a tool-call section `<|tool_calls_section_begin|>`, which stays content);
 * - `seed_oss` (`<seed:think>…</seed:think>`), `mistral` (`[THINK]…[/THINK]`, Magistral / Ministral
 *   reasoning), `command_a` (Command-A Reasoning / R7B `<|START_THINKING|>…<|END_THINKING|>`),
 *   `minimax_m3` (`<mm:think>…</mm:think>`), `hy_v3` (Hunyuan 3 `<think:opensource>…</think:opensource>`),
 *   `gemma4` (`<|channel>thought…<channel|>`), `apertus` (`<|inner_prefix|>…<|inner_suffix|>`);
 * - `kimi_k3` (Kimi K3 XTML, as vLLM's `kimi_k3`: `<|open|>think<|sep|>…<|close|>think<|sep|>`, the
 *   `response` element's tags removed from the content);
 * - `solar_open` (Upstage Solar Open, as vLLM's `solar_open`: `<|think|>…<|end|>`, then
 *   `<|begin|>assistant<|content|>` before the answer, removed; `<|tool_calls|>` is left to the tool parser);
 * - `granite` (IBM Granite, as vLLM's `granite`: `Here is my thought process:` … `Here is my response:`
 *   (or `Here's`), and Granite 3.3's `<think>…</think><response>…</response>` as its template asks);
 * - `apriel` (ServiceNow Apriel 1.5 / 1.6 Thinker, as llama.cpp reads its template: reasoning from the
 *   output's start, an optional `Here are my reasoning steps:` swallowed, up to `[BEGIN FINAL RESPONSE]`;
 *   `[END FINAL RESPONSE]` and `<|end|>` removed from the content);
 * - `openai_gptoss` (gpt-oss Harmony channels, `./../toolParsers/harmony.ts`).
 * The prompt decides where the output starts when it opened or closed a block (`promptThinkingState`).
 */
export const REASONING_FAMILIES = {
  deepseek_r1: think("<think>", "</think>", { startsInThinking: true }),
  qwen3: think("<think>", "</think>"),
  seed_oss: think("<seed:think>", "</seed:think>"),
  mistral: think("[THINK]", "[/THINK]", { closeText: "[/THINK]", specialTokens: true }),
  command_a: think("<|START_THINKING|>", "<|END_THINKING|>", {
    closeText: "<|END_THINKING|>",
    specialTokens: true,
  }),
  minimax_m3: think("<mm:think>", "</mm:think>"),
  hy_v3: think("<think:opensource>", "</think:opensource>"),
  gemma4: think("<|channel>thought", "<channel|>", { closeText: "\n<channel|>", specialTokens: true }),
  kimi_k2: think("<think>", "</think>", {
    closeText: "</think>",
    startsInThinking: true,
    parse: { ends: ["<|tool_calls_section_begin|>"] },
  }),
  kimi_k3: think("<|open|>think<|sep|>", "<|close|>think<|sep|>", {
    closeText: "<|close|>think<|sep|>",
    specialTokens: true,
    parse: {
      drop: [
        "<|open|>response<|sep|>",
        "<|close|>response<|sep|>",
        "<|close|>message<|sep|>",
        "<|end_of_msg|>",
      ],
    },
  }),
  solar_open: think("<|think|>", "<|end|>", {
    closeText: "<|end|><|begin|>assistant<|content|>",
    grammarAfterClose: '"<|begin|>assistant<|content|>"',
    parse: { drop: ["<|begin|>assistant", "<|content|>", "<|end|>"] },
  }),
  granite: think("<think>", "</think>", {
    parse: {
      opens: ["Here is my thought process:", "Here's my thought process:"],
      closes: ["Here is my response:", "Here's my response:"],
      drop: ["<response>", "</response>"],
    },
  }),
  apriel: think("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]", {
    closeText: "\n[BEGIN FINAL RESPONSE]\n",
    startsInThinking: true,
    parse: { drop: ["[END FINAL RESPONSE]", "<|end|>"] },
  }),
  apertus: think("<|inner_prefix|>", "<|inner_suffix|>", {
    closeText: "<|inner_suffix|>",
    specialTokens: true,
  }),
  openai_gptoss: {
    open: "<|channel|>analysis<|message|>",
    close: "<|end|>",
    closeText: "<|end|><|start|>assistant",
    grammarAfterClose: '"<|start|>assistant"',
    grammarAnswerPrefix: '"<|channel|>final<|message|>"',
    specialTokens: true,
    startsInThinking: false,
  },
} satisfies Record<string, ThinkingMarkup>;

/** Reasoning parser names: the keys of {@link REASONING_FAMILIES}. */
export const REASONING_PARSER_NAMES = Object.keys(REASONING_FAMILIES) as ReasoningParserName[];

/** One of {@link REASONING_PARSER_NAMES}. */
export type ReasoningParserName = keyof typeof REASONING_FAMILIES;

/**
 * Other projects' names for the same parsers: vLLM's `glm45`, `hunyuan_a13b`, `step3p5`, `mimo` and
 * `olmo3` read `<think>` as `qwen3` does; `deepseek_v3` and `minimax_m2` as `deepseek_r1`; `gpt_oss` and
 * `harmony` are `openai_gptoss`; `magistral` is `mistral`, `seed` is `seed_oss`, `cohere` `command_a`.
 */
const ALIASES: Record<string, ReasoningParserName> = {
  glm45: "qwen3",
  mimo: "qwen3",
  hunyuan_a13b: "qwen3",
  step3p5: "qwen3",
  olmo3: "qwen3",
  deepseek_v3: "deepseek_r1",
  minimax_m2: "deepseek_r1",
  gpt_oss: "openai_gptoss",
  harmony: "openai_gptoss",
  magistral: "mistral",
  seed: "seed_oss",
  cohere: "command_a",
};

/** The canonical name of a reasoning parser name or alias, else `undefined`. */
export function resolveReasoningParserName(name: string): ReasoningParserName | undefined {
  if (Object.hasOwn(REASONING_FAMILIES, name)) return name as ReasoningParserName;
  return Object.hasOwn(ALIASES, name) ? ALIASES[name] : undefined;
}

/** True when `name` is a registered reasoning parser name or alias. */
export function isReasoningParserName(name: string): boolean {
  return resolveReasoningParserName(name) !== undefined;
}

/**
 * The markup of reasoning parser `name` (a name or alias).
 * @throws Error for an unknown name (a server configuration mistake, not a client one).
 */
export function thinkingMarkup(name: string): ThinkingMarkup {
  const resolved = resolveReasoningParserName(name);
  if (resolved === undefined) {
    throw new Error(`Unknown reasoning parser "${name}"; known: ${REASONING_PARSER_NAMES.join(", ")}`);
  }
  return REASONING_FAMILIES[resolved];
}

/** Options of {@link createReasoningParser}: where the output starts, and the Harmony parser's. */
export type ReasoningParserOptions = Pick<ThinkParserOptions, "startsInThinking" | "thinkingClosed"> &
  HarmonyParserOptions;

/**
 * Creates a fresh parser (one per choice of one request). `options.startsInThinking` overrides the
 * name's default; pass what `promptThinkingState(prompt, markup)` found to follow the rendered prompt.
 * `openai_gptoss` gives a {@link HarmonyParser} (which also parses tool calls unless `parseCalls` is false).
 * Throws an `Error` for an unknown name (a server configuration mistake, not a client one).
 */
export function createReasoningParser(name: string, options: ReasoningParserOptions = {}): ReasoningParser {
  const markup = thinkingMarkup(name);
  if (resolveReasoningParserName(name) === "openai_gptoss") {
    const { parseCalls, newId } = options;
    return new HarmonyParser({
      ...(parseCalls !== undefined ? { parseCalls } : {}),
      ...(newId !== undefined ? { newId } : {}),
    });
  }
  return new ThinkReasoningParser({
    open: markup.open,
    close: markup.close,
    closeText: markup.closeText,
    ...(markup.parse ?? {}),
    startsInThinking: options.startsInThinking ?? markup.startsInThinking,
    ...(options.thinkingClosed !== undefined ? { thinkingClosed: options.thinkingClosed } : {}),
  });
}

/**
 * Chooses a reasoning parser from the chat template (Jinja comments ignored; `<think>` only in its code),
 * by the markup it writes: Harmony's `<|channel|>` → `openai_gptoss`; `<seed:think>` → `seed_oss`; `[THINK]` → `mistral`;
 * `<|START_THINKING|>` → `command_a`; `<mm:think>` → `minimax_m3`; `<think{}>` with Hunyuan's `HYTK`
 * suffix → `hy_v3`; `<|channel>thought` → `gemma4`; XTML `<|open|>` with a `think` element → `kimi_k3`;
 * `<|begin|>assistant<|think|>` → `solar_open`; `[BEGIN FINAL RESPONSE]` → `apriel`; `<|inner_prefix|>` →
 * `apertus`; `<|start_of_role|>` with `<think>` or `thought process` → `granite`; `<|im_assistant|>`
 * with `<think>` (written as text) → `kimi_k2`; `<think>` (or `</think>`) in the code → `deepseek_r1`
 * for a DeepSeek template (its `<｜Assistant｜>` marker) and `qwen3` otherwise; else `undefined` (no
 * reasoning parsing).
 */
export function detectReasoningParser(template: string): ReasoningParserName | undefined {
  const code = jinjaCode(template);
  // The other families' markers may be raw template text (Command-A writes `<|START_THINKING|>` so).
  const text = template.replace(/\{#[\s\S]*?#\}/g, "");
  if (text.includes("<|channel|>") && text.includes("analysis")) return "openai_gptoss";
  if (text.includes("<seed:think>")) return "seed_oss";
  if (text.includes("[THINK]")) return "mistral";
  if (text.includes("<|START_THINKING|>")) return "command_a";
  if (text.includes("<mm:think>")) return "minimax_m3";
  if (text.includes("<think{}>") && text.includes("HYTK")) return "hy_v3";
  if (text.includes("<|channel>thought")) return "gemma4";
  if (text.includes("<|open|>") && text.includes("'think'")) return "kimi_k3";
  if (text.includes("<|begin|>assistant<|think|>")) return "solar_open";
  if (text.includes("[BEGIN FINAL RESPONSE]")) return "apriel";
  if (text.includes("<|inner_prefix|>")) return "apertus";
  if (text.includes("<|start_of_role|>") && (text.includes("<think>") || text.includes("thought process"))) {
    return "granite";
  }
  if (text.includes("<|im_assistant|>") && text.includes("<think>")) return "kimi_k2";
  if (!code.includes("<think>") && !code.includes("</think>")) return undefined;
  return code.includes("<｜Assistant｜>") ? "deepseek_r1" : "qwen3";
}

/**
 * Where the rendered prompt leaves the thinking block of `markup`: `open` when its last opening marker
 * comes after its last closing one (DeepSeek-R1's generation prompt ending `<think>\n`: the output starts
 * inside reasoning); `closed` when it ends with a closing marker, whitespace aside (Qwen3's
 * `enable_thinking: false` prompt `<think>\n\n</think>\n\n`, DeepSeek V3.1's `</think>`, GLM-4.7's
 * `</think>`: the output is the answer); `undefined` when the prompt's end says neither (the parser's default).
 */
export function promptThinkingState(
  prompt: string,
  markup: Pick<ThinkingMarkup, "open" | "close">,
): "open" | "closed" | undefined {
  const open = prompt.lastIndexOf(markup.open);
  const close = prompt.lastIndexOf(markup.close);
  if (open >= 0 && open > close) return "open";
  if (close >= 0 && prompt.slice(close + markup.close.length).trim() === "") return "closed";
  return undefined;
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

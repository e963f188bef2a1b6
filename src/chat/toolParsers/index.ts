/**
 * Registry of tool-call parsers by name (vLLM's `--tool-call-parser` names where they exist) and their
 * detection from a chat template's text.
 */
import { jinjaCode } from "../textScan.ts";
import type { ToolParser, ToolParserOptions } from "./common.ts";
// --- token-delimited / JSON / pythonic families (tokenFormats.ts) ---
import { DelimitedToolParser } from "./delimited.ts";
import { FunctionaryV32ToolParser } from "./functionary.ts";
import { GenericJsonToolParser } from "./genericJson.ts";
import { HermesToolParser } from "./hermes.ts";
import { Llama3JsonToolParser } from "./llama3Json.ts";
import { MistralToolParser } from "./mistral.ts";
import {
  APERTUS,
  APRIEL,
  COMMAND_R,
  DEEPSEEK_V3,
  DEEPSEEK_V32,
  FIREFUNCTION_V2,
  FUNCTIONARY_V3_1,
  GEMMA4,
  GIGACHAT3,
  GRANITE,
  KIMI_K2,
  LFM2,
  PYTHONIC,
} from "./tokenFormats.ts";

// --- end token-delimited families ---

export { newToolCallId, type ToolParser, type ToolParserOptions } from "./common.ts";
export { type CallMarkup, type DelimitedSyntax, DelimitedToolParser } from "./delimited.ts";
export { FunctionaryV32ToolParser } from "./functionary.ts";
export { GenericJsonToolParser } from "./genericJson.ts";
export { HermesToolParser } from "./hermes.ts";
export { Llama3JsonToolParser } from "./llama3Json.ts";
export { MistralToolParser } from "./mistral.ts";

/**
 * Tool parser names: `hermes` (`<tool_call>` JSON, Hermes/Qwen), `llama3_json` (bare JSON with
 * `parameters`, optional `<|python_tag|>`), `mistral` (`[TOOL_CALLS]`), `generic` (the whole output is a
 * JSON call or array of calls, the shape grammar-forced `tool_choice` produces).
 *
 * Token-delimited / JSON / pythonic families (./tokenFormats.ts, ./functionary.ts): `deepseek_v3`
 * (R1 / V3 `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME` + fenced JSON), `deepseek_v31` (V3.1
 * `NAME<｜tool▁sep｜>{…}`; the same tolerant parser as `deepseek_v3`), `deepseek_v32` (V3.2 / V4 DSML
 * `<｜DSML｜invoke name="…">`), `kimi_k2`, `pythonic` (`[f(a=1)]`), `lfm2` (`<|tool_call_start|>` +
 * pythonic), `granite` (`<|tool_call|>[…]`), `gemma4` (`<|tool_call>call:NAME{…}<tool_call|>`),
 * `functionary_v3_1` (`<function=NAME>{…}</function>`), `functionary_v3_2` (`>>>NAME\n{…}`),
 * `firefunction_v2` (`functools[…]`), `command_r` (`<|START_ACTION|>` / `Action:` + fenced JSON),
 * `apriel` (`<tool_calls>[…]</tool_calls>`), `apertus` (`<|tools_prefix|>[{"NAME": {…}}]`),
 * `gigachat3` (`function call<|role_sep|>{…}`).
 */
export const TOOL_PARSER_NAMES = [
  "hermes",
  "llama3_json",
  "mistral",
  "generic",
  // --- token-delimited families ---
  "deepseek_v3",
  "deepseek_v31",
  "deepseek_v32",
  "kimi_k2",
  "pythonic",
  "lfm2",
  "granite",
  "gemma4",
  "functionary_v3_1",
  "functionary_v3_2",
  "firefunction_v2",
  "command_r",
  "apriel",
  "apertus",
  "gigachat3",
  // --- end token-delimited families ---
] as const;

/** One of {@link TOOL_PARSER_NAMES}. */
export type ToolParserName = (typeof TOOL_PARSER_NAMES)[number];

const ALIASES: Record<string, ToolParserName> = {
  qwen: "hermes",
  qwen2_5: "hermes",
  llama3: "llama3_json",
  json: "generic",
  // --- token-delimited families ---
  deepseek_r1: "deepseek_v3",
  deepseek_v4: "deepseek_v32",
  llama4_pythonic: "pythonic",
  olmo3: "pythonic",
  "lfm2.5": "lfm2",
  functionary: "functionary_v3_2",
  cohere: "command_r",
  // --- end token-delimited families ---
};

/**
 * The canonical name for `name` or one of its aliases (`qwen`, `qwen2_5`, `llama3`, `json`; `deepseek_r1`,
 * `deepseek_v4`, `llama4_pythonic`, `olmo3`, `lfm2.5`, `functionary`, `cohere`), else `undefined`.
 */
export function resolveToolParserName(name: string): ToolParserName | undefined {
  if ((TOOL_PARSER_NAMES as readonly string[]).includes(name)) return name as ToolParserName;
  return ALIASES[name];
}

/**
 * Creates a fresh parser (one per choice of one request). Throws an `Error` for an unknown name (a server
 * configuration mistake, not a client one).
 */
export function createToolParser(name: string, options: ToolParserOptions = {}): ToolParser {
  switch (resolveToolParserName(name)) {
    case "hermes":
      return new HermesToolParser(options);
    case "llama3_json":
      return new Llama3JsonToolParser(options);
    case "mistral":
      return new MistralToolParser(options);
    case "generic":
      return new GenericJsonToolParser(options);
    // --- token-delimited families ---
    case "deepseek_v3":
    case "deepseek_v31":
      return new DelimitedToolParser(DEEPSEEK_V3, options);
    case "deepseek_v32":
      return new DelimitedToolParser(DEEPSEEK_V32, options);
    case "kimi_k2":
      return new DelimitedToolParser(KIMI_K2, options);
    case "pythonic":
      return new DelimitedToolParser(PYTHONIC, options);
    case "lfm2":
      return new DelimitedToolParser(LFM2, options);
    case "granite":
      return new DelimitedToolParser(GRANITE, options);
    case "gemma4":
      return new DelimitedToolParser(GEMMA4, options);
    case "functionary_v3_1":
      return new DelimitedToolParser(FUNCTIONARY_V3_1, options);
    case "functionary_v3_2":
      return new FunctionaryV32ToolParser(options);
    case "firefunction_v2":
      return new DelimitedToolParser(FIREFUNCTION_V2, options);
    case "command_r":
      return new DelimitedToolParser(COMMAND_R, options);
    case "apriel":
      return new DelimitedToolParser(APRIEL, options);
    case "apertus":
      return new DelimitedToolParser(APERTUS, options);
    case "gigachat3":
      return new DelimitedToolParser(GIGACHAT3, options);
    // --- end token-delimited families ---
    default:
      throw new Error(`Unknown tool call parser "${name}"; known: ${TOOL_PARSER_NAMES.join(", ")}`);
  }
}

// --- token-delimited families: detection (runs before the others; each marker is a model's own token) ---
/**
 * The token-delimited / JSON / pythonic family a template (its text, Jinja comments removed: these
 * families' markers are the model's own tokens, often written as literal template text) renders tool
 * calls in, or `undefined`:
 * DeepSeek `tool▁call▁begin` (`deepseek_v3` when a ```` ```json ```` fence follows the name, else
 * `deepseek_v31`), `｜DSML｜` → `deepseek_v32`, `<|tool_calls_section_begin|>` → `kimi_k2`,
 * `<|tool_call>` → `gemma4`, `<|tool_call|>` → `granite`, `<|tool_call_start|>` / `<|tool_list_start|>` /
 * `List of tools: [` → `lfm2`, `<|START_ACTION|>` or `Action:` + ```` ```json ```` → `command_r`,
 * `functools` → `firefunction_v2`, `>>>` + `recipient` → `functionary_v3_2`, `<function=` with an
 * `ipython` role → `functionary_v3_1`, `<|tools_prefix|>` → `apertus`, `function call` + `<|role_sep|>`
 * → `gigachat3`, `<tool_calls>` → `apriel`.
 */
export function detectTokenToolParser(text: string): ToolParserName | undefined {
  if (text.includes("tool▁call▁begin")) return text.includes("```json") ? "deepseek_v3" : "deepseek_v31";
  if (text.includes("｜DSML｜")) return "deepseek_v32";
  if (text.includes("<|tool_calls_section_begin|>")) return "kimi_k2";
  if (text.includes("<|tool_call>")) return "gemma4";
  if (text.includes("<|tool_call|>")) return "granite";
  if (text.includes("<|tool_call_start|>") || text.includes("<|tool_list_start|>")) return "lfm2";
  if (text.includes("List of tools: [")) return "lfm2";
  if (text.includes("<|START_ACTION|>") || (text.includes("Action:") && text.includes("```json"))) {
    return "command_r";
  }
  if (text.includes("functools")) return "firefunction_v2";
  if (text.includes(">>>") && text.includes("recipient")) return "functionary_v3_2";
  if (text.includes("<function=") && text.includes("ipython")) return "functionary_v3_1";
  if (text.includes("<|tools_prefix|>")) return "apertus";
  if (text.includes("function call") && text.includes("role_sep")) return "gigachat3";
  if (text.includes("<tool_calls>")) return "apriel";
  return undefined;
}
// --- end token-delimited families: detection ---

/**
 * Chooses a tool parser from the chat template text (Jinja comments ignored), in this order:
 * the token-delimited families ({@link detectTokenToolParser});
 * `<tool_call>` → `hermes`; `[TOOL_CALLS]` → `mistral`; `<|python_tag|>` or an `ipython` role →
 * `llama3_json`; any other template whose code uses a `tools` variable → `generic`; else `undefined`
 * (the template renders no tools: with `tool_choice` `"required"`/named the caller still forces and
 * parses the `generic` format).
 */
export function detectToolParser(template: string): ToolParserName | undefined {
  const code = jinjaCode(template);
  const token = detectTokenToolParser(template.replace(/\{#[\s\S]*?#\}/g, ""));
  if (token) return token;
  if (code.includes("<tool_call>")) return "hermes";
  if (code.includes("[TOOL_CALLS]")) return "mistral";
  if (code.includes("<|python_tag|>") || code.includes("ipython")) return "llama3_json";
  if (/\btools\b/.test(code)) return "generic";
  return undefined;
}

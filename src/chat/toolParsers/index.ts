/**
 * Registry of tool-call parsers by name (vLLM's `--tool-call-parser` names where they exist) and their
 * detection from a chat template's text.
 */
import { jinjaCode } from "../textScan.ts";
// --- token-delimited / JSON / pythonic families (tokenFormats.ts) ---
import { DelimitedToolParser } from "./delimited.ts";
import { FunctionaryV32ToolParser } from "./functionary.ts";
import { GenericJsonToolParser } from "./genericJson.ts";
import { HarmonyParser } from "./harmony.ts";
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
import type { ToolParser, ToolParserOptions } from "./toolParser.ts";

// --- end token-delimited families ---
// XML-style families (qwen3_coder, seed_oss, glm45/glm47, minimax_m2, minimax_m3, minimax, muse_glimmer, hy_v3, nemotron_json, minicpm5)
import { XmlBlockToolParser } from "./xmlBlock.ts";
import {
  GLM,
  HY_V3,
  KIMI_K3,
  MINICPM5,
  MINIMAX_M1,
  MINIMAX_M2,
  MINIMAX_M3,
  MUSE_GLIMMER,
  NEMOTRON_JSON,
  QWEN3_CODER,
  SEED_OSS,
  SOLAR_OPEN,
} from "./xmlFamilies.ts";

export { type CallMarkup, type DelimitedSyntax, DelimitedToolParser } from "./delimited.ts";
export { FunctionaryV32ToolParser } from "./functionary.ts";
export { GenericJsonToolParser } from "./genericJson.ts";
export { HarmonyParser, type HarmonyParserOptions } from "./harmony.ts";
export { HermesToolParser } from "./hermes.ts";
export { Llama3JsonToolParser } from "./llama3Json.ts";
export { MistralToolParser } from "./mistral.ts";
export { newToolCallId, type ToolParser, type ToolParserOptions } from "./toolParser.ts";
export { XmlBlockToolParser } from "./xmlBlock.ts";

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
 * XML-style families (`xmlFamilies.ts`): `qwen3_coder` (`<tool_call><function=…><parameter=…>`),
 * `seed_oss` (`<seed:tool_call><function=…>`), `glm45` / `glm47` (`<tool_call>NAME<arg_key>…`),
 * `minimax_m2` (`<minimax:tool_call><invoke name=…>`), `minimax_m3` (`]<]minimax[>[`-prefixed nested
 * elements), `minimax` (MiniMax-M1 `<tool_calls>` JSON lines), `hy_v3` (Hunyuan 3 `<tool_calls:opensource>`),
 * `kimi_k3` (Kimi K3 XTML `<|open|>tools<|sep|>`), `solar_open` (`<|tool_call:begin|>…<|tool_call:end|>`),
 * `muse_glimmer` (`<atem:function_calls><atem:invoke …>`), `nemotron_json` (`<TOOLCALL>[…]</TOOLCALL>`),
 * `minicpm5` (`<function name="NAME"><param name="K">V</param></function>`).
 * Harmony (`harmony.ts`): `openai` (gpt-oss `<|channel|>commentary to=functions.NAME … <|message|>{…}`; it
 * also splits the analysis channel off as reasoning).
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
  // XML-style families
  "qwen3_coder",
  "seed_oss",
  "glm45",
  "glm47",
  "minimax_m2",
  "minimax_m3",
  "minimax",
  "muse_glimmer",
  "hy_v3",
  "kimi_k3",
  "solar_open",
  "nemotron_json",
  "minicpm5",
  // Harmony (gpt-oss)
  "openai",
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
  // XML-style families
  qwen3_xml: "qwen3_coder",
  step3p5: "qwen3_coder",
  poolside_v1: "glm47",
};

/**
 * The canonical name for `name` or one of its aliases (`qwen`, `qwen2_5`, `llama3`, `json`; `deepseek_r1`,
 * `deepseek_v4`, `llama4_pythonic`, `olmo3`, `lfm2.5`, `functionary`, `cohere`; `qwen3_xml` and `step3p5`
 * for `qwen3_coder`, `poolside_v1` for `glm47`), else `undefined`.
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
    // XML-style families
    case "qwen3_coder":
      return new XmlBlockToolParser(QWEN3_CODER, options);
    case "seed_oss":
      return new XmlBlockToolParser(SEED_OSS, options);
    case "glm45":
    case "glm47":
      return new XmlBlockToolParser(GLM, options);
    case "minimax_m2":
      return new XmlBlockToolParser(MINIMAX_M2, options);
    case "minimax_m3":
      return new XmlBlockToolParser(MINIMAX_M3, options);
    case "minimax":
      return new XmlBlockToolParser(MINIMAX_M1, options);
    case "hy_v3":
      return new XmlBlockToolParser(HY_V3, options);
    case "kimi_k3":
      return new XmlBlockToolParser(KIMI_K3, options);
    case "solar_open":
      return new XmlBlockToolParser(SOLAR_OPEN, options);
    case "muse_glimmer":
      return new XmlBlockToolParser(MUSE_GLIMMER, options);
    case "nemotron_json":
      return new XmlBlockToolParser(NEMOTRON_JSON, options);
    case "minicpm5":
      return new XmlBlockToolParser(MINICPM5, options);
    case "openai":
      return new HarmonyParser(options.newId !== undefined ? { newId: options.newId } : {});
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
 * Harmony's `<|channel|>` with `functions.` recipients → `openai`; the token-delimited families ({@link detectTokenToolParser});
 * `<tool_call>` → `hermes`; `[TOOL_CALLS]` → `mistral`; `<|python_tag|>` or an `ipython` role →
 * the XML-style families first ({@link detectXmlToolParser}); `<tool_call>` → `hermes`; `[TOOL_CALLS]` → `mistral`; `<|python_tag|>` or an `ipython` role →
 * `llama3_json`; any other template whose code uses a `tools` variable → `generic`; else `undefined`
 * (the template renders no tools: with `tool_choice` `"required"`/named the caller still forces and
 * parses the `generic` format).
 */
export function detectToolParser(template: string): ToolParserName | undefined {
  if (jinjaCode(template).includes("<|channel|>") && template.includes("functions.")) return "openai";
  const xml = detectXmlToolParser(template);
  if (xml) return xml;
  const code = jinjaCode(template);
  const token = detectTokenToolParser(template.replace(/\{#[\s\S]*?#\}/g, ""));
  if (token) return token;
  if (code.includes("<tool_call>")) return "hermes";
  if (code.includes("[TOOL_CALLS]")) return "mistral";
  if (code.includes("<|python_tag|>") || code.includes("ipython")) return "llama3_json";
  if (/\btools\b/.test(code)) return "generic";
  return undefined;
}

// XML-style families: detection
/**
 * The XML-style family a chat template writes its calls in, looked for in the whole template text
 * (Jinja comments removed), since some write the markup as literal text (GLM's `<arg_key>`):
 * `<function name="` with `<param name="` → `minicpm5` (before Hunyuan: MiniCPM5's template also splits
 * content at a `<tool_sep>`); `]<]minimax[>[` → `minimax_m3`; `<tool_sep` → `hy_v3`; `'<|open|>'` with a `call` tag → `kimi_k3`;
 * `<|tool_call:begin|>` → `solar_open`; `<minimax:tool_call>` → `minimax_m2`; `<seed:tool_call>` → `seed_oss`; `<atem:function_calls>` →
 * `muse_glimmer`; `<tool_call>` with `<function=` → `qwen3_coder`; `<arg_key>` → `glm45` when a line
 * break (raw or a `\n` escape) comes right before it, as GLM-4.5/4.6 write, else `glm47`;
 * `<tool_calls>` not followed by `[` → `minimax` (MiniMax-M1); `<TOOLCALL>` → `nemotron_json`; else `undefined`.
 */
export function detectXmlToolParser(template: string): ToolParserName | undefined {
  const text = template.replace(/\{#[\s\S]*?#\}/g, "");
  if (text.includes('<function name="') && text.includes('<param name="')) return "minicpm5";
  if (text.includes("]<]minimax[>[")) return "minimax_m3";
  if (text.includes("<tool_sep")) return "hy_v3";
  if (text.includes("<|open|>") && text.includes("open_tag('call'")) return "kimi_k3";
  if (text.includes("<|tool_call:begin|>")) return "solar_open";
  if (text.includes("<minimax:tool_call>")) return "minimax_m2";
  if (text.includes("<seed:tool_call>")) return "seed_oss";
  if (text.includes("<atem:function_calls>")) return "muse_glimmer";
  if (text.includes("<tool_call>") && text.includes("<function=")) return "qwen3_coder";
  if (text.includes("<arg_key>")) return /\n<arg_key>|\\n<arg_key>/.test(text) ? "glm45" : "glm47";
  // Apriel writes a JSON array in the same tag (`<tool_calls>[`): that is the `apriel` format.
  if (text.includes("<tool_calls>") && !text.includes("<tool_calls>[")) return "minimax";
  if (text.includes("<TOOLCALL>")) return "nemotron_json";
  return undefined;
}

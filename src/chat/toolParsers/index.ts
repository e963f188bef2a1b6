/**
 * Registry of tool-call parsers by name (vLLM's `--tool-call-parser` names where they exist) and their
 * detection from a chat template's text.
 */
import { jinjaCode } from "../textScan.ts";
import type { ToolParser, ToolParserOptions } from "./common.ts";
import { GenericJsonToolParser } from "./genericJson.ts";
import { HermesToolParser } from "./hermes.ts";
import { Llama3JsonToolParser } from "./llama3Json.ts";
import { MistralToolParser } from "./mistral.ts";

export { newToolCallId, type ToolParser, type ToolParserOptions } from "./common.ts";
export { GenericJsonToolParser } from "./genericJson.ts";
export { HermesToolParser } from "./hermes.ts";
export { Llama3JsonToolParser } from "./llama3Json.ts";
export { MistralToolParser } from "./mistral.ts";

/**
 * Tool parser names: `hermes` (`<tool_call>` JSON, Hermes/Qwen), `llama3_json` (bare JSON with
 * `parameters`, optional `<|python_tag|>`), `mistral` (`[TOOL_CALLS]`), `generic` (the whole output is a
 * JSON call or array of calls, the shape grammar-forced `tool_choice` produces).
 */
export const TOOL_PARSER_NAMES = ["hermes", "llama3_json", "mistral", "generic"] as const;

/** One of {@link TOOL_PARSER_NAMES}. */
export type ToolParserName = (typeof TOOL_PARSER_NAMES)[number];

const ALIASES: Record<string, ToolParserName> = {
  qwen: "hermes",
  qwen2_5: "hermes",
  llama3: "llama3_json",
  json: "generic",
};

/** The canonical name for `name` or one of its aliases (`qwen`, `qwen2_5`, `llama3`, `json`), else `undefined`. */
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
    default:
      throw new Error(`Unknown tool call parser "${name}"; known: ${TOOL_PARSER_NAMES.join(", ")}`);
  }
}

/**
 * Chooses a tool parser from the chat template text (Jinja comments ignored), in this order:
 * `<tool_call>` → `hermes`; `[TOOL_CALLS]` → `mistral`; `<|python_tag|>` or an `ipython` role →
 * `llama3_json`; any other template whose code uses a `tools` variable → `generic`; else `undefined`
 * (the template renders no tools: with `tool_choice` `"required"`/named the caller still forces and
 * parses the `generic` format).
 */
export function detectToolParser(template: string): ToolParserName | undefined {
  const code = jinjaCode(template);
  if (code.includes("<tool_call>")) return "hermes";
  if (code.includes("[TOOL_CALLS]")) return "mistral";
  if (code.includes("<|python_tag|>") || code.includes("ipython")) return "llama3_json";
  if (/\btools\b/.test(code)) return "generic";
  return undefined;
}

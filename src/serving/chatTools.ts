/**
 * How a chat request uses its tools: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`,
 * checked as vLLM's `ChatCompletionRequest.check_tool_usage` does, resolved to what the chat serving
 * does with the output (force it with a grammar, parse it, or leave it as content).
 */
import {
  detectToolParser,
  type JsonSchema,
  resolveToolParserName,
  toolChoiceToJsonSchema,
} from "../chat/index.ts";
import { badRequest } from "../errors.ts";
import type { ChatCompletionRequest } from "../protocol/chat.ts";
import {
  type ForcedTool,
  isToolGrammarFamily,
  type ToolGrammarFamily,
  toolGrammarFits,
} from "./toolGrammars.ts";

/**
 * What the serving does with a chat request's tools:
 * - `none`: no tools, or `tool_choice: "none"`: the output is never parsed for calls (the tools are
 *   still rendered into the prompt, as vLLM does without `--exclude-tools-when-tool-choice-none`);
 * - `auto` (`tool_choice` `"auto"` or absent, with tools): the model's free output is parsed by
 *   `parser`; without one (a template that renders no tools, e.g. the ChatML fallback, and no
 *   `--tool-call-parser`) the output is plain content;
 * - `forced` (`"required"` or a named function): a grammar built from `schema` forces the call(s).
 *   When the family's parser has a native forced format (`markup`; today `hermes` and, for one call,
 *   `llama3_json`) the grammar writes the calls in that markup and that parser reads them back, so the
 *   model writes what it was trained on. The XML and token families of `toolGrammars.ts` (`qwen3_coder`,
 *   `glm45`/`glm47`, `minimax_m2`, `mistral` v11+, `deepseek_v3`/`deepseek_v31`, `kimi_k2`) have a
 *   grammar of their own (`native`) when their tools' schemas fit it; every other family (or tools that
 *   do not fit) falls back to the `generic` JSON form,
 *   which the `generic` parser reads back. It forces exactly one call unless `parallel_tool_calls` is
 *   explicitly true (then a JSON array of one or more calls, as vLLM forces for `"required"`): the
 *   default of llama-server, whose forced grammars also allow several calls only on request. OpenAI's
 *   default is true, but a forced array leaves the number of calls to the model, and a small one may
 *   never close it (stories260K repeats `}, {` until `max_tokens`).
 */
export type ToolCalling = {
  mode: "none" | "auto" | "forced";
  /** The tool parser name for the output, or undefined (no tool parsing). */
  parser: string | undefined;
  /** The JSON Schema the output must follow (`forced` only; see `toolChoiceToJsonSchema`). */
  schema: JsonSchema | undefined;
  /** False when `parallel_tool_calls` is false: at most one call is returned (the first). */
  parallel: boolean;
  /**
   * `forced` only: the index in `tools` of each call option of `schema`, in its order (every tool for
   * `"required"`, the named one otherwise), so that a compile error is reported against the client's
   * `tools[i].function.parameters` (`chatGrammar.ts`).
   */
  schemaTools?: readonly number[];
  /**
   * `forced` only: the family's own markup around each forced call (`schema` is then one call's
   * object, not an array), or undefined for the `generic` JSON form.
   */
  markup: ToolCallMarkup | undefined;
  /**
   * `forced` only: the family grammar of `toolGrammars.ts` that writes the call(s) instead of `schema`
   * (`schema` is then kept only as the generic form's description), or absent.
   */
  native?: { family: ToolGrammarFamily; tools: ForcedTool[]; repeat: boolean };
};

/**
 * A family's native wrapping of one JSON tool call (`{"name": …, "<argumentsKey>": …}`) in forced
 * output: `open` + call + `close`, repeated (separated by `separator`) when `repeat` is true.
 */
export type ToolCallMarkup = {
  open: string;
  close: string;
  separator: string;
  /**
   * True when several consecutive calls may be forced: the family's parser reads them and the request
   * set `parallel_tool_calls: true` (else exactly one call is forced).
   */
  repeat: boolean;
  /** The key the family writes the arguments under (`arguments`, or `parameters` for Llama 3). */
  argumentsKey: "arguments" | "parameters";
};

/**
 * The families whose forced calls are written in their own markup; the others use the generic JSON
 * form. `hermes`: `<tool_call>\n{json}\n</tool_call>` as the Hermes 2 Pro / Qwen2.5 / Qwen3 templates
 * show it, several calls one after another (newline-separated); `llama3_json`: the bare
 * `{"name": …, "parameters": …}` object of Meta's Llama 3.1+ templates, one call only (a forced
 * `parallel_tool_calls: true` falls back to the generic array).
 */
const NATIVE_MARKUP: Partial<Record<string, ToolCallMarkup>> = {
  hermes: {
    open: "<tool_call>\n",
    close: "\n</tool_call>",
    separator: "\n",
    repeat: true,
    argumentsKey: "arguments",
  },
  llama3_json: { open: "", close: "", separator: "", repeat: false, argumentsKey: "parameters" },
};

/**
 * Mistral's tokenizer v3 form (Mistral 7B v0.3 / Nemo / Small templates, which show no `[ARGS]`):
 * `[TOOL_CALLS][{"name": …, "arguments": …}]`, one array per call; several calls repeat the tag, which
 * the `mistral` parser reads as more calls.
 */
const MISTRAL_V3_MARKUP: ToolCallMarkup = {
  open: "[TOOL_CALLS][",
  close: "]",
  separator: "",
  repeat: true,
  argumentsKey: "arguments",
};

/**
 * Resolves the request's tool use.
 * @param configuredParser `--tool-call-parser`, which wins over detection from `template`.
 * @param template the chat template the prompt is rendered with (detection: `detectToolParser`).
 * A `tool_choice` (other than `"none"`) without tools was refused before (`requestChecks.ts`).
 * @throws ApiError 400 when two tools share a name (`tools[i].function.name`), or when a named `tool_choice` is not among
 *   the tools (`tool_choice`).
 */
export function resolveToolCalling(
  body: ChatCompletionRequest,
  configuredParser: string | undefined,
  template: string,
): ToolCalling {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? undefined;
  const parallel = body.parallel_tool_calls !== false;
  const seen = new Set<string>();
  tools.forEach((tool, index) => {
    if (seen.has(tool.function.name)) {
      throw badRequest(
        `Two tools are named '${tool.function.name}'; tool names must be unique.`,
        `tools[${index}].function.name`,
      );
    }
    seen.add(tool.function.name);
  });
  if (tools.length === 0 || choice === "none") {
    return { mode: "none", parser: undefined, schema: undefined, parallel, markup: undefined };
  }
  const family = configuredParser ?? detectToolParser(template);
  const manyCalls = body.parallel_tool_calls === true;
  // The index in `tools` of each call option of a forced schema, for errors against the client's schema.
  const schemaTools =
    choice === "required"
      ? tools.map((_, index) => index)
      : [
          tools.findIndex(
            (tool) => typeof choice === "object" && tool.function.name === choice.function.name,
          ),
        ];
  if (choice !== undefined && choice !== "auto") {
    const name = family === undefined ? undefined : resolveToolParserName(family);
    const options: ForcedTool[] = schemaTools.flatMap((index) => {
      const tool = tools[index];
      return tool ? [{ index, tool }] : [];
    });
    const v11 = name !== "mistral" || template.includes("[ARGS]");
    if (isToolGrammarFamily(name) && v11 && options.length > 0 && toolGrammarFits(name, options)) {
      const schema = toolChoiceToJsonSchema(tools, choice, manyCalls);
      const native = { family: name, tools: options, repeat: manyCalls };
      if (schema) {
        return { mode: "forced", parser: name, schema, parallel, markup: undefined, schemaTools, native };
      }
    }
    const markup =
      name === undefined ? undefined : name === "mistral" ? MISTRAL_V3_MARKUP : NATIVE_MARKUP[name];
    if (markup && (markup.repeat || !manyCalls)) {
      const schema = toolChoiceToJsonSchema(tools, choice, false, markup.argumentsKey);
      const forced = { ...markup, repeat: markup.repeat && manyCalls };
      if (schema) return { mode: "forced", parser: name, schema, parallel, markup: forced, schemaTools };
    }
  }
  const schema = toolChoiceToJsonSchema(tools, choice, manyCalls);
  if (schema) return { mode: "forced", parser: "generic", schema, parallel, markup: undefined, schemaTools };
  return { mode: "auto", parser: family, schema: undefined, parallel, markup: undefined };
}

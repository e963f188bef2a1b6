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
} from "../../chat/index.ts";
import { badRequest } from "../../errors.ts";
import type { ChatCompletionRequest } from "../../protocol/chat.ts";
import type { ChatTool } from "../../protocol/tools.ts";
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
 *   `--tool-call-parser`) the output is plain content. When a tool is `strict: true`, a lazy grammar
 *   (`lazy`) enforces the calls from the family's call marker on, the text before it staying free;
 * - `forced` (`"required"` or a named function): a grammar built from `schema` forces the call(s).
 *   When the family's parser has a native forced format (`markup`; today `hermes` and, for one call,
 *   `llama3_json`) the grammar writes the calls in that markup and that parser reads them back, so the
 *   model writes what it was trained on. The XML and token families of `toolGrammars.ts` (`qwen3_coder`,
 *   `glm45`/`glm47`, `minimax_m2`, `minicpm5`, `mistral` v11+, `deepseek_v3`/`deepseek_v31`, `kimi_k2`, gpt-oss's
 *   Harmony `openai`) have a
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
  /**
   * `auto` only, when some tool is `strict: true`: the lazy grammar that enforces the calls (see
   * {@link LazyToolGrammar}), or absent.
   */
  lazy?: LazyToolGrammar;
};

/**
 * The lazy grammar of `strict: true` tools under `tool_choice: "auto"` (llama.cpp's `grammar_lazy` with
 * its format's trigger words, common/chat.cpp): the output is free text until one of `triggers` (every
 * opening `parser` reads a call from) appears outside the thinking block; from there the grammar writes
 * the call(s) in the family's own markup, which the parser reads back. The strict tools' arguments follow
 * their schemas; the other tools of the request can be called too, with free-form arguments (`free` in
 * `ForcedTool`): their calls are still written in the markup, but their arguments are not held to their
 * schemas, as without `strict`. An opening the parser reads but the grammar does not write (Qwen3-Coder's
 * bare `<function=`, DeepSeek's `<｜tool▁call▁begin｜>` without the section) is a trigger too, which the
 * grammar then refuses: the model writes the canonical form. Exactly one of `native` (the families of
 * `toolGrammars.ts`) and `schema` + `markup` (`hermes`, Mistral's v3 form) is set.
 */
export type LazyToolGrammar = {
  triggers: readonly string[];
  native?: { family: ToolGrammarFamily; tools: ForcedTool[]; repeat: boolean };
  /** One call's JSON Schema (an `anyOf` over every tool, in `tools` order) for `markup`. */
  schema?: JsonSchema;
  markup?: ToolCallMarkup;
};

/**
 * The openings each family's parser reads a call from (`src/chat/toolParsers/`), which start its lazy
 * grammar; the first of each is the one the grammar writes.
 */
const LAZY_TRIGGERS: Partial<Record<string, readonly string[]>> = {
  hermes: ["<tool_call>"],
  qwen3_coder: ["<tool_call>", "<function="],
  glm45: ["<tool_call>"],
  glm47: ["<tool_call>"],
  minimax_m2: ["<minimax:tool_call>"],
  minicpm5: ['<function name="'],
  mistral: ["[TOOL_CALLS]"],
  deepseek_v3: ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"],
  deepseek_v31: ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"],
  kimi_k2: ["<|tool_calls_section_begin|>", "<|tool_call_section_begin|>", "<|tool_call_begin|>"],
  openai: ["<|channel|>commentary to=functions."],
};

/**
 * True when family `name` (a resolved tool-parser name) enforces `strict: true` tools under
 * `tool_choice: "auto"` with a lazy grammar (it has call openings to start one from); the others refuse
 * them with a 400 naming `tools[i].function.strict`.
 */
export function hasLazyToolGrammar(name: string): boolean {
  return LAZY_TRIGGERS[name] !== undefined;
}

/**
 * True when a forced `tool_choice` (`"required"` or named) in family `name` is written in the family's
 * own markup (`NATIVE_MARKUP`, Mistral's forms, or a grammar of `toolGrammars.ts`) when its tools fit;
 * the others are forced in the `generic` JSON form.
 */
export function hasNativeForcedForm(name: string): boolean {
  return isToolGrammarFamily(name) || name === "mistral" || NATIVE_MARKUP[name] !== undefined;
}

/**
 * The lazy grammar for the `strict: true` tools of an `auto` request in family `name`'s markup
 * ({@link LazyToolGrammar}); `repeat`: several calls may follow one another.
 * @param v11 Mistral: the template writes the v11 `[TOOL_CALLS]NAME[ARGS]{…}` form (else the v3 array).
 * @throws ApiError 400 naming `tools[i].function.strict` (the first strict tool) when the family has no
 *   grammar that starts at its call marker (no family, `llama3_json`'s bare JSON, `pythonic` …), or when
 *   a strict tool's parameters cannot be written in the family's markup exactly (an XML family's string
 *   parameter with a `pattern`, say); 400 naming `tools[i].function.name` for a tool name the markup
 *   cannot spell.
 */
function lazyToolGrammar(
  tools: readonly ChatTool[],
  name: string | undefined,
  v11: boolean,
  repeat: boolean,
): LazyToolGrammar {
  const strictAt = tools.findIndex((tool) => tool.function.strict === true);
  const param = `tools[${strictAt}].function.strict`;
  const triggers = name === undefined ? undefined : LAZY_TRIGGERS[name];
  if (!triggers) {
    throw badRequest(
      `strict: true under tool_choice "auto" is enforced by a grammar that starts at the model's tool-call marker; the ${name === undefined ? "chat template's tool-call format is not known here (no tool parser detected or configured)" : `'${name}' tool-call format has no such grammar here`}. Send tool_choice "required" or a named function (enforced in any format), or strict: false.`,
      param,
    );
  }
  const options: ForcedTool[] = tools.map((tool, index) => ({
    index,
    tool,
    ...(tool.function.strict === true ? {} : { free: true }),
  }));
  if (isToolGrammarFamily(name) && (name !== "mistral" || v11)) {
    for (const option of options) {
      if (toolGrammarFits(name, [option])) continue;
      const strict = !option.free && toolGrammarFits(name, [{ ...option, free: true }]);
      throw badRequest(
        strict
          ? `strict: true under tool_choice "auto" cannot be enforced for '${option.tool.function.name}' in the '${name}' markup: a parameter's schema has no value form that reads back exactly (a string with pattern, format or a type list, a $ref, an undeclared required key). Send strict: false, or tool_choice "required" or a named function (then the generic JSON form enforces it).`
          : `The '${name}' tool-call markup cannot spell the tool name '${option.tool.function.name}' (markup characters, a line break, or surrounding spaces), which the strict tools' grammar would have to write.`,
        strict ? `tools[${option.index}].function.strict` : `tools[${option.index}].function.name`,
      );
    }
    return { triggers, native: { family: name, tools: options, repeat } };
  }
  const markup = name === "mistral" ? MISTRAL_V3_MARKUP : NATIVE_MARKUP.hermes;
  const callable = options.map(({ tool, free }) =>
    free ? { ...tool, function: { ...tool.function, parameters: { type: "object" } } } : tool,
  );
  const schema = toolChoiceToJsonSchema(callable, "required", false, markup?.argumentsKey);
  if (!markup || !schema) throw new Error("unreachable: a lazy family without markup");
  return { triggers, schema, markup: { ...markup, repeat } };
}

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
 *   the tools (`tool_choice`); under `auto`, a `strict: true` tool the family's lazy grammar cannot
 *   enforce (`tools[i].function.strict`, see `lazyToolGrammar`).
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
  const auto: ToolCalling = { mode: "auto", parser: family, schema: undefined, parallel, markup: undefined };
  if (!tools.some((tool) => tool.function.strict === true)) return auto;
  const name = family === undefined ? undefined : resolveToolParserName(family);
  const v11 = name !== "mistral" || template.includes("[ARGS]");
  return { ...auto, parser: name, lazy: lazyToolGrammar(tools, name, v11, parallel) };
}

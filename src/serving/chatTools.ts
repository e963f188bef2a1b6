/**
 * How a chat request uses its tools: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`,
 * checked as vLLM's `ChatCompletionRequest.check_tool_usage` does, resolved to what the chat serving
 * does with the output (force it with a grammar, parse it, or leave it as content).
 */
import { detectToolParser, type JsonSchema, toolChoiceToJsonSchema } from "../chat/index.ts";
import { badRequest } from "../errors.ts";
import type { ChatCompletionRequest } from "../protocol/chat.ts";

/**
 * What the serving does with a chat request's tools:
 * - `none`: no tools, or `tool_choice: "none"`: the output is never parsed for calls (the tools are
 *   still rendered into the prompt, as vLLM does without `--exclude-tools-when-tool-choice-none`);
 * - `auto` (`tool_choice` `"auto"` or absent, with tools): the model's free output is parsed by
 *   `parser`; without one (a template that renders no tools, e.g. the ChatML fallback, and no
 *   `--tool-call-parser`) the output is plain content;
 * - `forced` (`"required"` or a named function): a grammar built from `schema` forces the call(s),
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
    return { mode: "none", parser: undefined, schema: undefined, parallel };
  }
  const schema = toolChoiceToJsonSchema(tools, choice, body.parallel_tool_calls === true);
  if (schema) {
    const schemaTools =
      choice === "required"
        ? tools.map((_, index) => index)
        : [
            tools.findIndex(
              (tool) => typeof choice === "object" && tool.function.name === choice.function.name,
            ),
          ];
    return { mode: "forced", parser: "generic", schema, parallel, schemaTools };
  }
  return {
    mode: "auto",
    parser: configuredParser ?? detectToolParser(template),
    schema: undefined,
    parallel,
  };
}

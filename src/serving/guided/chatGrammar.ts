/**
 * The guided-decoding grammar of a chat request: the request's own constraint (`response_format`,
 * `guided_*`, `structured_outputs`) or the call(s) a forced `tool_choice` demands, and, when a reasoning
 * parser is active, an allowance for a `<think>…</think>` block before it, so that the constraint applies
 * to the answer and not to the thinking (as vLLM applies structured output only after the reasoning end).
 * A raw GBNF grammar (`guided_grammar`, `structured_outputs.grammar`) is the exception: it describes the
 * whole output as written, thinking included, so a client can constrain (or skip) the thinking too.
 */
import type { JsonSchema } from "../../chat/index.ts";
import type { Grammar } from "../../engine/types.ts";
import { ApiError, badRequest } from "../../errors.ts";
import { prefixRules } from "../../structured/gbnf/ruleNames.ts";
import {
  allowThinking,
  type RootedGbnf,
  THINK_MARKUP,
  type ThinkingGrammarMarkup,
  unusedRulePrefix,
} from "../../structured/gbnf/thinking.ts";
import type { RequestFields } from "../request/requestFields.ts";
import type { LazyToolGrammar, ToolCalling, ToolCallMarkup } from "./chatTools.ts";
import { compileGuided, grammarForGbnf } from "./guidedDecoding.ts";
import { type CompileJson, toolGrammar } from "./toolGrammars.ts";

/**
 * Where the output stands with respect to thinking when generation starts: `none` (no reasoning
 * parser: the grammar is the constraint as is), `optional` (the model may open `<think>` first),
 * `open` (the prompt opened the block: the output starts inside it and must close it).
 */
export type ThinkingStart = "none" | "optional" | "open";

export type { ThinkingGrammarMarkup } from "../../structured/gbnf/thinking.ts";

/**
 * The native grammar of a chat request, or null when nothing constrains it. `markup` is the reasoning
 * family's (defaults to `<think>…</think>`). `strict` tools under `tool_choice: "auto"` give a lazy
 * grammar (`Grammar.lazy`), which starts at the family's tool-call marker.
 * A forced `tool_choice` with another constraint was refused before (`requestChecks.ts`).
 * @throws ApiError 400 for `nvext.max_thinking_tokens` with a GBNF grammar while reasoning is parsed (the
 *   close text could break the grammar), and the compile errors of the constraint or of the tools' parameter schemas
 *   (param `tools[i].function.parameters`, pointers relative to those parameters).
 */
export async function chatGrammar(
  fields: RequestFields,
  tools: ToolCalling,
  thinking: ThinkingStart,
  signal?: AbortSignal,
  markup: ThinkingGrammarMarkup = THINK_MARKUP,
): Promise<Grammar | null> {
  const { constraint, whitespacePattern, whitespacePatternParam, maxThinkingTokens } = fields;
  let compiled: { gbnf: string; root: string; param: string; answerOnly: boolean } | null = null;
  const compile = (schema: JsonSchema, tool: number) =>
    compileGuided(
      { kind: "json_schema", spec: schema, param: "tools" },
      whitespacePattern,
      signal,
      whitespacePatternParam,
    ).catch((error: unknown) => {
      if (!(error instanceof ApiError) || error.status !== 400 || error.param !== "tools") throw error;
      throw badRequest(error.message, `tools[${tool}].function.parameters`, error.code);
    });
  if (tools.lazy) return lazyToolGrammar(tools.lazy, fields, thinking, compile, signal, markup);
  if (tools.native) {
    const native = tools.native;
    const gbnf = await toolGrammar(native.family, native.tools, native.repeat, compile, prefixRules);
    compiled = { gbnf, root: "root", param: "tools", answerOnly: true };
  } else if (tools.schema) {
    const gbnf = await compileGuided(
      { kind: "json_schema", spec: tools.schema, param: "tools" },
      whitespacePattern,
      signal,
      whitespacePatternParam,
    ).catch((error: unknown) => {
      throw error instanceof ApiError ? inToolParameters(error, tools.schemaTools ?? []) : error;
    });
    const wrapped = tools.markup ? wrapCalls(gbnf, tools.markup) : { gbnf, root: "root" };
    compiled = { ...wrapped, param: "tools", answerOnly: true };
  } else if (constraint) {
    const gbnf = await compileGuided(constraint, whitespacePattern, signal, whitespacePatternParam);
    compiled = { gbnf, root: "root", param: constraint.param, answerOnly: constraint.kind !== "grammar" };
  }
  if (!compiled) return null;
  if (thinking !== "none" && !compiled.answerOnly && maxThinkingTokens !== undefined) {
    throw badRequest(
      `nvext.max_thinking_tokens cannot be combined with ${compiled.param}: a GBNF grammar decides the whole output, thinking included.`,
      "nvext.max_thinking_tokens",
    );
  }
  if (thinking === "none" || !compiled.answerOnly)
    return grammarForGbnf(compiled.gbnf, compiled.param, compiled.root);
  // A Harmony call is a message of its own (`<|channel|>commentary to=functions.…`), not the final answer.
  const answer = tools.native?.family === "openai" ? { ...markup, grammarAnswerPrefix: "" } : markup;
  const wrapped = allowThinking(compiled.gbnf, thinking === "open", answer, compiled.root);
  return grammarForGbnf(wrapped.gbnf, compiled.param, wrapped.root);
}

/**
 * The lazy grammar of `strict` tools under `tool_choice: "auto"` (`chatTools.ts` `LazyToolGrammar`): the
 * call grammar, started natively at the first trigger outside the thinking block (the reasoning family's
 * `markup`; none when `thinking` is `none`; a block the prompt opened is not skipped when the family's
 * reasoning also ends at a call marker, `markup.endedByCall`, as its parser reads it). The grammar is not wrapped for thinking: the text before the
 * trigger, thinking included, is never constrained.
 * @throws ApiError 400 for a tool parameter schema that does not compile (`tools[i].function.parameters`).
 */
async function lazyToolGrammar(
  lazy: LazyToolGrammar,
  fields: RequestFields,
  thinking: ThinkingStart,
  compile: CompileJson,
  signal: AbortSignal | undefined,
  markup: ThinkingGrammarMarkup,
): Promise<Grammar> {
  let rooted: RootedGbnf;
  if (lazy.native) {
    const gbnf = await toolGrammar(
      lazy.native.family,
      lazy.native.tools,
      lazy.native.repeat,
      compile,
      prefixRules,
    );
    rooted = { gbnf, root: "root" };
  } else if (lazy.schema && lazy.markup) {
    const call = await compileGuided(
      { kind: "json_schema", spec: lazy.schema, param: "tools" },
      fields.whitespacePattern,
      signal,
      fields.whitespacePatternParam,
    ).catch((error: unknown) => {
      throw error instanceof ApiError
        ? inToolParameters(error, lazy.schema ? schemaOptions(lazy.schema) : [])
        : error;
    });
    rooted = wrapCalls(call, lazy.markup);
  } else {
    throw new Error("a lazy tool grammar without a form");
  }
  const grammar = grammarForGbnf(rooted.gbnf, "tools", rooted.root);
  // A family whose reasoning a call marker also ends (as its parser reads it) is watched from the start.
  const opened = thinking === "open" && markup.endedByCall !== true;
  return {
    ...grammar,
    lazy: {
      triggers: lazy.triggers,
      ...(thinking === "none" ? {} : { thinking: { open: markup.open, close: markup.close, opened } }),
    },
  };
}

/** The index in `tools` of each call option of a lazy grammar's schema: one per tool, in order. */
function schemaOptions(schema: JsonSchema): number[] {
  const anyOf = (schema as { anyOf?: unknown[] }).anyOf;
  return Array.isArray(anyOf) ? anyOf.map((_, index) => index) : [0];
}

/** A JSON pointer into the forced call schema's `arguments` (`toolSchema.ts`): `#[/items][/anyOf/K]/properties/arguments`. */
const ARGUMENTS_POINTER = /#(?:\/items)?(?:\/anyOf\/(\d+))?\/properties\/arguments(?=[/'" ]|$)/g;

/**
 * A compile error of the forced tool-call schema, told against the client's own schema: param
 * `tools[i].function.parameters` (as vLLM names the field) and JSON pointers relative to those parameters
 * (`#/properties/x/pattern`, not lmserve's wrapper `#/anyOf/0/properties/arguments/properties/x/pattern`).
 * An error that points at no tool's parameters is returned as it is (param `tools`).
 * @param schemaTools the index in `tools` of each call option of the schema (`ToolCalling.schemaTools`).
 */
function inToolParameters(error: ApiError, schemaTools: readonly number[]): ApiError {
  if (error.status !== 400) return error;
  let tool: number | undefined;
  const message = error.message.replace(ARGUMENTS_POINTER, (_, option: string | undefined) => {
    tool ??= schemaTools[option === undefined ? 0 : Number(option)];
    return "#";
  });
  if (tool === undefined || tool < 0) return error;
  return badRequest(message, `tools[${tool}].function.parameters`, error.code);
}

/** A GBNF string literal for `text` (quotes, backslashes and control characters escaped). */
function gbnfLiteral(text: string): string {
  return JSON.stringify(text);
}

/**
 * Wraps the grammar of one JSON tool call (start rule `root`) in a family's native markup, adding a start
 * rule `C-root` and renaming nothing:
 *
 * ```
 * C-root ::= open root close ( separator open root close )*     (the repetition only with `repeat`)
 * ```
 *
 * `C` is a rule-name prefix the grammar does not use ({@link unusedRulePrefix}, from `lmserve-tool`), so that
 * the start rule is a function of the text alone. Empty literals are left out (llama.cpp's parser accepts
 * `""`, but nothing is clearer).
 */
export function wrapCalls(gbnf: string, markup: ToolCallMarkup): RootedGbnf {
  const start = `${unusedRulePrefix(gbnf, "lmserve-tool")}-root`;
  const literal = (text: string) => (text === "" ? "" : `${gbnfLiteral(text)} `);
  const one = `${literal(markup.open)}root ${literal(markup.close)}`.trim();
  const body = markup.repeat ? `${one} ( ${literal(markup.separator)}${one} )*` : one;
  return { gbnf: [gbnf, `${start} ::= ${body}`].join("\n"), root: start };
}

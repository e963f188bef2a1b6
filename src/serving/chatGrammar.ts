/**
 * The guided-decoding grammar of a chat request: the request's own constraint (`response_format`,
 * `guided_*`, `structured_outputs`) or the call(s) a forced `tool_choice` demands, and, when a reasoning
 * parser is active, an allowance for a `<think>…</think>` block before it, so that the constraint applies
 * to the answer and not to the thinking (as vLLM applies structured output only after the reasoning end).
 * A raw GBNF grammar (`guided_grammar`, `structured_outputs.grammar`) is the exception: it describes the
 * whole output as written, thinking included, so a client can constrain (or skip) the thinking too.
 */
import type { Grammar } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import type { ToolCalling, ToolCallMarkup } from "./chatTools.ts";
import { compileGuided, grammarForGbnf } from "./guidedDecoding.ts";
import type { RequestFields } from "./requestFields.ts";

/**
 * Where the output stands with respect to thinking when generation starts: `none` (no reasoning
 * parser: the grammar is the constraint as is), `optional` (the model may open `<think>` first),
 * `open` (the prompt opened the block: the output starts inside it and must close it).
 */
export type ThinkingStart = "none" | "optional" | "open";

/**
 * The native grammar of a chat request, or null when nothing constrains it.
 * A forced `tool_choice` with another constraint was refused before (`requestChecks.ts`).
 * @throws ApiError 400 for `nvext.max_thinking_tokens` with a GBNF grammar while reasoning is parsed (the
 *   close text could break the grammar), and the compile errors of the constraint or of the tools' parameter schemas
 *   (param `tools`).
 */
export async function chatGrammar(
  fields: RequestFields,
  tools: ToolCalling,
  thinking: ThinkingStart,
  signal?: AbortSignal,
): Promise<Grammar | null> {
  const { constraint, whitespacePattern, whitespacePatternParam, maxThinkingTokens } = fields;
  let compiled: { gbnf: string; param: string; answerOnly: boolean } | null = null;
  if (tools.schema) {
    const gbnf = await compileGuided(
      { kind: "json_schema", spec: tools.schema, param: "tools" },
      whitespacePattern,
      signal,
      whitespacePatternParam,
    );
    compiled = {
      gbnf: tools.markup ? wrapCalls(gbnf, tools.markup) : gbnf,
      param: "tools",
      answerOnly: true,
    };
  } else if (constraint) {
    const gbnf = await compileGuided(constraint, whitespacePattern, signal, whitespacePatternParam);
    compiled = { gbnf, param: constraint.param, answerOnly: constraint.kind !== "grammar" };
  }
  if (!compiled) return null;
  if (thinking !== "none" && !compiled.answerOnly && maxThinkingTokens !== undefined) {
    throw badRequest(
      `nvext.max_thinking_tokens cannot be combined with ${compiled.param}: a GBNF grammar decides the whole output, thinking included.`,
      "nvext.max_thinking_tokens",
    );
  }
  const wrap = thinking !== "none" && compiled.answerOnly;
  const gbnf = wrap ? allowThinking(compiled.gbnf, thinking === "open") : compiled.gbnf;
  return grammarForGbnf(gbnf, compiled.param);
}

/** llama.cpp's GBNF name characters (`is_word_char`). */
function isWordChar(char: string | undefined): boolean {
  return char !== undefined && /[A-Za-z0-9-]/.test(char);
}

/** The index just past the literal opened at `start` (`"…"` or `[…]`), escapes honoured. */
function literalEnd(text: string, start: number): number {
  const close = text[start] === '"' ? '"' : "]";
  let i = start + 1;
  while (i < text.length && text[i] !== close) i += text[i] === "\\" ? 2 : 1;
  return Math.min(i + 1, text.length);
}

/**
 * Splits GBNF text into its rule names and the rest: calls `onName` for every name outside string
 * literals, character classes and comments, and returns the text with each name replaced by what
 * `onName` returns.
 */
function mapGbnfNames(gbnf: string, onName: (name: string) => string): string {
  let out = "";
  let i = 0;
  while (i < gbnf.length) {
    const char = gbnf[i];
    let end = i + 1;
    if (char === '"' || char === "[") end = literalEnd(gbnf, i);
    else if (char === "#") {
      const newline = gbnf.indexOf("\n", i);
      end = newline < 0 ? gbnf.length : newline;
    } else if (isWordChar(char)) {
      while (isWordChar(gbnf[end])) end++;
      out += onName(gbnf.slice(i, end));
      i = end;
      continue;
    }
    out += gbnf.slice(i, end);
    i = end;
  }
  return out;
}

/** A GBNF string literal for `text` (quotes, backslashes and control characters escaped). */
function gbnfLiteral(text: string): string {
  return JSON.stringify(text);
}

/**
 * Wraps the grammar of one JSON tool call (root rule `root`) in a family's native markup:
 *
 * ```
 * root ::= open C-call close ( separator open C-call close )*     (the repetition only with `repeat`)
 * ```
 *
 * `C` is a rule-name prefix the grammar does not use; the call grammar's `root` becomes `C-call`.
 * Empty literals are left out (llama.cpp's parser accepts `""`, but nothing is clearer).
 */
export function wrapCalls(gbnf: string, markup: ToolCallMarkup): string {
  const names = new Set<string>();
  mapGbnfNames(gbnf, (name) => {
    names.add(name);
    return name;
  });
  let prefix = "lmserve-tool";
  while ([...names].some((name) => name.startsWith(prefix))) prefix += "x";
  const call = `${prefix}-call`;
  const renamed = mapGbnfNames(gbnf, (name) => (name === "root" ? call : name));
  const literal = (text: string) => (text === "" ? "" : `${gbnfLiteral(text)} `);
  const one = `${literal(markup.open)}${call} ${literal(markup.close)}`.trim();
  const root = markup.repeat ? `${one} ( ${literal(markup.separator)}${one} )*` : one;
  return [`root ::= ${root}`, renamed].join("\n");
}

/**
 * Wraps a GBNF grammar (root rule `root`) so that a thinking block may (or, when `opened`, must) come
 * before what it matches. The grammar's `root` is renamed and a new root written in front:
 *
 * ```
 * root ::= ( "<think>" T-body "</think>" T-ws )? T-answer      (opened: T-body "</think>" T-ws T-answer)
 * T-body ::= ( [^<] | T-lt )*                                   any text without "</think>"
 * T-lt ::= "<"+ ( [^/<] | "/" ( [^t<] | "t" ( … "k" [^<>] ) ) )
 * T-ws ::= [ \t\n]{0,4}
 * ```
 *
 * `T` is a rule-name prefix the grammar does not use. The body admits any text that does not contain
 * `</think>`, except that it cannot end with `<` or a proper prefix of `</think>` (a `<` must be followed
 * by a character that does not continue the tag): a small loss that keeps the rule regular. The
 * whitespace after the block is bounded (as the JSON grammars bound theirs) and admits the
 * `max_thinking_tokens` close text `"\n</think>\n\n"`. Follows the reasoning parsers' reading: the
 * optional block must start the output (no leading whitespace), as the grammar's own output would.
 */
export function allowThinking(gbnf: string, opened: boolean): string {
  const names = new Set<string>();
  mapGbnfNames(gbnf, (name) => {
    names.add(name);
    return name;
  });
  let prefix = "lmserve-think";
  while ([...names].some((name) => name.startsWith(prefix))) prefix += "x";
  const answer = `${prefix}-answer`;
  const renamed = mapGbnfNames(gbnf, (name) => (name === "root" ? answer : name));
  const block = `${prefix}-body "</think>" ${prefix}-ws`;
  const tagTail = ["t", "h", "i", "n", "k"].reduceRight(
    (inner, char) => `[^${char}<] | "${char}" ( ${inner} )`,
    "[^<>]",
  );
  return [
    `root ::= ${opened ? block : `( "<think>" ${block} )?`} ${answer}`,
    `${prefix}-body ::= ( [^<] | ${prefix}-lt )*`,
    `${prefix}-lt ::= "<"+ ( [^/<] | "/" ( ${tagTail} ) )`,
    `${prefix}-ws ::= [ \\t\\n]{0,4}`,
    renamed,
  ].join("\n");
}

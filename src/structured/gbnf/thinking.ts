/**
 * The thinking-block allowance of a guided-decoding grammar: new rules, written after the grammar, whose
 * start rule admits a reasoning block before what the grammar's own start rule matches, so that a
 * constraint applies to the answer and not to the thinking (as vLLM applies structured output only after
 * the reasoning end). The grammar's text is left as it is (no rule is renamed): the engine starts from the
 * new rule (`Grammar.root`, `engine/types.ts`).
 */

/**
 * A reasoning family's markup as the grammar needs it (the reasoning parsers' `ThinkingMarkup`): the
 * block's markers, GBNF required after the close marker (`""`: bounded whitespace) and GBNF the answer
 * starts with (`""`: none; Harmony's `"<|channel|>final<|message|>"`).
 */
export type ThinkingGrammarMarkup = {
  open: string;
  close: string;
  grammarAfterClose: string;
  grammarAnswerPrefix: string;
};

/** `<think>…</think>`, the default markup. */
export const THINK_MARKUP: ThinkingGrammarMarkup = {
  open: "<think>",
  close: "</think>",
  grammarAfterClose: "",
  grammarAnswerPrefix: "",
};

/** A grammar and the rule it starts from. */
export type RootedGbnf = {
  /** GBNF text. */
  gbnf: string;
  /** The start rule. */
  root: string;
};

/**
 * A rule-name prefix no rule of `gbnf` can start with: `base`, lengthened with `x` while it occurs anywhere
 * in the text (literals and comments included: an over-approximation that needs no GBNF lexer).
 */
export function unusedRulePrefix(gbnf: string, base: string): string {
  let prefix = base;
  while (gbnf.includes(prefix)) prefix += "x";
  return prefix;
}

/**
 * Allows a thinking block before what `gbnf` matches from rule `root` (or, when `opened`, requires the
 * output to start inside one and close it). Returns the text with these rules appended and `T-root` as
 * the start rule:
 *
 * ```
 * T-root ::= ( T-ws "<think>" T-body "</think>" T-ws )? root   (opened: T-body "</think>" T-ws root)
 * T-body ::= ( [^<] | T-lt )*                                 any text without "</think>"
 * T-lt ::= "<"+ ( [^/<] | "/" ( [^t<] | "t" ( … "k" [^<>] ) ) )
 * T-ws ::= [ \t\n]{0,4}
 * ```
 *
 * `T` is a rule-name prefix the grammar does not use ({@link unusedRulePrefix}, from `lmserve-think`), so
 * that the start rule is a function of the text alone (the native mask cache keys grammars by text). The
 * body admits any text that does not contain `</think>`, except that it cannot end with `<` or a proper
 * prefix of `</think>` (a `<` must be followed by a character that does not continue the tag): a small loss
 * that keeps the rule regular. The whitespace after the block is bounded (as the JSON grammars bound
 * theirs) and admits the `max_thinking_tokens` close text `"\n</think>\n\n"`. Follows the reasoning
 * parsers' reading: the optional block starts the output, after at most the same bounded whitespace (a
 * model may write a line break before `<think>` when thinking is optional, which the parsers skip).
 * @param markup defaults to {@link THINK_MARKUP}.
 * @param root the grammar's start rule; defaults to "root".
 */
export function allowThinking(
  gbnf: string,
  opened: boolean,
  markup: ThinkingGrammarMarkup = THINK_MARKUP,
  root = "root",
): RootedGbnf {
  const prefix = unusedRulePrefix(gbnf, "lmserve-think");
  const chars = [...markup.close];
  const first = chars[0] ?? "<";
  const after = markup.grammarAfterClose === "" ? `${prefix}-ws` : markup.grammarAfterClose;
  const block = `${prefix}-body ${gbnfString(markup.close)} ${after}`;
  // After the close marker's first character, any character that does not continue it (nor restarts it).
  let head = notIn(chars[chars.length - 1] ?? first, first);
  for (let k = chars.length - 2; k >= 1; k--) {
    const char = chars[k] ?? first;
    head = `${notIn(char, first)} | ${gbnfString(char)} ( ${head} )`;
  }
  const answerStart = markup.grammarAnswerPrefix === "" ? root : `${markup.grammarAnswerPrefix} ${root}`;
  const start = `${prefix}-root`;
  return {
    gbnf: [
      gbnf,
      `${start} ::= ${opened ? block : `( ${prefix}-ws ${gbnfString(markup.open)} ${block} )?`} ${answerStart}`,
      `${prefix}-body ::= ( ${notIn(first, first)} | ${prefix}-lt )*`,
      `${prefix}-lt ::= ${gbnfString(first)}+ ( ${head} )`,
      `${prefix}-ws ::= [ \\t\\n]{0,4}`,
    ].join("\n"),
    root: start,
  };
}

/** A GBNF string literal of `text`. */
function gbnfString(text: string): string {
  return `"${text.replace(/[\\"]/g, (char) => `\\${char}`).replace(/\n/g, "\\n")}"`;
}

/** A GBNF character class of every character but `a` and `b`. */
function notIn(a: string, b: string): string {
  const esc = (char: string) => (/[\\\][-]/.test(char) ? `\\${char}` : char);
  return `[^${esc(a)}${a === b ? "" : esc(b)}]`;
}

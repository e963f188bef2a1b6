/**
 * `guided_choice` → GBNF: the output is exactly one of the given strings (vLLM's `guided_choice`, which
 * outlines/xgrammar compile as an alternation of escaped literals).
 */

import { ConstraintError } from "../errors.ts";
import { gbnfLiteral, literalTrie, MIN_TRIE_LITERALS } from "./gbnf.ts";

/** A surrogate code unit that is not half of a pair. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Most choices accepted in one request. */
export const MAX_CHOICES = 10_000;

/**
 * A grammar `root ::= "a" | "b" | ...` matching exactly one of `choices` (duplicates dropped, order kept;
 * quotes, backslashes, newlines and non-ASCII characters escaped by {@link gbnfLiteral}). An empty string is a
 * valid choice (matches the empty output). Throws `ConstraintError` (`param`, default `"guided_choice"`) when
 * `choices` is not a non-empty array of strings, has more than {@link MAX_CHOICES} entries, or a choice has
 * a lone surrogate (no UTF-8 text spells it).
 * Example: `["yes", "no"]` → `root ::= "yes" | "no"`; 16 or more choices share their prefixes
 * (`literalTrie`).
 */
export function choiceToGbnf(choices: unknown, param = "guided_choice"): string {
  if (!Array.isArray(choices)) throw new ConstraintError("guided_choice must be an array of strings.", param);
  if (choices.length === 0)
    throw new ConstraintError("guided_choice must contain at least one choice.", param);
  if (choices.length > MAX_CHOICES) {
    throw new ConstraintError(
      `guided_choice has ${choices.length} choices; at most ${MAX_CHOICES} are allowed.`,
      param,
    );
  }
  const unique: string[] = [];
  const seen = new Set<string>();
  for (const [index, choice] of choices.entries()) {
    if (typeof choice !== "string") {
      throw new ConstraintError(
        `guided_choice[${index}] must be a string, got ${JSON.stringify(choice)}.`,
        param,
      );
    }
    if (LONE_SURROGATE.test(choice)) {
      throw new ConstraintError(
        `guided_choice[${index}] contains a lone surrogate, which UTF-8 output cannot contain.`,
        param,
      );
    }
    if (!seen.has(choice)) {
      seen.add(choice);
      unique.push(choice);
    }
  }
  const body = unique.length >= MIN_TRIE_LITERALS ? literalTrie(unique) : unique.map(gbnfLiteral).join(" | ");
  return `root ::= ${body}\n`;
}

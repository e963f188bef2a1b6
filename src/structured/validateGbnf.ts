/**
 * Validation of client GBNF grammars (`guided_grammar`, the `grammar` kind). Two layers:
 * {@link checkGbnfText} runs our port of llama.cpp's parser (pure, gives llama.cpp's own message), and
 * {@link validateGbnf} additionally asks llama.cpp's own parser, which is the final judge.
 */
import { badRequest } from "../errors.ts";
import { checkGbnf, GbnfSyntaxError } from "./gbnfCheck.ts";

/** Largest GBNF text accepted, in UTF-16 code units (1 MiB-ish); larger grammars get a 400. */
export const MAX_GBNF_LENGTH = 1_000_000;

/** "line L, column C" of a UTF-16 offset in `text` (both 1-based). */
function lineAndColumn(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = offset - before.lastIndexOf("\n");
  return `line ${line}, column ${column}`;
}

/**
 * Checks GBNF text without a model, as llama.cpp's parser would (see `gbnfCheck.ts`).
 * Throws `ApiError` 400 (`param`, default `"guided_grammar"`) with llama.cpp's message and the line/column,
 * e.g. "Invalid GBNF grammar: parse: error parsing grammar: expecting ')' at ... (line 1, column 15)".
 */
export function checkGbnfText(text: string, param = "guided_grammar"): void {
  if (typeof text !== "string" || text.trim() === "") {
    throw badRequest("The grammar must be a non-empty GBNF string.", param);
  }
  if (text.length > MAX_GBNF_LENGTH) {
    throw badRequest(
      `The grammar is too long (${text.length} characters; at most ${MAX_GBNF_LENGTH}).`,
      param,
    );
  }
  try {
    checkGbnf(text);
  } catch (error) {
    if (error instanceof GbnfSyntaxError) {
      throw badRequest(
        `Invalid GBNF grammar: parse: error parsing grammar: ${error.message} (${lineAndColumn(text, error.offset)})`,
        param,
      );
    }
    throw error;
  }
}

/**
 * Validates GBNF text: first {@link checkGbnfText} (our port of llama.cpp's parser, with its messages and
 * the line/column), then `nativeCheck`, llama.cpp's own parser and post-parse checks (missing root, left
 * recursion), which is the final judge. Returns the text.
 * @param nativeCheck returns null when llama.cpp accepts the grammar, else its message.
 * @throws ApiError 400 with `param` (default `"guided_grammar"`).
 */
export function validateGbnf(
  text: string,
  nativeCheck: (text: string) => string | null,
  param = "guided_grammar",
): string {
  checkGbnfText(text, param);
  const problem = nativeCheck(text);
  if (problem !== null) {
    const detail = problem
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line.length > 0)
      .slice(0, 3)
      .join("; ");
    throw badRequest(`Invalid GBNF grammar: ${detail.slice(0, 500)}`, param);
  }
  return text;
}

/**
 * Validation of client GBNF grammars (`guided_grammar`, the `grammar` kind). Two layers:
 * {@link checkGbnfText} runs our port of llama.cpp's parser (pure, gives llama.cpp's own message), and
 * {@link validateGbnf} additionally builds the native `LlamaGrammar`, which is the final judge.
 */
import type { Llama, LlamaGrammar } from "node-llama-cpp";
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

/** Per-Llama log tap: node-llama-cpp has one logger per `Llama`; we wrap it once and fan out to listeners. */
const logTaps = new WeakMap<Llama, Set<(message: string) => void>>();

function tapLogs(llama: Llama, listener: (message: string) => void): () => void {
  let listeners = logTaps.get(llama);
  if (listeners === undefined) {
    const set = new Set<(message: string) => void>();
    listeners = set;
    logTaps.set(llama, set);
    const original = llama.logger;
    llama.logger = (level, message) => {
      for (const fn of set) fn(message);
      original(level, message);
    };
  }
  listeners.add(listener);
  const own = listeners;
  return () => own.delete(listener);
}

/**
 * Validates GBNF text and builds the native grammar: first {@link checkGbnfText} (llama.cpp's parse messages),
 * then `llama.createGrammar({grammar})`. node-llama-cpp 3.21.1 throws only "Failed to parse grammar" (its
 * addon calls `llama_grammar_init_impl`; the parser's detail goes to stderr, while the post-parse checks —
 * missing root, left recursion — go through llama.cpp's log), so the error-level log lines emitted while
 * creating are appended to the 400 message. Returns the ready `LlamaGrammar`.
 * Throws `ApiError` 400 with `param` (default `"guided_grammar"`).
 */
export async function validateGbnf(
  llama: Llama,
  text: string,
  param = "guided_grammar",
): Promise<LlamaGrammar> {
  checkGbnfText(text, param);
  const logged: string[] = [];
  const untap = tapLogs(llama, (message) => {
    if (/grammar|parse/i.test(message)) logged.push(message.trim());
  });
  try {
    return await llama.createGrammar({ grammar: text });
  } catch (error) {
    // The addon's log lines reach JS through a thread-safe function: give them a turn to arrive.
    await new Promise((resolve) => setTimeout(resolve, 10));
    const detail = logged.length > 0 ? `: ${logged.join("; ")}` : "";
    throw badRequest(
      `Invalid GBNF grammar: ${error instanceof Error ? error.message : String(error)}${detail}`,
      param,
    );
  } finally {
    untap();
  }
}

/**
 * Guided decoding at the serving layer: compiles the request's one constraint (found among its
 * spellings by `requestFields.ts`) with `structured/` and turns it into a native llama.cpp grammar,
 * cached by its GBNF text.
 */
import { checkGrammar } from "../../engine/grammar.ts";
import type { Grammar } from "../../engine/types.ts";
import { ApiError, badRequest, toApiError } from "../../errors.ts";
import { ConstraintError, confirmGbnf } from "../../structured/index.ts";
import { sharedCompiler } from "../../structured/worker/compileService.ts";
import { LruCache } from "../../structured/worker/lru.ts";
import type { GuidedConstraint } from "../request/requestFields.ts";

export type { GuidedConstraint };

const grammars = new LruCache<string, Grammar>(128);

/**
 * Compiles the request's constraint (`RequestFields.constraint`) into a native grammar (cached by GBNF
 * text), or null without one.
 * @throws ApiError 400 naming the unsupported keyword, regex construct or grammar parse error.
 */
export async function grammarForConstraint(
  constraint: GuidedConstraint | null,
  whitespacePattern: string | undefined,
  signal?: AbortSignal,
  whitespaceParam = WHITESPACE_PARAM,
): Promise<Grammar | null> {
  if (!constraint) return null;
  return grammarForGbnf(
    await compileGuided(constraint, whitespacePattern, signal, whitespaceParam),
    constraint.param,
  );
}

/**
 * The GBNF text of one constraint (`structured/`), JSON constraints with the request's whitespace
 * pattern (`RequestFields.whitespacePattern`; undefined: the compilers' default). The one compile step
 * of both endpoints (chat's forced tool calls included), on the compiler's worker thread
 * (`structured/worker/compileService.ts`); `signal` (the client's) drops it from the compiler's queue.
 * `whitespaceParam` is the field the pattern came from (`RequestFields.whitespacePatternParam`), named
 * in its errors; defaults to `guided_whitespace_pattern`.
 * @throws ApiError 400 naming the constraint's field for what cannot be compiled (or past the compiler's
 *   time and memory limits), or the pattern's field for a bad pattern; the signal's reason once it aborts.
 */
export async function compileGuided(
  constraint: GuidedConstraint,
  whitespacePattern: string | undefined,
  signal?: AbortSignal,
  whitespaceParam = WHITESPACE_PARAM,
): Promise<string> {
  const options = {
    param: constraint.param,
    ...(whitespacePattern !== undefined ? { whitespacePattern } : {}),
  };
  try {
    const compiled = await sharedCompiler().compile(constraint.kind, constraint.spec, options, signal);
    return compiled.gbnf;
  } catch (caught) {
    // The compiler's own errors become the API's here (`toApiError`), so that callers see one kind.
    const error = caught instanceof ConstraintError ? toApiError(caught) : caught;
    // The compilers name the pattern by its top-level spelling; the client may have sent another one.
    if (
      error instanceof ApiError &&
      error.param === WHITESPACE_PARAM &&
      whitespaceParam !== WHITESPACE_PARAM
    ) {
      throw badRequest(error.message.replaceAll(WHITESPACE_PARAM, whitespaceParam), whitespaceParam);
    }
    throw error;
  }
}

/** The top-level spelling of the whitespace pattern, as the compilers name it. */
const WHITESPACE_PARAM = "guided_whitespace_pattern";

/**
 * The engine grammar for GBNF text that the compiler returned (which checked it with our port of
 * llama.cpp's parser, on its worker) or derived from such (`allowThinking`), confirmed by llama.cpp's own
 * parser once and cached; a refused text is not cached. `root` is the start rule; defaults to "root".
 * @throws ApiError 400 naming `param` when llama.cpp refuses the grammar.
 */
export function grammarForGbnf(gbnf: string, param: string, root = "root"): Grammar {
  const key = root === "root" ? gbnf : `${root}\u0000${gbnf}`;
  let grammar = grammars.get(key);
  if (!grammar) {
    try {
      const checked = confirmGbnf(gbnf, (text) => checkGrammar(text, root), param);
      grammar = root === "root" ? { gbnf: checked } : { gbnf: checked, root };
    } catch (error) {
      throw error instanceof ConstraintError ? toApiError(error) : error;
    }
    grammars.set(key, grammar);
  }
  return grammar;
}

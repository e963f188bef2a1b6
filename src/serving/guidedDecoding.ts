/**
 * Guided decoding at the serving layer: compiles the request's one constraint (found among its
 * spellings by `requestFields.ts`) with `structured/` and turns it into a native llama.cpp grammar,
 * cached by its GBNF text.
 */
import { checkGrammar } from "../engine/grammar.ts";
import type { Grammar } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import { compileConstraint, validateGbnf } from "../structured/index.ts";
import { LruCache } from "../structured/lru.ts";
import { type CommonRequest, type GuidedConstraint, requestFields } from "./requestFields.ts";

export type { GuidedConstraint };

const grammars = new LruCache<string, Grammar>(128);

/**
 * The request's guided-decoding constraint (folded from its spellings by `requestFields.ts`), or null
 * when it has none.
 * @throws ApiError 400 for a constraint spelled wrong or twice (`requestFields.ts`), or for a constraint
 *   with a field that could break it (see {@link refuseConflictingFields}).
 */
export function resolveGuidedConstraint(body: CommonRequest): GuidedConstraint | null {
  const constraint = requestFields(body).constraint;
  if (constraint) refuseConflictingFields(body);
  return constraint;
}

/**
 * Compiles the request's constraint into a native grammar (cached by GBNF text), or null without one.
 * @throws ApiError 400 naming the unsupported keyword, regex construct or grammar parse error.
 */
export async function grammarForRequest(body: CommonRequest): Promise<Grammar | null> {
  const constraint = resolveGuidedConstraint(body);
  if (!constraint) return null;
  return grammarForGbnf(compileGuided(constraint, requestFields(body).whitespacePattern), constraint.param);
}

/**
 * The GBNF text of one constraint (`structured/`), JSON constraints with the request's whitespace
 * pattern (`RequestFields.whitespacePattern`; undefined: the compilers' default). The one compile step
 * of both endpoints (chat's forced tool calls included).
 * @throws ApiError 400 naming the constraint's field for what cannot be compiled.
 */
export function compileGuided(constraint: GuidedConstraint, whitespacePattern: string | undefined): string {
  return compileConstraint(constraint.kind, constraint.spec, {
    param: constraint.param,
    ...(whitespacePattern !== undefined ? { whitespacePattern } : {}),
  }).gbnf;
}

/**
 * Refuses fields that would break the promise that an output finishing with `stop` satisfies the
 * constraint: `stop` strings and `stop_token_ids` can end the output before the grammar is complete.
 * (`ignore_eos` and `min_tokens` are refused in `generationParams.ts`.) Prompt logprobs (also `echo` with
 * `logprobs`) are the raw distribution of the prompt's rows, which no constraint applies to, as vLLM.
 * @throws ApiError 400 naming the field.
 */
function refuseConflictingFields(body: CommonRequest): void {
  const stop = body.stop;
  if (stop !== undefined && stop !== null && stop.length > 0) {
    throw badRequest(
      "stop cannot be combined with a guided decoding constraint: a stop string could end the output before it satisfies the constraint (the constraint ends the output itself).",
      "stop",
    );
  }
  if (body.stop_token_ids && body.stop_token_ids.length > 0) {
    throw badRequest(
      "stop_token_ids cannot be combined with a guided decoding constraint: a stop token could end the output before it satisfies the constraint.",
      "stop_token_ids",
    );
  }
}

/**
 * The engine grammar for GBNF text, validated by llama.cpp's parser once and cached; a refused text is
 * not cached.
 * @throws ApiError 400 naming `param` when the grammar does not parse.
 */
export function grammarForGbnf(gbnf: string, param: string): Grammar {
  let grammar = grammars.get(gbnf);
  if (!grammar) {
    grammar = { gbnf: validateGbnf(gbnf, checkGrammar, param) };
    grammars.set(gbnf, grammar);
  }
  return grammar;
}

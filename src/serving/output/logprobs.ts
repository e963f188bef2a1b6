/**
 * Engine log probabilities -> the API's shapes: OpenAI completions `logprobs`, OpenAI chat
 * `logprobs.content`, and vLLM's `prompt_logprobs`.
 */
import type { TokenVocabulary } from "../../engine/TokenVocabulary.ts";
import type { TokenLogprob } from "../../engine/types.ts";
import type { ChatLogprobEntry } from "../../protocol/chat.ts";
import type { CompletionLogprobs } from "../../protocol/completions.ts";

/** How tokens are named in logprobs: their text, or `token_id:N` (vLLM's `return_tokens_as_token_ids`). */
export type TokenNaming = { vocabulary: TokenVocabulary; asIds: boolean };

function tokenName(naming: TokenNaming, id: number): string {
  return naming.asIds ? `token_id:${id}` : naming.vocabulary.text(id);
}

/**
 * Builds (a part of) a completions `logprobs` object. `text_offset` counts characters of the choice's
 * text from `startOffset` on (an entry's own `offset` overrides it; control tokens such as BOS take no
 * room in the text); a null entry (the first echoed prompt token, which has no distribution)
 * gives `null` logprobs. The sampled token is always in its `top_logprobs` entry (OpenAI: up to k+1).
 * @param entries per token: its id and its logprobs, or null.
 */
export function completionLogprobs(
  entries: readonly { id: number; logprob: TokenLogprob | null; offset?: number }[],
  naming: TokenNaming,
  startOffset: number,
): CompletionLogprobs {
  const result: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let offset = startOffset;
  for (const { id, logprob, offset: given } of entries) {
    const name = tokenName(naming, id);
    const start = given ?? offset;
    result.tokens.push(name);
    result.text_offset.push(start);
    offset = start + naming.vocabulary.renderedText(id).length;
    if (!logprob) {
      result.token_logprobs.push(null);
      result.top_logprobs.push(null);
      continue;
    }
    result.token_logprobs.push(logprob.logprob);
    const top: Record<string, number> = {};
    for (const alternative of logprob.top) top[tokenName(naming, alternative.id)] = alternative.logprob;
    top[name] = logprob.logprob;
    result.top_logprobs.push(top);
  }
  return result;
}

/** Appends `part` to `target` (stream chunks are concatenated into the non-streamed object). */
export function appendCompletionLogprobs(target: CompletionLogprobs, part: CompletionLogprobs): void {
  target.tokens.push(...part.tokens);
  target.token_logprobs.push(...part.token_logprobs);
  target.top_logprobs.push(...part.top_logprobs);
  target.text_offset.push(...part.text_offset);
}

/**
 * Builds chat `logprobs.content` entries: `{token, logprob, bytes, top_logprobs: [{token, logprob,
 * bytes}]}` with the token's exact UTF-8 bytes (OpenAI). `top_logprobs` holds the k most likely tokens.
 */
export function chatLogprobs(logprobs: readonly TokenLogprob[], naming: TokenNaming): ChatLogprobEntry[] {
  const bytes = (id: number) => [...naming.vocabulary.bytes(id)];
  return logprobs.map((entry) => ({
    token: tokenName(naming, entry.id),
    logprob: entry.logprob,
    bytes: bytes(entry.id),
    top_logprobs: entry.top.map((alternative) => ({
      token: tokenName(naming, alternative.id),
      logprob: alternative.logprob,
      bytes: bytes(alternative.id),
    })),
  }));
}

/** vLLM's per-token logprob entry of `prompt_logprobs`. */
export type VllmLogprob = { logprob: number; rank: number; decoded_token: string };

/**
 * vLLM's `prompt_logprobs`: one entry per prompt token, the first `null`; each a map from token id (as
 * a string) to `{logprob, rank, decoded_token}` holding the prompt token itself and the top k.
 */
export function promptLogprobs(
  entries: readonly (TokenLogprob | null)[],
  naming: TokenNaming,
): (Record<string, VllmLogprob> | null)[] {
  return entries.map((entry) => {
    if (!entry) return null;
    const map: Record<string, VllmLogprob> = {};
    entry.top.forEach((alternative, index) => {
      map[String(alternative.id)] = {
        logprob: alternative.logprob,
        rank: index + 1,
        decoded_token: tokenName(naming, alternative.id),
      };
    });
    map[String(entry.id)] = {
      logprob: entry.logprob,
      rank: entry.rank,
      decoded_token: tokenName(naming, entry.id),
    };
    return map;
  });
}

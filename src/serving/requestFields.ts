/**
 * The one place that reads a request field's aliases: NIM's `nvext` spellings, `max_completion_tokens`
 * beside `max_tokens`, the whitespace pattern of JSON constraints in its three spellings. The rest of
 * serving reads the folded {@link RequestFields} (as vLLM's `to_sampling_params` and TGI's
 * `ValidGenerateRequest` take one resolved request); the guided-decoding constraint's spellings are
 * folded by `guidedDecoding.ts` `resolveGuidedConstraint`.
 */
import type { ChatCompletionRequest } from "../protocol/chat.ts";
import type { CompletionRequest } from "../protocol/completions.ts";

/** A chat or completions request: the fields both endpoints share. */
export type CommonRequest = CompletionRequest | ChatCompletionRequest;

/** A request's generation fields with every alias folded in; each is the top-level field when given. */
export type RequestFields = {
  /**
   * `max_completion_tokens`, else `max_tokens` (chat; completions have only `max_tokens`): undefined when
   * absent, null for "until the context ends".
   */
  maxTokens: number | null | undefined;
  /** `top_k`, else `nvext.top_k`; -1 (the API's "off") when neither is given. */
  topK: number;
  /** `min_p`, else `nvext.min_p`; 0 = off. */
  minP: number;
  /** `repetition_penalty`, else `nvext.repetition_penalty`; 1 = off. */
  repetitionPenalty: number;
  /** `min_tokens`, else `nvext.min_tokens`; 0 = none. */
  minTokens: number;
  /** `ignore_eos`, else `nvext.ignore_eos`; false when neither is given. */
  ignoreEos: boolean;
  /** `nvext.max_thinking_tokens`, or undefined (no budget). */
  maxThinkingTokens: number | undefined;
  /**
   * The whitespace JSON constraints allow: `guided_whitespace_pattern`, else
   * `nvext.guided_whitespace_pattern`, else `structured_outputs.whitespace_pattern`; undefined: the
   * compilers' default.
   */
  whitespacePattern: string | undefined;
};

/** Folds every alias and `nvext` spelling of a chat or completions request (see {@link RequestFields}). */
export function requestFields(body: CommonRequest): RequestFields {
  const nvext = body.nvext;
  const maxTokens = isChat(body) ? (body.max_completion_tokens ?? body.max_tokens) : body.max_tokens;
  return {
    maxTokens,
    topK: body.top_k ?? nvext?.top_k ?? -1,
    minP: body.min_p ?? nvext?.min_p ?? 0,
    repetitionPenalty: body.repetition_penalty ?? nvext?.repetition_penalty ?? 1,
    minTokens: body.min_tokens ?? nvext?.min_tokens ?? 0,
    ignoreEos: body.ignore_eos ?? nvext?.ignore_eos ?? false,
    maxThinkingTokens: nvext?.max_thinking_tokens ?? undefined,
    whitespacePattern:
      body.guided_whitespace_pattern ??
      nvext?.guided_whitespace_pattern ??
      body.structured_outputs?.whitespace_pattern ??
      undefined,
  };
}

/** True for a chat request (it has `messages`; a completions request has a `prompt`). */
function isChat(body: CommonRequest): body is ChatCompletionRequest {
  return "messages" in body;
}

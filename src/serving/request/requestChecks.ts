/**
 * Every request-level check between fields of a chat or completions request, in one ordered list
 * ({@link REQUEST_CHECKS}, as vLLM's `to_sampling_params` and TGI's `ValidGenerateRequest` validate one
 * resolved request), run once per request by {@link checkRequest} right after the fields are folded
 * (`requestFields.ts`) and before anything touches the model. The first check that fails gives the 400;
 * the list keeps the order these checks ran in before they were gathered (completions' plan start, the
 * stream options, the chat plan, the constraint's conflicting fields, the forced tool call, the engine
 * request), so a request with one problem gets the same 400 as before. A request with several problems
 * may now get a different one first: these checks (and the constraint's spellings, folded just before)
 * run before the template renders and the prompt is tokenized, and after `refusePeerFields` on both
 * endpoints (completions used to refuse peer fields after its `echo` and `best_of` checks).
 *
 * Checks that need the model, the compiled template or a value resolved against the context stay where
 * that data is:
 * - `generationParams.ts`: `stop_token_ids` and `logit_bias` keys inside the vocabulary, and `min_tokens`
 *   against the resolved `max_tokens` (which, when absent, comes from the context size and the prompt
 *   length, or `--max-tokens-cap`); `resolveMaxTokens`: the prompt plus `max_tokens` within the context;
 * - `completions.ts` `planPrompt`: prompt token ids inside the vocabulary, `suffix` on a model with
 *   fill-in-the-middle tokens, an empty prompt;
 * - `chat.ts`: `chat_template` only with `--trust-request-chat-template` (a server setting),
 *   `prompt_logprobs` with images (known once the template has rendered on a model with a projector), an
 *   empty rendered prompt;
 * - `chatTools.ts` / `chat/toolSchema.ts`: unique tool names and a named `tool_choice` among the tools,
 *   checked where the tools are resolved (vLLM's `check_tool_usage`);
 * - `chatGrammar.ts`: `nvext.max_thinking_tokens` with a GBNF grammar, which matters only when the
 *   served model's reasoning parser is active;
 * - the constraint's own spellings (two constraints named together, an unknown backend, a
 *   `response_format` without its schema): `requestFields.ts`, where the spellings are read.
 */
import { type ApiError, badRequest } from "../../errors.ts";
import type { ChatCompletionRequest } from "../../protocol/chat.ts";
import type { CompletionRequest } from "../../protocol/completions.ts";
import type { CommonRequest, RequestFields } from "./requestFields.ts";

/** What a check sees: the request as validated, split by endpoint, and its folded fields. */
export type CheckedRequest = {
  body: CommonRequest;
  /** The request when it is a chat request. */
  chat: ChatCompletionRequest | undefined;
  /** The request when it is a completions request. */
  completion: CompletionRequest | undefined;
  fields: RequestFields;
};

/** One check: what it refuses, and the 400 it gives a request that has it (undefined: the request passes). */
export type RequestCheck = {
  /** What the check refuses, in words (for reading the list and in tests). */
  readonly refuses: string;
  readonly check: (request: CheckedRequest) => ApiError | undefined;
};

/**
 * True when a chat request's `tool_choice` forces a call (`"required"` or a named function, with tools):
 * the serving then constrains the output with a grammar of the call (`chatTools.ts` mode `forced`).
 */
export function forcesToolCall(chat: ChatCompletionRequest | undefined): boolean {
  const choice = chat?.tool_choice;
  return (
    (chat?.tools ?? []).length > 0 &&
    choice !== undefined &&
    choice !== null &&
    choice !== "none" &&
    choice !== "auto"
  );
}

/**
 * The index in `tools` of the first `strict: true` tool of a chat request whose `tool_choice` is `"auto"`
 * (or absent), or -1: its calls are then enforced by a lazy grammar from their marker on
 * (`chatTools.ts` `LazyToolGrammar`).
 */
export function strictToolUnderAuto(chat: ChatCompletionRequest | undefined): number {
  const choice = chat?.tool_choice ?? "auto";
  if (choice !== "auto") return -1;
  return (chat?.tools ?? []).findIndex((tool) => tool.function.strict === true);
}

/**
 * True when the output is (or may become) constrained by a grammar: a guided-decoding constraint, a
 * forced tool call, or a strict tool under `auto` (whose grammar starts at the call marker).
 */
function constrained({ fields, chat }: CheckedRequest): boolean {
  return fields.constraint !== null || forcesToolCall(chat) || strictToolUnderAuto(chat) >= 0;
}

/** How a refusal names the request's grammar: its constraint, the forced tool call, or the strict tool. */
function constraintName(request: CheckedRequest): string {
  if (request.fields.constraint !== null) return "a guided decoding constraint";
  if (forcesToolCall(request.chat)) {
    return `tool_choice ${JSON.stringify(request.chat?.tool_choice)} (a forced tool call)`;
  }
  return `a strict: true tool under tool_choice "auto" (its call is enforced by a grammar from the call marker on)`;
}

/** The request-level checks, in the order they run (see the module comment). */
export const REQUEST_CHECKS: readonly RequestCheck[] = [
  {
    refuses: "echo with stream (completions)",
    check: ({ completion }) =>
      completion?.echo && completion.stream
        ? badRequest("'echo' and 'stream' cannot both be true.", "echo")
        : undefined,
  },
  {
    refuses: "stream_options without stream",
    check: ({ body }) =>
      body.stream_options !== undefined && body.stream_options !== null && !body.stream
        ? badRequest("stream_options is only allowed when stream is true.", "stream_options")
        : undefined,
  },
  {
    // As vLLM ("Prompt_logprobs are not available when stream is enabled"): no chunk carries them.
    refuses: "prompt_logprobs with stream",
    check: ({ body }) =>
      body.prompt_logprobs !== undefined && body.prompt_logprobs !== null && body.stream
        ? badRequest(
            "prompt_logprobs are not available when stream is true; send the request without streaming.",
            "prompt_logprobs",
          )
        : undefined,
  },
  {
    refuses: "best_of below n (completions)",
    check: ({ completion }) => {
      const n = completion?.n ?? 1;
      const perPrompt = completion?.best_of ?? n;
      return perPrompt < n
        ? badRequest(`best_of (${perPrompt}) must be at least n (${n}).`, "best_of")
        : undefined;
    },
  },
  {
    refuses: "best_of above n with stream (completions)",
    check: ({ completion }) => {
      const n = completion?.n ?? 1;
      const perPrompt = completion?.best_of ?? n;
      return perPrompt > n && completion?.stream
        ? badRequest("best_of greater than n cannot be streamed.", "best_of")
        : undefined;
    },
  },
  {
    refuses: "tool_choice (other than none) without tools (chat)",
    check: ({ chat }) => {
      const choice = chat?.tool_choice ?? undefined;
      return choice !== undefined && choice !== "none" && (chat?.tools ?? []).length === 0
        ? badRequest(`tool_choice ${JSON.stringify(choice)} needs at least one tool in \`tools\`.`, "tools")
        : undefined;
    },
  },
  {
    refuses: "top_logprobs without logprobs (chat)",
    check: ({ chat }) =>
      chat?.top_logprobs !== undefined && chat.top_logprobs !== null && !chat.logprobs
        ? badRequest("top_logprobs requires logprobs to be true.", "top_logprobs")
        : undefined,
  },
  {
    // A stop string could end the output before the grammar is complete (the constraint ends it itself).
    refuses: "stop with a guided decoding constraint, a forced tool call or a strict tool under auto",
    check: (request) =>
      constrained(request) &&
      request.body.stop !== undefined &&
      request.body.stop !== null &&
      request.body.stop.length > 0
        ? badRequest(
            `stop cannot be combined with ${constraintName(request)}: a stop string could end the output before it satisfies the constraint (the constraint ends the output itself).`,
            "stop",
          )
        : undefined,
  },
  {
    refuses:
      "stop_token_ids with a guided decoding constraint, a forced tool call or a strict tool under auto",
    check: (request) =>
      constrained(request) && request.body.stop_token_ids && request.body.stop_token_ids.length > 0
        ? badRequest(
            `stop_token_ids cannot be combined with ${constraintName(request)}: a stop token could end the output before it satisfies the constraint.`,
            "stop_token_ids",
          )
        : undefined,
  },
  {
    refuses: "a forced tool call with a guided decoding constraint (chat)",
    check: ({ chat, fields }) =>
      forcesToolCall(chat) && fields.constraint !== null
        ? badRequest(
            `tool_choice ${JSON.stringify(chat?.tool_choice)} forces a tool call with a grammar and cannot be combined with ${fields.constraint.param}.`,
            "tool_choice",
          )
        : undefined,
  },
  {
    // Both would be grammars: the constraint's over the whole answer, the tools' from the call marker on.
    refuses: "a strict tool under tool_choice auto with a guided decoding constraint (chat)",
    check: ({ chat, fields }) => {
      const strict = strictToolUnderAuto(chat);
      return strict >= 0 && fields.constraint !== null
        ? badRequest(
            `strict: true under tool_choice "auto" is enforced by a grammar from the tool-call marker on and cannot be combined with ${fields.constraint.param}, which constrains the whole answer. Send strict: false, or leave out ${fields.constraint.param}.`,
            `tools[${strict}].function.strict`,
          )
        : undefined;
    },
  },
  {
    // The grammar ends the output with EOS once it is complete; banning EOS would leave no token.
    refuses:
      "ignore_eos or min_tokens with a grammar (a constraint, a forced tool call or a strict tool under auto)",
    check: (request) => {
      const { ignoreEos, minTokens } = request.fields;
      if (!constrained(request) || !(ignoreEos || minTokens > 0)) return undefined;
      const param = ignoreEos ? "ignore_eos" : "min_tokens";
      return badRequest(`${param} cannot be combined with a guided decoding constraint.`, param);
    },
  },
  {
    refuses: "top_k below -1 (top_k or nvext.top_k)",
    check: ({ fields }) =>
      fields.topK < -1
        ? badRequest(`top_k must be -1 (disabled) or at least 1, got ${fields.topK}.`, "top_k")
        : undefined,
  },
];

/**
 * Runs {@link REQUEST_CHECKS} in order on a chat or completions request.
 * @throws ApiError 400 of the first check that fails.
 */
export function checkRequest(body: CommonRequest, fields: RequestFields): void {
  const isChat = "messages" in body;
  const request: CheckedRequest = {
    body,
    chat: isChat ? (body as ChatCompletionRequest) : undefined,
    completion: isChat ? undefined : (body as CompletionRequest),
    fields,
  };
  for (const { check } of REQUEST_CHECKS) {
    const error = check(request);
    if (error) throw error;
  }
}

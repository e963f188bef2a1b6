import { errorFromBody, postJson } from "./api.ts";
import { chatLogprobs, completionLogprobs, type TokenLogprob } from "./logprobs.ts";
import type { ApiRequest } from "./request.ts";
import { sseData } from "./sse.ts";

/** What one streamed reply measured and reported. */
export type ReplyResult = {
  /** The reply text received. */
  text: string;
  /** Milliseconds from sending the request to the first generated text. */
  ttftMs?: number;
  /** Milliseconds from the first generated text to the end of the stream. */
  decodeMs?: number;
  promptTokens?: number | undefined;
  cachedTokens?: number | undefined;
  completionTokens?: number | undefined;
  /** Text chunks received (a token count when the usage chunk did not arrive). */
  chunks: number;
  finishReason?: string;
  /** True when the user stopped the generation. */
  stopped: boolean;
};

/** Receives each piece of text as it streams in, with its tokens' logprobs when asked for. */
export type OnDelta = (text: string, tokens: TokenLogprob[]) => void;

type Usage = {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
};
type Chunk = {
  error?: unknown;
  usage?: Usage | null;
  choices?: {
    text?: string;
    delta?: { content?: string | null };
    finish_reason?: string | null;
    logprobs?: unknown;
  }[];
};

/**
 * Sends a streamed chat or completion request and reads its SSE chunks: text and logprobs go to
 * `onDelta`; timing, usage and the finish reason are returned. Aborting `signal` cancels the HTTP
 * request (the server stops generating) and resolves with `stopped: true`.
 * @throws ApiRequestError when the server refuses the request or reports an error mid-stream.
 */
export async function runStream(
  request: ApiRequest,
  signal: AbortSignal,
  onDelta: OnDelta,
): Promise<ReplyResult> {
  const chat = request.path === "v1/chat/completions";
  const result: ReplyResult = { text: "", chunks: 0, stopped: false };
  const started = performance.now();
  let firstAt: number | undefined;
  try {
    const response = await postJson(request.path, request.body, signal);
    if (!response.body) throw new Error("The response has no body.");
    for await (const data of sseData(response.body)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data) as Chunk;
      if (chunk.error !== undefined) {
        const code = (chunk as { code?: unknown }).code;
        throw errorFromBody(typeof code === "number" ? code : 500, chunk);
      }
      if (chunk.usage) {
        result.promptTokens = chunk.usage.prompt_tokens;
        result.completionTokens = chunk.usage.completion_tokens;
        result.cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens;
      }
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const text = (chat ? choice.delta?.content : choice.text) ?? "";
      const tokens = chat
        ? chatLogprobs(choice as Parameters<typeof chatLogprobs>[0])
        : completionLogprobs(choice as Parameters<typeof completionLogprobs>[0]);
      if (text !== "" || tokens.length > 0) {
        firstAt ??= performance.now();
        result.chunks += 1;
        result.text += text;
        onDelta(text, tokens);
      }
      if (choice.finish_reason) result.finishReason = choice.finish_reason;
    }
  } catch (error) {
    if (!signal.aborted) throw error;
    result.stopped = true;
  }
  if (firstAt !== undefined) {
    result.ttftMs = firstAt - started;
    result.decodeMs = performance.now() - firstAt;
  }
  return result;
}

/** Decode speed in tokens per second (tokens after the first over the time after the first), if known. */
export function tokensPerSecond(result: ReplyResult): number | undefined {
  const tokens = result.completionTokens ?? result.chunks;
  if (result.decodeMs === undefined || result.decodeMs <= 0 || tokens < 2) return undefined;
  return (tokens - 1) / (result.decodeMs / 1000);
}

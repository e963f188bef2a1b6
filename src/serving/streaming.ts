import type { FinishReason, GenerationResult } from "../engine/types.ts";
import { type ApiError, badRequest, serverAbortError, toApiError } from "../errors.ts";
import type { Usage } from "../protocol/common.ts";

/** Where stream chunks go (the HTTP layer's SSE stream implements it). */
export type ChunkSink = {
  /** Sends one chunk. */
  send(payload: unknown): void;
  /** Sends a final error event and ends the stream. */
  fail(error: ApiError): void;
  /** Ends the stream (`data: [DONE]`). */
  end(): void;
  /**
   * Reports the request's usage for the request log (`server/requestLog.ts`) when no usage chunk is
   * sent (a usage chunk is picked up by itself). Optional: sinks without a log ignore it.
   */
  reportUsage?(usage: Usage): void;
};

/**
 * Waits for a stream's generations, lets `onResults` send the closing chunks, then ends the sink.
 * A failure becomes the final error event; a stream whose client went away is just ended. A stream
 * the server aborted (graceful shutdown's deadline, `server/InFlightRequests.ts`; the request timeout)
 * ends with that error as its final event, then `[DONE]`.
 */
export async function finishStream(
  sink: ChunkSink,
  run: Promise<GenerationResult[]>,
  onResults: (results: GenerationResult[]) => void,
): Promise<void> {
  try {
    const results = await run;
    const aborted = results.find((result) => result.finishReason === "abort");
    if (aborted === undefined) onResults(results);
    const serverError = serverAbortError(aborted?.abortReason);
    if (serverError) sink.fail(serverError);
    else sink.end();
  } catch (error) {
    sink.fail(toApiError(error));
  }
}

/** The API's `finish_reason` of a finished (not aborted) generation. */
export function finishReasonOf(result: GenerationResult): Exclude<FinishReason, "abort"> {
  return result.finishReason === "length" ? "length" : "stop";
}

/**
 * Refuses `stream_options` on a request that does not stream, as the OpenAI API and vLLM do.
 * @throws ApiError 400 naming `stream_options`.
 */
export function refuseStreamOptionsWithoutStream(body: {
  stream?: boolean | null | undefined;
  stream_options?: object | null | undefined;
}): void {
  if (body.stream_options !== undefined && body.stream_options !== null && !body.stream) {
    throw badRequest("stream_options is only allowed when stream is true.", "stream_options");
  }
}

/**
 * Whether a stream ends with a usage chunk: `stream_options` given and its `include_usage` not false
 * (the NIM spec's default is true once `stream_options` is present; OpenAI sends none without it).
 */
export function includeUsage(
  options: { include_usage?: boolean | null | undefined } | null | undefined,
): boolean {
  return options !== undefined && options !== null && options.include_usage !== false;
}

/**
 * Usage of a request summed over its choices. A prompt shared by `n` choices counts once, as OpenAI
 * and vLLM count it; `cached_tokens` likewise counts each prompt once.
 */
export function sumUsage(results: readonly GenerationResult[], choicesPerPrompt = 1): Usage {
  let promptTokens = 0;
  let cachedTokens = 0;
  let completionTokens = 0;
  results.forEach((result, index) => {
    if (index % choicesPerPrompt === 0) {
      promptTokens += result.promptTokens;
      cachedTokens += result.cachedTokens;
    }
    completionTokens += result.completionTokens;
  });
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

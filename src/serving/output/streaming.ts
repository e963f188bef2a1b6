import type { FinishReason, GenerationDelta, GenerationResult } from "../../engine/types.ts";
import { type ApiError, serverAbortError, toApiError } from "../../errors.ts";
import type { Usage } from "../../protocol/common.ts";

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

/** What every chunk of one stream repeats: OpenAI's `id`, `object`, `created`, `model`, `system_fingerprint`. */
export type StreamIdentity<Object extends string> = {
  readonly id: string;
  readonly object: Object;
  readonly created: number;
  readonly model: string;
  readonly systemFingerprint: string;
};

/** One chunk of a chat or completions stream. */
export type StreamChunk<Object extends string, Choice> = {
  id: string;
  object: Object;
  created: number;
  model: string;
  choices: Choice[];
  system_fingerprint: string;
  usage?: Usage;
};

/** A request's `stream_options` (OpenAI's `include_usage`, vLLM's `continuous_usage_stats`). */
export type StreamOptions = {
  include_usage?: boolean | null | undefined;
  continuous_usage_stats?: boolean | null | undefined;
};

/** What a {@link StreamAssembler} needs to know of its request. */
export type StreamUsageOptions = {
  /** The request's `stream_options`. */
  readonly streamOptions: StreamOptions | null | undefined;
  /** Prompt tokens of the request, every prompt once (the running usage's `prompt_tokens`). */
  readonly promptTokens: number;
  /** Choices per prompt (`n`): a prompt shared by them counts once in the final usage. */
  readonly choicesPerPrompt: number;
};

/**
 * The chunks of one stream, shared by chat and completions: counts the completion tokens as deltas
 * arrive, builds each chunk (with the usage so far under `stream_options.continuous_usage_stats`, as
 * vLLM), and closes the stream: each choice's last chunks, the usage chunk with `choices: []` when
 * `stream_options.include_usage` asks for it, then the end (or the final error event).
 */
export class StreamAssembler<Object extends string, Choice> {
  private readonly sink: ChunkSink;
  private readonly identity: StreamIdentity<Object>;
  private readonly options: StreamUsageOptions;
  /** Whether the stream ends with a usage chunk. */
  private readonly usageChunk: boolean;
  /** Whether every chunk carries the usage so far (vLLM sends it only when usage is asked for at all). */
  private readonly continuous: boolean;
  private completionTokens = 0;

  constructor(sink: ChunkSink, identity: StreamIdentity<Object>, options: StreamUsageOptions) {
    this.sink = sink;
    this.identity = identity;
    this.options = options;
    this.usageChunk = includeUsage(options.streamOptions);
    this.continuous = (options.streamOptions?.continuous_usage_stats ?? false) && this.usageChunk;
  }

  /** Counts a delta's tokens in the running usage. */
  count(delta: GenerationDelta): void {
    this.completionTokens += delta.tokenIds.length;
  }

  /** Sends one chunk holding `choices`. */
  send(choices: Choice[]): void {
    this.sink.send(this.chunk(choices));
  }

  /**
   * Waits for the generations (`finishStream`), lets `closeChoice` send each choice's last chunks, then
   * sends the usage chunk when asked and ends the stream.
   */
  finish(
    run: Promise<GenerationResult[]>,
    closeChoice: (result: GenerationResult, index: number) => void,
  ): Promise<void> {
    return finishStream(this.sink, run, (results) => {
      results.forEach(closeChoice);
      if (this.usageChunk) {
        this.sink.send(this.chunk([], sumUsage(results, this.options.choicesPerPrompt)));
      }
    });
  }

  private chunk(choices: Choice[], usage?: Usage): StreamChunk<Object, Choice> {
    const { id, object, created, model, systemFingerprint } = this.identity;
    const promptTokens = this.options.promptTokens;
    return {
      id,
      object,
      created,
      model,
      choices,
      system_fingerprint: systemFingerprint,
      ...(usage
        ? { usage }
        : this.continuous
          ? {
              usage: {
                prompt_tokens: promptTokens,
                completion_tokens: this.completionTokens,
                total_tokens: promptTokens + this.completionTokens,
              },
            }
          : {}),
    };
  }
}

/** The API's `finish_reason` of a finished (not aborted) generation. */
export function finishReasonOf(result: GenerationResult): Exclude<FinishReason, "abort"> {
  return result.finishReason === "length" ? "length" : "stop";
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

/**
 * The shared front half of the Responses and Anthropic stream writers (`openaiResponses.ts`, `anthropicMessages.ts`):
 * a {@link ChunkSink} that takes the chat serving's `chat.completion.chunk`s, keeps the usage chunk
 * and the finish reason, and hands each piece of the delta (reasoning, content, tool-call start and
 * arguments, in that order) to the subclass, which writes its own API's events to the real sink.
 */
import type { ApiError } from "../../errors.ts";
import type { ChatCompletionChunk } from "../../protocol/chat.ts";
import type { Usage } from "../../protocol/common.ts";
import type { ChunkSink } from "../output/streaming.ts";

/** A chat chunk stream translated into another API's events. */
export abstract class ChatChunkTranslator implements ChunkSink {
  private started = false;
  /** The chat `finish_reason` once the last chunk came. */
  protected finish: string | null | undefined;
  /** The chat `stop_reason` (the stop string or token id) once the last chunk came. */
  protected stop: string | number | null | undefined;
  /** The usage chunk's usage. */
  protected usage: Usage | undefined;

  constructor(protected readonly sink: ChunkSink) {}

  /** Writes the opening events (once, before the first piece). */
  protected abstract open(): void;
  /** A piece of reasoning text. */
  protected abstract reasoning(text: string): void;
  /** A piece of answer text. */
  protected abstract content(text: string): void;
  /** A tool call begins. */
  protected abstract toolCall(id: string, name: string): void;
  /** Arguments of the current tool call. */
  protected abstract toolArguments(text: string): void;
  /** Writes the closing events (after the finish and usage are known). */
  protected abstract close(): void;
  /** Writes the API's error event. */
  protected abstract error(error: ApiError): void;

  private begin(): void {
    if (this.started) return;
    this.started = true;
    this.open();
  }

  send(payload: unknown): void {
    this.begin();
    const chunk = payload as ChatCompletionChunk;
    if (chunk.usage && chunk.choices.length === 0) this.usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) return;
    const delta = choice.delta;
    if (delta.reasoning_content) this.reasoning(delta.reasoning_content);
    if (delta.content) this.content(delta.content);
    for (const fragment of delta.tool_calls ?? []) {
      if (fragment.id !== undefined) this.toolCall(fragment.id, fragment.function.name ?? "");
      if (fragment.function.arguments) this.toolArguments(fragment.function.arguments);
    }
    if (choice.finish_reason) {
      this.finish = choice.finish_reason;
      this.stop = choice.stop_reason;
    }
  }

  end(): void {
    this.begin();
    if (this.usage) this.sink.reportUsage?.(this.usage);
    this.close();
    this.sink.end();
  }

  fail(error: ApiError): void {
    this.begin();
    this.error(error);
    this.sink.end();
  }
}

/**
 * POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages API) on top of the chat serving:
 * the request is mapped to a chat completions request (`system` to a system message, content blocks
 * to chat messages, `tool_use` / `tool_result` blocks to tool calls and tool messages, `tool_choice`
 * `any` to `"required"`, `stop_sequences` to `stop`), planned and run by `chat.ts`, and the chat
 * response or chunk stream is turned into a message object or Anthropic's event sequence:
 * `message_start`, per content block `content_block_start`, `content_block_delta`s (`text_delta`,
 * `thinking_delta`, `input_json_delta`) and `content_block_stop`, then `message_delta` (stop reason,
 * output tokens) and `message_stop`.
 */
import { randomUUID } from "node:crypto";
import { type ApiError, badRequest } from "../errors.ts";
import type {
  AnthropicCountTokensRequest,
  AnthropicMessage,
  AnthropicMessageResponse,
  AnthropicMessagesRequest,
  AnthropicResponseBlock,
} from "../protocol/anthropicMessages.ts";
import type { ChatCompletionRequest } from "../protocol/chat.ts";
import type { Usage } from "../protocol/common.ts";
import { ChatChunkTranslator } from "./ChatChunkTranslator.ts";
import { type ChatPlan, planChat, renderPrompt } from "./chat.ts";
import { completeChat, streamChat } from "./chatResponse.ts";
import type { SeedSource } from "./generationParams.ts";
import { toInternalChatRequest } from "./internalChatRequest.ts";
import type { ModelRegistry } from "./ModelRegistry.ts";
import type { ChunkSink } from "./streaming.ts";

type StopReason = AnthropicMessageResponse["stop_reason"];

/**
 * Maps the prompt fields of a Messages request (model, system, messages, tools, tool_choice) to chat
 * request fields.
 * @throws ApiError 400 for image or document blocks (text-only models).
 */
function promptToChat(body: AnthropicCountTokensRequest): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [];
  const system =
    typeof body.system === "string" ? body.system : body.system?.map((block) => block.text).join("\n");
  if (system) messages.push({ role: "system", content: system });
  body.messages.forEach((message, index) => {
    addMessage(messages, message, index);
  });
  const choice = body.tool_choice;
  return {
    model: body.model,
    messages,
    tools: body.tools?.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: tool.input_schema },
    })),
    tool_choice:
      choice === undefined
        ? undefined
        : choice.type === "any"
          ? "required"
          : choice.type === "tool"
            ? { type: "function", function: { name: choice.name } }
            : choice.type,
    parallel_tool_calls:
      choice !== undefined && "disable_parallel_tool_use" in choice && choice.disable_parallel_tool_use
        ? false
        : undefined,
  };
}

/** Appends the chat messages of one Anthropic message: tool results become tool messages, first. */
function addMessage(messages: Record<string, unknown>[], message: AnthropicMessage, index: number): void {
  if (typeof message.content === "string") {
    messages.push({ role: message.role, content: message.content });
    return;
  }
  const text: string[] = [];
  const calls: Record<string, unknown>[] = [];
  message.content.forEach((block, blockIndex) => {
    if (block.type === "text") text.push(block.text as string);
    else if (block.type === "tool_use") {
      calls.push({
        id: block.id,
        type: "function",
        function: { name: block.name, arguments: JSON.stringify(block.input) },
      });
    } else if (block.type === "tool_result") {
      const content =
        typeof block.content === "string"
          ? block.content
          : (block.content ?? []).map((part) => (typeof part.text === "string" ? part.text : "")).join("");
      messages.push({ role: "tool", tool_call_id: block.tool_use_id, content });
    } else if (block.type === "image" || block.type === "document") {
      throw badRequest(
        `Content blocks of type '${block.type}' are not supported: this server serves text-only models.`,
        `messages[${index}].content[${blockIndex}]`,
      );
    }
  });
  if (message.role === "assistant") {
    if (text.length > 0 || calls.length > 0)
      messages.push({
        role: "assistant",
        content: text.length > 0 ? text.join("") : null,
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      });
  } else if (text.length > 0) messages.push({ role: "user", content: text.join("") });
}

/**
 * Maps a Messages request to the chat request it runs as.
 * @throws ApiError 400 for `thinking: {type: "enabled"}` (not supported yet) and media blocks.
 */
export function messagesToChat(body: AnthropicMessagesRequest): ChatCompletionRequest {
  if (body.thinking && body.thinking.type !== "disabled") {
    throw badRequest(
      'thinking is not supported yet: models with a reasoning parser think on their own; send thinking: {type: "disabled"} or leave it out.',
      "thinking",
      "unsupported_field",
    );
  }
  return toInternalChatRequest({
    ...promptToChat(body),
    max_tokens: body.max_tokens,
    stop: body.stop_sequences,
    temperature: body.temperature,
    top_p: body.top_p,
    top_k: body.top_k,
    user: body.metadata?.user_id ?? undefined,
    stream: body.stream,
    stream_options: body.stream ? { include_usage: true } : undefined,
  });
}

/** A planned Messages request: the chat plan it runs on. */
export type MessagesPlan = {
  readonly id: string;
  readonly chat: ChatPlan;
  readonly stops: readonly string[];
};

/**
 * Plans a Messages request on the chat serving, in the prefix-cache isolation domain `cacheDomain`.
 * @throws ApiError as {@link messagesToChat} and `planChat` (404 unknown model, 400s).
 */
export async function planMessages(
  registry: ModelRegistry,
  body: AnthropicMessagesRequest,
  seeds: SeedSource,
  maxTokensCap?: number,
  signal?: AbortSignal,
  cacheDomain = "",
): Promise<MessagesPlan> {
  const chat = await planChat(
    registry,
    messagesToChat(body),
    seeds,
    maxTokensCap,
    undefined,
    signal,
    cacheDomain,
  );
  return { id: `msg_${randomUUID().replaceAll("-", "")}`, chat, stops: body.stop_sequences ?? [] };
}

/**
 * `POST /v1/messages/count_tokens`: the prompt's tokens, rendered exactly as the message request would be.
 * @throws ApiError 404 unknown model; 400 as the chat template rendering.
 */
export async function countMessageTokens(
  registry: ModelRegistry,
  body: AnthropicCountTokensRequest,
): Promise<{ input_tokens: number }> {
  const chat = toInternalChatRequest(promptToChat(body));
  const { scheduler, chat: settings } = registry.resolve(chat.model, "generate");
  const [prompt, addSpecialTokens] = await renderPrompt(scheduler.host, settings, chat);
  return { input_tokens: scheduler.host.tokenize(prompt, addSpecialTokens).length };
}

/** Anthropic's stop reason of a chat finish (`stop_sequence` when a stop string of the request ended it). */
function stopReasonOf(
  plan: MessagesPlan,
  finish: string | null | undefined,
  stop: unknown,
): [StopReason, string | null] {
  if (finish === "tool_calls") return ["tool_use", null];
  if (finish === "length") return ["max_tokens", null];
  if (typeof stop === "string" && plan.stops.includes(stop)) return ["stop_sequence", stop];
  return ["end_turn", null];
}

function usageOf(usage: Usage | undefined, promptTokens: number): AnthropicMessageResponse["usage"] {
  return {
    input_tokens: usage?.prompt_tokens ?? promptTokens,
    output_tokens: usage?.completion_tokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

/** The parsed `input` of a tool call (`{}` when the arguments are not a JSON object). */
function toolInput(args: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(args);
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/**
 * Runs a planned Messages request to the end: content blocks in the order the model wrote them
 * (thinking, text, tool_use). Resolves with null when the client went away.
 */
export async function completeMessages(
  plan: MessagesPlan,
  signal: AbortSignal,
): Promise<AnthropicMessageResponse | null> {
  const chat = await completeChat(plan.chat, signal);
  if (!chat) return null;
  const choice = chat.choices[0];
  const message = choice?.message;
  const content: AnthropicResponseBlock[] = [];
  if (message?.reasoning_content)
    content.push({ type: "thinking", thinking: message.reasoning_content, signature: "" });
  if (message?.content) content.push({ type: "text", text: message.content });
  for (const call of message?.tool_calls ?? []) {
    content.push({
      type: "tool_use",
      id: call.id,
      name: call.function.name,
      input: toolInput(call.function.arguments),
    });
  }
  const [stopReason, stopSequence] = stopReasonOf(plan, choice?.finish_reason, choice?.stop_reason);
  return {
    id: plan.id,
    type: "message",
    role: "assistant",
    model: plan.chat.model,
    content,
    stop_reason: stopReason,
    stop_sequence: stopSequence,
    usage: usageOf(chat.usage, 0),
  };
}

/**
 * Runs a planned Messages request as Anthropic's event stream (see the module doc). A failure after
 * the stream started is an `error` event (`{type: "error", error: {type, message}}`). Ends the sink.
 * @throws ApiError 503 synchronously (before anything is written) when the queue is full.
 */
export function streamMessages(plan: MessagesPlan, sink: ChunkSink, signal: AbortSignal): Promise<void> {
  return streamChat(plan.chat, new MessageEventWriter(plan, sink), signal);
}

/** Turns a chat chunk stream into Anthropic's events (in front of the SSE sink). */
class MessageEventWriter extends ChatChunkTranslator {
  private index = -1;
  private block: "text" | "thinking" | "tool_use" | undefined;

  constructor(
    private readonly plan: MessagesPlan,
    sink: ChunkSink,
  ) {
    super(sink);
  }

  private emit(type: string, fields: Record<string, unknown> = {}): void {
    this.sink.send({ type, ...fields });
  }

  protected open(): void {
    this.emit("message_start", {
      message: {
        id: this.plan.id,
        type: "message",
        role: "assistant",
        model: this.plan.chat.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: usageOf(undefined, this.plan.chat.requests[0]?.promptTokens.length ?? 0),
      },
    });
  }

  private openBlock(kind: "text" | "thinking" | "tool_use", block: Record<string, unknown>): void {
    this.closeBlock();
    this.block = kind;
    this.index++;
    this.emit("content_block_start", { index: this.index, content_block: block });
  }

  private closeBlock(): void {
    if (this.block === undefined) return;
    this.emit("content_block_stop", { index: this.index });
    this.block = undefined;
  }

  private delta(delta: Record<string, unknown>): void {
    this.emit("content_block_delta", { index: this.index, delta });
  }

  protected reasoning(text: string): void {
    if (this.block !== "thinking")
      this.openBlock("thinking", { type: "thinking", thinking: "", signature: "" });
    this.delta({ type: "thinking_delta", thinking: text });
  }

  protected content(text: string): void {
    if (this.block !== "text") this.openBlock("text", { type: "text", text: "" });
    this.delta({ type: "text_delta", text });
  }

  protected toolCall(id: string, name: string): void {
    this.openBlock("tool_use", { type: "tool_use", id, name, input: {} });
  }

  protected toolArguments(text: string): void {
    if (this.block === "tool_use") this.delta({ type: "input_json_delta", partial_json: text });
  }

  protected close(): void {
    this.closeBlock();
    const [stopReason, stopSequence] = stopReasonOf(this.plan, this.finish, this.stop);
    this.emit("message_delta", {
      delta: { stop_reason: stopReason, stop_sequence: stopSequence },
      usage: { output_tokens: this.usage?.completion_tokens ?? 0 },
    });
    this.emit("message_stop");
  }

  protected error(error: ApiError): void {
    this.emit("error", { error: { type: anthropicErrorType(error.status), message: error.message } });
  }
}

/** Anthropic's error `type` for an HTTP status (their error catalogue). */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

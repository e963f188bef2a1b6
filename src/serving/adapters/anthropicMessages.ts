/**
 * POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages API) on top of the chat serving:
 * the request is mapped to a chat completions request (`system` to a system message, content blocks
 * to chat messages, `tool_use` / `tool_result` blocks to tool calls and tool messages, `tool_choice`
 * `any` to `"required"`, `stop_sequences` to `stop`), planned and run by `../chat.ts`, and the chat
 * response or chunk stream is turned into a message object or Anthropic's event sequence:
 * `message_start`, per content block `content_block_start`, `content_block_delta`s (`text_delta`,
 * `thinking_delta`, `input_json_delta`) and `content_block_stop`, then `message_delta` (stop reason,
 * output tokens) and `message_stop`.
 *
 * Extended thinking (`thinking`) on models with a reasoning parser: `enabled` and `adaptive` turn the
 * chat template's thinking knob on (as `reasoning_effort: "high"`: `enable_thinking` / `thinking` true,
 * `reasoning_effort` for templates that read it), and `enabled`'s `budget_tokens` is the thinking budget
 * (`nvext.max_thinking_tokens`: the engine closes the block there); `disabled` turns the knob off and
 * closes a block the prompt opened (`max_thinking_tokens: 0`). Without `thinking` the template's
 * default decides (Qwen3 thinks), and whatever reasoning the parser splits off is returned, as vLLM's
 * Anthropic endpoint does. Thinking comes back as `thinking` blocks before the text and `tool_use`
 * blocks, streamed as `content_block_start` (`{type: "thinking", thinking: "", signature: ""}`),
 * `thinking_delta`s, one `signature_delta`, `content_block_stop`. The signature is the base64 SHA-256
 * digest of the thinking text: opaque to clients, and not checked when a thinking block comes back in
 * an assistant turn (its `thinking` becomes the message's `reasoning_content`; `redacted_thinking` is dropped).
 * `output_config.effort` sets that knob's level (`max` as `xhigh`; `disabled` thinking still wins), and
 * `output_config.format` (a JSON schema) constrains the text as chat's `response_format`.
 */
import { createHash, randomUUID } from "node:crypto";
import { type ApiError, badRequest } from "../../errors.ts";
import type {
  AnthropicCountTokensRequest,
  AnthropicMessage,
  AnthropicMessageResponse,
  AnthropicMessagesRequest,
  AnthropicResponseBlock,
  AnthropicThinking,
} from "../../protocol/anthropicMessages.ts";
import type { ChatCompletionRequest } from "../../protocol/chat.ts";
import type { ReasoningEffort, Usage } from "../../protocol/common.ts";
import { type ChatPlan, planChat, renderPrompt } from "../chat.ts";
import { completeChat, streamChat } from "../chatResponse.ts";
import type { ModelRegistry } from "../ModelRegistry.ts";
import type { ChunkSink } from "../output/streaming.ts";
import type { SeedSource } from "../request/generationParams.ts";
import { ChatChunkTranslator } from "./ChatChunkTranslator.ts";
import { toInternalChatRequest } from "./internalChatRequest.ts";
import { reasoningTokenCount } from "./reasoningUsage.ts";

type StopReason = AnthropicMessageResponse["stop_reason"];

/** Anthropic's smallest `thinking.budget_tokens`. */
export const MIN_THINKING_BUDGET = 1024;

/**
 * The chat template knob of a request's `thinking` and `output_config.effort` (see the module doc), as
 * chat's `reasoning_effort`: `none` for `disabled`; else the effort (`max` as `xhigh`), which defaults to
 * `high` for `enabled` and `adaptive` (Anthropic's default effort) and to nothing without `thinking`.
 * @throws ApiError 400 for `between_tools` (not supported).
 */
function thinkingEffort(body: AnthropicCountTokensRequest): ReasoningEffort | undefined {
  const { thinking } = body;
  const requested = body.output_config?.effort;
  const effort = requested === "max" ? "xhigh" : (requested ?? undefined);
  if (thinking === undefined) return effort;
  if (thinking.type === "between_tools") {
    throw badRequest(
      'thinking type "between_tools" is not supported: send "enabled", "adaptive" or "disabled".',
      "thinking.type",
      "unsupported_field",
    );
  }
  return thinking.type === "disabled" ? "none" : (effort ?? "high");
}

/**
 * Maps the prompt fields of a Messages request (model, system, messages, tools, tool_choice, thinking's
 * template knob) to chat request fields.
 * @throws ApiError 400 for image or document blocks (text-only models) and `thinking: between_tools`.
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
    reasoning_effort: thinkingEffort(body),
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

/**
 * Appends the chat messages of one Anthropic message: tool results become tool messages, first; an
 * assistant turn's thinking blocks become its `reasoning_content` (joined), redacted ones are dropped.
 */
function addMessage(messages: Record<string, unknown>[], message: AnthropicMessage, index: number): void {
  if (typeof message.content === "string") {
    messages.push({ role: message.role, content: message.content });
    return;
  }
  const text: string[] = [];
  const calls: Record<string, unknown>[] = [];
  const thinking: string[] = [];
  message.content.forEach((block, blockIndex) => {
    if (block.type === "text") text.push(block.text as string);
    else if (block.type === "thinking") thinking.push(block.thinking as string);
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
    if (text.length > 0 || calls.length > 0 || thinking.length > 0)
      messages.push({
        role: "assistant",
        content: text.length > 0 ? text.join("") : calls.length > 0 ? null : "",
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
        ...(thinking.length > 0 ? { reasoning_content: thinking.join("\n\n") } : {}),
      });
  } else if (text.length > 0) messages.push({ role: "user", content: text.join("") });
}

/**
 * The thinking budget of a request as `nvext.max_thinking_tokens`: `budget_tokens` for `enabled`, 0 for
 * `disabled` (a block the prompt opened is closed at once), none otherwise.
 * @throws ApiError 400 (Anthropic's checks) for `budget_tokens` below 1024 or not below `max_tokens`.
 */
function thinkingBudget(body: AnthropicMessagesRequest): number | undefined {
  const thinking = body.thinking;
  if (thinking?.type === "disabled") return 0;
  if (thinking?.type !== "enabled") return undefined;
  checkBudgetMinimum(thinking);
  if (thinking.budget_tokens >= body.max_tokens) {
    throw badRequest(
      `\`max_tokens\` must be greater than \`thinking.budget_tokens\` (${body.max_tokens} <= ${thinking.budget_tokens}): thinking tokens count toward max_tokens.`,
      "max_tokens",
    );
  }
  return thinking.budget_tokens;
}

/**
 * Anthropic's floor of `budget_tokens`.
 * @throws ApiError 400 below {@link MIN_THINKING_BUDGET}.
 */
function checkBudgetMinimum(thinking: AnthropicThinking | undefined): void {
  if (thinking?.type === "enabled" && thinking.budget_tokens < MIN_THINKING_BUDGET) {
    throw badRequest(
      `thinking.enabled.budget_tokens: Input should be greater than or equal to ${MIN_THINKING_BUDGET}`,
      "thinking.budget_tokens",
    );
  }
}

/** `output_config.format` as chat's `response_format` (a JSON schema named `output`), or undefined. */
function outputFormat(body: AnthropicMessagesRequest): Record<string, unknown> | undefined {
  const format = body.output_config?.format;
  if (!format) return undefined;
  return { type: "json_schema", json_schema: { name: "output", schema: format.schema, strict: true } };
}

/**
 * Maps a Messages request to the chat request it runs as.
 * @throws ApiError 400 for media blocks and the `thinking` checks (see {@link thinkingBudget}).
 */
export function messagesToChat(body: AnthropicMessagesRequest): ChatCompletionRequest {
  const budget = thinkingBudget(body);
  return toInternalChatRequest({
    ...promptToChat(body),
    nvext: budget === undefined ? undefined : { max_thinking_tokens: budget },
    response_format: outputFormat(body),
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
  /** `thinking.display` `omitted`: thinking blocks carry an empty `thinking` (the signature stays). */
  readonly omitThinking: boolean;
  /** True when the model's reasoning is parsed (usage then has `output_tokens_details`). */
  readonly reasoning: boolean;
};

/**
 * Plans a Messages request on the chat serving, in the prefix-cache isolation domain `cacheDomain`.
 * @throws ApiError as {@link messagesToChat} and `planChat` (404 unknown model, 400s); 400 for `thinking`
 *   `enabled` or `adaptive` on a model without a reasoning parser (it cannot think, as Anthropic
 *   refuses thinking on a model without it).
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
  const reasoning = chat.outputs[0]?.reasoning ?? false;
  const thinking = body.thinking;
  if (!reasoning && (thinking?.type === "enabled" || thinking?.type === "adaptive")) {
    throw badRequest(
      `Model '${chat.model}' does not support thinking: it has no reasoning parser (its chat template has no thinking block; start the server with --reasoning-parser for a model that thinks).`,
      "thinking",
      "unsupported_field",
    );
  }
  const omitThinking = thinking !== undefined && "display" in thinking && thinking.display === "omitted";
  return {
    id: `msg_${randomUUID().replaceAll("-", "")}`,
    chat,
    stops: body.stop_sequences ?? [],
    omitThinking,
    reasoning,
  };
}

/** A thinking block's signature: the base64 SHA-256 digest of its text (see the module doc). */
function signatureOf(thinking: string): string {
  return createHash("sha256").update(thinking).digest("base64");
}

/**
 * `POST /v1/messages/count_tokens`: the prompt's tokens, rendered as the message request would be
 * (with `thinking`'s template knob; a block that `disabled` closes after a prompt that always opens it,
 * as DeepSeek-R1's, is not counted).
 * @throws ApiError 404 unknown model; 400 as the chat template rendering, a `budget_tokens` below 1024
 *   and `thinking: between_tools`.
 */
export async function countMessageTokens(
  registry: ModelRegistry,
  body: AnthropicCountTokensRequest,
): Promise<{ input_tokens: number }> {
  checkBudgetMinimum(body.thinking);
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

/** The message's usage; `thinking` is the thinking text so far (its tokens are `thinking_tokens`). */
function usageOf(
  plan: MessagesPlan,
  usage: Usage | undefined,
  promptTokens: number,
  thinking: string,
): AnthropicMessageResponse["usage"] {
  const output = usage?.completion_tokens ?? 0;
  return {
    input_tokens: usage?.prompt_tokens ?? promptTokens,
    output_tokens: output,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    output_tokens_details: plan.reasoning
      ? { thinking_tokens: reasoningTokenCount(plan.chat, thinking, output) }
      : null,
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
  const thinking = message?.reasoning_content ?? "";
  if (thinking)
    content.push({
      type: "thinking",
      thinking: plan.omitThinking ? "" : thinking,
      signature: signatureOf(thinking),
    });
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
    usage: usageOf(plan, chat.usage, 0, thinking),
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
  /** The thinking text of the open thinking block, and of all of them (for the usage). */
  private thinking = "";
  private allThinking = "";

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
        usage: usageOf(this.plan, undefined, this.plan.chat.requests[0]?.promptTokens.length ?? 0, ""),
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
    if (this.block === "thinking") {
      this.delta({ type: "signature_delta", signature: signatureOf(this.thinking) });
      this.allThinking += this.thinking;
      this.thinking = "";
    }
    this.emit("content_block_stop", { index: this.index });
    this.block = undefined;
  }

  private delta(delta: Record<string, unknown>): void {
    this.emit("content_block_delta", { index: this.index, delta });
  }

  protected reasoning(text: string): void {
    if (this.block !== "thinking")
      this.openBlock("thinking", { type: "thinking", thinking: "", signature: "" });
    this.thinking += text;
    if (!this.plan.omitThinking) this.delta({ type: "thinking_delta", thinking: text });
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
    const { output_tokens, output_tokens_details } = usageOf(this.plan, this.usage, 0, this.allThinking);
    this.emit("message_delta", {
      delta: { stop_reason: stopReason, stop_sequence: stopSequence },
      usage: { output_tokens, output_tokens_details },
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

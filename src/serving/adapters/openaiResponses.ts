/**
 * POST /v1/responses (OpenAI Responses API, stateless) on top of the chat serving: the request is mapped
 * to a chat completions request (`input` items to messages, `instructions` to a system message,
 * `text.format` to `response_format`, flat function tools to chat tools), planned and run by
 * `../chat.ts`, and the chat response or chunk stream is turned into a response object or the
 * `response.*` events, in OpenAI's order: `response.created`, `response.in_progress`, then per output
 * item `response.output_item.added`, `response.content_part.added`, the deltas
 * (`response.output_text.delta`, `response.reasoning_text.delta`,
 * `response.function_call_arguments.delta`), their `.done` events, `response.content_part.done`,
 * `response.output_item.done`; last `response.completed` (or `response.incomplete` when
 * `max_output_tokens` cut it). Each event has a `sequence_number`; there is no `[DONE]`.
 *
 * Reasoning: the text the reasoning parser splits off is a `reasoning` output item
 * (`{type: "reasoning", id: "rs_…", status, summary: [], content: [{type: "reasoning_text", text}]}`)
 * before the message and function calls, streamed as its item and content part with
 * `response.reasoning_text.delta`s and `.done`; `usage.output_tokens_details.reasoning_tokens` counts
 * its tokens. Reasoning items sent back in `input` become the `reasoning_content` of the assistant
 * turn (message or function calls) that follows them, which templates such as Qwen3's render; one that no
 * assistant item follows is dropped. With `include: ["reasoning.encrypted_content"]` each reasoning item
 * also carries `encrypted_content`: not encrypted (the text is in `content` anyway) but the text in
 * this server's encoding (`lmserve.reasoning.v1:` + base64 of the UTF-8 text), which it reads back when
 * an item comes without `content` (as clients such as Codex send them); another server's opaque value is ignored.
 */
import { randomUUID } from "node:crypto";
import { type ApiError, badRequest } from "../../errors.ts";
import type { ChatCompletionRequest, ChatCompletionResponse } from "../../protocol/chat.ts";
import type { Usage } from "../../protocol/common.ts";
import type {
  ResponseCreateRequest,
  ResponseInputItem,
  ResponseObject,
  ResponseOutputItem,
} from "../../protocol/openaiResponses.ts";
import { type ChatPlan, planChat } from "../chat.ts";
import { completeChat, streamChat } from "../chatResponse.ts";
import type { ModelRegistry } from "../ModelRegistry.ts";
import type { ChunkSink } from "../output/streaming.ts";
import type { SeedSource } from "../request/generationParams.ts";
import { ChatChunkTranslator } from "./ChatChunkTranslator.ts";
import { toInternalChatRequest } from "./internalChatRequest.ts";
import { reasoningTokenCount } from "./reasoningUsage.ts";

/** A planned response: the chat plan it runs on and what the response object echoes. */
export type ResponsePlan = {
  readonly id: string;
  readonly createdAt: number;
  readonly body: ResponseCreateRequest;
  readonly chat: ChatPlan;
  /** `include` has `reasoning.encrypted_content`: reasoning items carry `encrypted_content`. */
  readonly includeEncrypted: boolean;
};

const newId = (prefix: string) => `${prefix}_${randomUUID().replaceAll("-", "")}`;

/** The `include` values the server honours. */
const INCLUDABLE = new Set(["reasoning.encrypted_content"]);

/** The prefix of this server's `encrypted_content` (see the module doc). */
const ENCRYPTED_PREFIX = "lmserve.reasoning.v1:";

/** A reasoning text as `encrypted_content` (see the module doc). */
export function encodeReasoning(text: string): string {
  return ENCRYPTED_PREFIX + Buffer.from(text, "utf8").toString("base64");
}

/** The text of this server's `encrypted_content`, or undefined for any other value. */
export function decodeReasoning(encrypted: string): string | undefined {
  if (!encrypted.startsWith(ENCRYPTED_PREFIX)) return undefined;
  return Buffer.from(encrypted.slice(ENCRYPTED_PREFIX.length), "base64").toString("utf8");
}

/**
 * Maps a Responses request to the chat request it runs as.
 * @throws ApiError 400 for `previous_response_id`, `store: true`, an `include` value other than
 *   `reasoning.encrypted_content`, a tool that is not a function, media input, and (from the chat
 *   schema) anything the chat request refuses.
 */
export function responsesToChat(body: ResponseCreateRequest): ChatCompletionRequest {
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    throw badRequest(
      "previous_response_id is not supported yet: this server does not store responses. Send the whole conversation in `input`.",
      "previous_response_id",
      "unsupported_field",
    );
  }
  if (body.store === true) {
    throw badRequest(
      "store: true is not supported yet: this server does not store responses (send store: false or leave it out).",
      "store",
      "unsupported_field",
    );
  }
  (body.include ?? []).forEach((value, index) => {
    if (!INCLUDABLE.has(value)) {
      throw badRequest(
        `include value '${value}' is not supported: this server can include only reasoning.encrypted_content.`,
        `include[${index}]`,
        "unsupported_field",
      );
    }
  });
  const messages: Record<string, unknown>[] = [];
  if (body.instructions) messages.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else {
    const pending: PendingReasoning = { text: undefined };
    body.input.forEach((item, index) => {
      addInputItem(messages, item, index, pending);
    });
  }
  const tools = (body.tools ?? []).map((tool, index) => {
    if (tool.type !== "function") {
      throw badRequest(
        `Tool type '${tool.type}' is not supported: this server runs function tools only.`,
        `tools[${index}].type`,
        "unsupported_field",
      );
    }
    const { name, description, parameters, strict } = tool as Record<string, unknown>;
    return { type: "function", function: { name, description, parameters, strict } };
  });
  const format = body.text?.format;
  const choice = body.tool_choice;
  return toInternalChatRequest({
    model: body.model,
    messages,
    max_completion_tokens: body.max_output_tokens,
    temperature: body.temperature,
    top_p: body.top_p,
    tools: tools.length > 0 ? tools : undefined,
    tool_choice:
      typeof choice === "object" && choice ? { type: "function", function: { name: choice.name } } : choice,
    parallel_tool_calls: body.parallel_tool_calls,
    reasoning_effort: body.reasoning?.effort ?? undefined,
    thinking_token_budget: body.thinking_token_budget,
    reasoning_budget_tokens: body.reasoning_budget_tokens,
    thinking_budget_tokens: body.thinking_budget_tokens,
    response_format:
      format?.type === "json_schema"
        ? {
            type: "json_schema",
            json_schema: {
              name: format.name,
              description: format.description,
              schema: format.schema,
              strict: format.strict,
            },
          }
        : format,
    stream: body.stream,
    stream_options: body.stream ? { include_usage: true } : undefined,
    user: body.user,
  });
}

/** The reasoning of the `input` items read so far that no assistant item has taken yet. */
type PendingReasoning = { text: string | undefined };

/** The reasoning text of an input reasoning item: its `content`, else our `encrypted_content`, else none. */
function reasoningTextOf(item: Extract<ResponseInputItem, { type: "reasoning" }>): string | undefined {
  const content = item.content ?? [];
  if (content.length > 0) return content.map((part) => part.text).join("");
  return typeof item.encrypted_content === "string" ? decodeReasoning(item.encrypted_content) : undefined;
}

/** Adds `reasoning` to an assistant chat message's `reasoning_content` (after what it has). */
function addReasoning(message: Record<string, unknown>, reasoning: string | undefined): void {
  if (reasoning === undefined) return;
  const before = message.reasoning_content;
  message.reasoning_content = typeof before === "string" ? `${before}\n\n${reasoning}` : reasoning;
}

/**
 * Appends the chat message(s) of one `input` item: function calls join the assistant message before
 * them; a reasoning item's text waits in `pending` for the next assistant item (a non-assistant item drops it).
 */
function addInputItem(
  messages: Record<string, unknown>[],
  item: ResponseInputItem,
  index: number,
  pending: PendingReasoning,
): void {
  if (item.type === "reasoning") {
    const text = reasoningTextOf(item);
    if (text !== undefined) pending.text = pending.text === undefined ? text : `${pending.text}\n\n${text}`;
    return;
  }
  const reasoning = pending.text;
  pending.text = undefined;
  if (item.type === "function_call") {
    const call = {
      id: item.call_id,
      type: "function",
      function: { name: item.name, arguments: item.arguments },
    };
    const last = messages.at(-1);
    if (last?.role === "assistant" && Array.isArray(last.tool_calls)) {
      last.tool_calls.push(call);
      addReasoning(last, reasoning);
    } else {
      const message: Record<string, unknown> = { role: "assistant", content: null, tool_calls: [call] };
      addReasoning(message, reasoning);
      messages.push(message);
    }
    return;
  }
  if (item.type === "function_call_output") {
    const output =
      typeof item.output === "string" ? item.output : item.output.map((part) => part.text).join("");
    messages.push({ role: "tool", tool_call_id: item.call_id, content: output });
    return;
  }
  const content =
    typeof item.content === "string"
      ? item.content
      : item.content.map((part, partIndex) => {
          if (part.type === "input_text" || part.type === "output_text")
            return { type: "text", text: part.text };
          throw badRequest(
            `Input of type '${part.type}' is not supported: this server serves text-only models.`,
            `input[${index}].content[${partIndex}]`,
          );
        });
  const message: Record<string, unknown> = { role: item.role, content };
  if (item.role === "assistant") addReasoning(message, reasoning);
  messages.push(message);
}

/**
 * Plans a Responses request on the chat serving (see {@link responsesToChat} and `planChat`), in the
 * prefix-cache isolation domain `cacheDomain`.
 * @throws ApiError as {@link responsesToChat} and `planChat` (404 unknown model, 400s).
 */
export async function planResponse(
  registry: ModelRegistry,
  body: ResponseCreateRequest,
  seeds: SeedSource,
  maxTokensCap?: number,
  signal?: AbortSignal,
  cacheDomain = "",
): Promise<ResponsePlan> {
  const chat = await planChat(
    registry,
    responsesToChat(body),
    seeds,
    maxTokensCap,
    undefined,
    signal,
    cacheDomain,
  );
  const includeEncrypted = (body.include ?? []).includes("reasoning.encrypted_content");
  return { id: newId("resp"), createdAt: chat.created, body, chat, includeEncrypted };
}

/** A reasoning output item of `text` (with `encrypted_content` when the request included it). */
function reasoningItem(
  plan: ResponsePlan,
  id: string,
  text: string,
  incomplete: boolean,
): ResponseOutputItem {
  return {
    type: "reasoning",
    id,
    status: incomplete ? "incomplete" : "completed",
    summary: [],
    content: [{ type: "reasoning_text", text }],
    ...(plan.includeEncrypted ? { encrypted_content: encodeReasoning(text) } : {}),
  };
}

/**
 * The response object around `output` (status from the chat finish reason); `reasoning_tokens` counts
 * the tokens of the reasoning items' text.
 */
function responseObject(
  plan: ResponsePlan,
  output: ResponseOutputItem[],
  finish: string | null | undefined,
  usage: Usage | undefined,
): ResponseObject {
  const reasoning = output
    .map((item) => (item.type === "reasoning" ? item.content.map((part) => part.text).join("") : ""))
    .join("");
  const { body } = plan;
  const format = body.text?.format ?? { type: "text" };
  const status = finish === undefined ? "in_progress" : finish === "length" ? "incomplete" : "completed";
  return {
    id: plan.id,
    object: "response",
    created_at: plan.createdAt,
    status,
    error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: plan.chat.model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    store: false,
    temperature: body.temperature ?? null,
    top_p: body.top_p ?? null,
    text: { format },
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    truncation: "disabled",
    usage: usage
      ? {
          input_tokens: usage.prompt_tokens,
          input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
          output_tokens: usage.completion_tokens,
          output_tokens_details: {
            reasoning_tokens: reasoningTokenCount(plan.chat, reasoning, usage.completion_tokens),
          },
          total_tokens: usage.total_tokens,
        }
      : null,
    user: body.user ?? null,
    metadata: body.metadata ?? {},
  };
}

/**
 * Runs a planned response to the end: output items in the order the model wrote them (reasoning, the
 * message, function calls). Resolves with null when the client went away.
 */
export async function completeResponse(
  plan: ResponsePlan,
  signal: AbortSignal,
): Promise<ResponseObject | null> {
  const chat: ChatCompletionResponse | null = await completeChat(plan.chat, signal);
  if (!chat) return null;
  const choice = chat.choices[0];
  const message = choice?.message;
  const output: ResponseOutputItem[] = [];
  const reasoning = message?.reasoning_content;
  const cut = choice?.finish_reason === "length";
  if (reasoning) {
    // Cut inside the thinking: nothing came after it.
    const last = !message?.content && (message?.tool_calls ?? []).length === 0;
    output.push(reasoningItem(plan, newId("rs"), reasoning, cut && last));
  }
  if (message?.content) {
    output.push({
      type: "message",
      id: newId("msg"),
      status: choice?.finish_reason === "length" ? "incomplete" : "completed",
      role: "assistant",
      content: [{ type: "output_text", text: message.content, annotations: [] }],
    });
  }
  for (const call of message?.tool_calls ?? []) {
    output.push({
      type: "function_call",
      id: newId("fc"),
      call_id: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
      status: "completed",
    });
  }
  return responseObject(plan, output, choice?.finish_reason ?? "stop", chat.usage);
}

/**
 * Runs a planned response as a stream of `response.*` events (see the module doc). A failure after
 * the stream started is an `error` event (`{type: "error", code, message, param}` plus OpenAI's
 * `error` object, so the SDKs raise it). Ends the sink.
 * @throws ApiError 503 synchronously (before anything is written) when the queue is full.
 */
export function streamResponse(plan: ResponsePlan, sink: ChunkSink, signal: AbortSignal): Promise<void> {
  return streamChat(plan.chat, new ResponseEventWriter(plan, sink), signal);
}

/** Turns a chat chunk stream into `response.*` events (in front of the SSE sink). */
class ResponseEventWriter extends ChatChunkTranslator {
  private sequence = 0;
  private readonly output: ResponseOutputItem[] = [];
  /** The open item and the text it has gathered. */
  private current: { item: ResponseOutputItem; text: string } | undefined;

  constructor(
    private readonly plan: ResponsePlan,
    sink: ChunkSink,
  ) {
    super(sink);
  }

  private emit(type: string, fields: Record<string, unknown>): void {
    this.sink.send({ type, sequence_number: this.sequence++, ...fields });
  }

  protected open(): void {
    const response = responseObject(this.plan, [], undefined, undefined);
    this.emit("response.created", { response });
    this.emit("response.in_progress", { response });
  }

  protected reasoning(text: string): void {
    this.text("reasoning", text);
  }

  protected content(text: string): void {
    this.text("message", text);
  }

  protected toolCall(id: string, name: string): void {
    this.closeItem();
    const item: ResponseOutputItem = {
      type: "function_call",
      id: newId("fc"),
      call_id: id,
      name,
      arguments: "",
      status: "in_progress",
    };
    this.current = { item, text: "" };
    this.output.push(item);
    this.emit("response.output_item.added", { output_index: this.output.length - 1, item });
  }

  protected toolArguments(text: string): void {
    if (this.current?.item.type !== "function_call") return;
    this.current.text += text;
    this.emit("response.function_call_arguments.delta", {
      item_id: this.current.item.id,
      output_index: this.output.length - 1,
      delta: text,
    });
  }

  /** A text delta of a message or reasoning item, opening the item (and its content part) first. */
  private text(kind: "message" | "reasoning", delta: string): void {
    if (this.current?.item.type !== kind) {
      this.closeItem();
      const item: ResponseOutputItem =
        kind === "message"
          ? { type: "message", id: newId("msg"), status: "in_progress", role: "assistant", content: [] }
          : {
              type: "reasoning",
              id: newId("rs"),
              status: "in_progress",
              summary: [],
              content: [],
            };
      this.current = { item, text: "" };
      this.output.push(item);
      const where = { output_index: this.output.length - 1 };
      this.emit("response.output_item.added", { ...where, item });
      this.emit("response.content_part.added", {
        ...where,
        item_id: item.id,
        content_index: 0,
        part:
          kind === "message"
            ? { type: "output_text", text: "", annotations: [] }
            : { type: "reasoning_text", text: "" },
      });
    }
    const open = this.current as { item: ResponseOutputItem; text: string };
    open.text += delta;
    this.emit(kind === "message" ? "response.output_text.delta" : "response.reasoning_text.delta", {
      item_id: open.item.id,
      output_index: this.output.length - 1,
      content_index: 0,
      delta,
      ...(kind === "message" ? { logprobs: [] } : {}),
    });
  }

  /** Closes the open item: its `.done` events, with the item in its final form. */
  private closeItem(incomplete = false): void {
    const open = this.current;
    if (!open) return;
    this.current = undefined;
    const index = this.output.length - 1;
    const where = { item_id: open.item.id, output_index: index };
    let item: ResponseOutputItem;
    if (open.item.type === "function_call") {
      item = { ...open.item, arguments: open.text, status: "completed" };
      this.emit("response.function_call_arguments.done", { ...where, arguments: open.text });
    } else if (open.item.type === "message") {
      const part = { type: "output_text" as const, text: open.text, annotations: [] };
      item = { ...open.item, status: incomplete ? "incomplete" : "completed", content: [part] };
      this.emit("response.output_text.done", { ...where, content_index: 0, text: open.text, logprobs: [] });
      this.emit("response.content_part.done", { ...where, content_index: 0, part });
    } else {
      const part = { type: "reasoning_text" as const, text: open.text };
      item = reasoningItem(this.plan, open.item.id, open.text, incomplete);
      this.emit("response.reasoning_text.done", { ...where, content_index: 0, text: open.text });
      this.emit("response.content_part.done", { ...where, content_index: 0, part });
    }
    this.output[index] = item;
    this.emit("response.output_item.done", { output_index: index, item });
  }

  protected close(): void {
    this.closeItem(this.finish === "length");
    const response = responseObject(this.plan, this.output, this.finish ?? "stop", this.usage);
    this.emit(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response });
  }

  protected error(error: ApiError): void {
    const { message, param, code, type } = error;
    this.emit("error", { code, message, param, error: { message, type, param, code } });
  }
}

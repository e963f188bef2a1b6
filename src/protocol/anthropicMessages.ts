/**
 * POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages API): request schemas, the
 * message object, stream events and the error body, as zod schemas (the OpenAPI document is generated
 * from them) and types. Served on the chat serving by `serving/adapters/anthropicMessages.ts`.
 */
import { z } from "zod";
import { CacheSaltSchema } from "./common.ts";

const textBlock = z.object({ type: z.literal("text"), text: z.string() });
const toolUseBlock = z.object({
  type: z.literal("tool_use"),
  id: z.string(),
  name: z.string(),
  input: z.record(z.string(), z.unknown()),
});
const toolResultBlock = z.object({
  type: z.literal("tool_result"),
  tool_use_id: z.string(),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]).optional(),
  is_error: z.boolean().optional(),
});
/**
 * A thinking block of an earlier assistant turn: its `thinking` reaches the chat template as the
 * assistant message's `reasoning_content`; `signature` is accepted and not checked.
 */
const thinkingBlock = z.looseObject({
  type: z.literal("thinking"),
  thinking: z.string(),
  signature: z.string().nullish(),
});
/** A redacted thinking block (`data` is Anthropic's encrypted thinking): accepted and dropped. */
const redactedThinkingBlock = z.looseObject({ type: z.literal("redacted_thinking") });
/** Media blocks are declared so that the serving can answer them with a precise 400. */
const mediaBlock = z.looseObject({ type: z.enum(["image", "document"]) });

/** One content block of a request message. */
export const AnthropicContentBlockSchema = z.discriminatedUnion("type", [
  textBlock,
  toolUseBlock,
  toolResultBlock,
  thinkingBlock,
  redactedThinkingBlock,
  mediaBlock,
]);

/** A request message: `user` or `assistant`, content a string or blocks. */
export const AnthropicMessageSchema = z.object({
  role: z.enum(["user", "assistant"]),
  content: z.union([z.string(), z.array(AnthropicContentBlockSchema)]),
});

/** A validated request message. */
export type AnthropicMessage = z.infer<typeof AnthropicMessageSchema>;

/** A client tool: `{name, description?, input_schema}` (Anthropic's custom tool). */
export const AnthropicToolSchema = z.object({
  type: z.literal("custom").optional(),
  name: z.string().min(1),
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()),
});

/** `tool_choice`: auto, any (a call of some tool), tool (that one), none. */
export const AnthropicToolChoiceSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal("tool"), name: z.string(), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal("none") }),
]);

/** `thinking.display`: `summarized` returns the thinking text (ours is whole, not summarized), `omitted` an empty one. */
const thinkingDisplay = z.enum(["summarized", "omitted"]).nullish();

/**
 * Extended thinking (`thinking`), Anthropic's four kinds: `enabled` with a `budget_tokens` budget (at least
 * 1024 and below `max_tokens`, checked by the serving with Anthropic's 400s), `adaptive` (the model
 * decides), `disabled`, and `between_tools` (declared so that the serving refuses it with a 400).
 */
export const AnthropicThinkingSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("enabled"), budget_tokens: z.number().int(), display: thinkingDisplay }),
  z.object({ type: z.literal("adaptive"), display: thinkingDisplay }),
  z.object({ type: z.literal("disabled") }),
  z.object({ type: z.literal("between_tools") }),
]);

/** A validated `thinking` configuration. */
export type AnthropicThinking = z.infer<typeof AnthropicThinkingSchema>;

/**
 * `output_config`: `effort` (`max` as `xhigh`) reaches the chat template's reasoning knob as chat's
 * `reasoning_effort` (as vLLM's Anthropic endpoint maps it); `format` (`json_schema`) constrains the
 * text as chat's `response_format` does.
 */
export const AnthropicOutputConfigSchema = z.object({
  effort: z.enum(["low", "medium", "high", "xhigh", "max"]).nullish(),
  format: z.object({ type: z.literal("json_schema"), schema: z.record(z.string(), z.unknown()) }).nullish(),
});

const systemSchema = z.union([z.string(), z.array(textBlock)]);

/** The fields of a prompt (shared by `/v1/messages` and `/v1/messages/count_tokens`). */
const promptFields = {
  /** Defaults to the first served model. */
  model: z.string().nullish(),
  system: systemSchema.optional(),
  messages: z.array(AnthropicMessageSchema).min(1),
  tools: z.array(AnthropicToolSchema).optional(),
  tool_choice: AnthropicToolChoiceSchema.optional(),
  /** Extended thinking (see {@link AnthropicThinkingSchema}); absent: the chat template's default. */
  thinking: AnthropicThinkingSchema.optional(),
  output_config: AnthropicOutputConfigSchema.optional(),
};

/** The `POST /v1/messages` request body (unknown fields are ignored, as on the other routes). */
export const AnthropicMessagesRequestSchema = z.object({
  ...promptFields,
  max_tokens: z.number().int().min(1),
  stop_sequences: z.array(z.string()).max(16).optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  stream: z.boolean().optional(),
  metadata: z.object({ user_id: z.string().nullish() }).optional(),
  /** vLLM's prefix-cache isolation salt (see `CacheSaltSchema`); not an Anthropic field. */
  cache_salt: CacheSaltSchema,
});

/** A validated `POST /v1/messages` request. */
export type AnthropicMessagesRequest = z.infer<typeof AnthropicMessagesRequestSchema>;

/** The `POST /v1/messages/count_tokens` request body. */
export const AnthropicCountTokensRequestSchema = z.object(promptFields);

/** A validated `POST /v1/messages/count_tokens` request. */
export type AnthropicCountTokensRequest = z.infer<typeof AnthropicCountTokensRequestSchema>;

/** `POST /v1/messages/count_tokens` response. */
export const AnthropicCountTokensResponseSchema = z.object({ input_tokens: z.number().int() });

/** A response content block. */
export const AnthropicResponseBlockSchema = z.union([
  textBlock,
  toolUseBlock,
  /**
   * The model's thinking. `signature` is this server's: the base64 SHA-256 digest of the thinking text
   * (an opaque value clients pass back; it is not checked when they do).
   */
  z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string() }),
]);

/** A response content block. */
export type AnthropicResponseBlock = z.infer<typeof AnthropicResponseBlockSchema>;

/**
 * `usage.output_tokens_details`: `thinking_tokens`, the output tokens of the thinking text (re-tokenized,
 * so it may differ from the generated count by a few tokens, as Anthropic documents for theirs).
 */
export const AnthropicOutputTokensDetailsSchema = z.object({ thinking_tokens: z.number().int() });

/** `usage` of a message; `output_tokens_details` is null when the model has no reasoning parser. */
export const AnthropicUsageSchema = z.object({
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  cache_creation_input_tokens: z.number().int().nullable(),
  cache_read_input_tokens: z.number().int().nullable(),
  output_tokens_details: AnthropicOutputTokensDetailsSchema.nullable(),
});

/** The message object of a `POST /v1/messages` response. */
export const AnthropicMessageResponseSchema = z.object({
  id: z.string(),
  type: z.literal("message"),
  role: z.literal("assistant"),
  model: z.string(),
  content: z.array(AnthropicResponseBlockSchema),
  stop_reason: z.enum(["end_turn", "max_tokens", "stop_sequence", "tool_use"]).nullable(),
  stop_sequence: z.string().nullable(),
  usage: AnthropicUsageSchema,
});

/** A message object. */
export type AnthropicMessageResponse = z.infer<typeof AnthropicMessageResponseSchema>;

/** One streamed event (`message_start`, `content_block_delta`, ...): its `type` plus its fields. */
export const AnthropicStreamEventSchema = z.looseObject({ type: z.string() });

/** Anthropic's error body: `{type: "error", error: {type, message}}`. */
export const AnthropicErrorBodySchema = z.object({
  type: z.literal("error"),
  error: z.object({ type: z.string(), message: z.string() }),
});

/** An Anthropic error body. */
export type AnthropicErrorBody = z.infer<typeof AnthropicErrorBodySchema>;

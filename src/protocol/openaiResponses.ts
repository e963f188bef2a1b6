/**
 * POST /v1/responses (OpenAI Responses API, stateless): the request schema, the response object and the
 * stream events, as zod schemas (the OpenAPI document is generated from them) and types. Only what
 * the server honours is declared; `previous_response_id` and `store: true` are refused by the serving
 * (`serving/adapters/openaiResponses.ts`), other unknown fields are ignored as on the other routes.
 */
import { z } from "zod";
import { CacheSaltSchema, REASONING_EFFORTS } from "./common.ts";

const textContent = z.object({ type: z.enum(["input_text", "output_text"]), text: z.string() });
/** Media inputs are declared so that the serving can answer them with a precise 400. */
const mediaContent = z.looseObject({ type: z.enum(["input_image", "input_file", "input_audio"]) });

/** A message item of `input`: `{type?: "message", role, content}`; content a string or text parts. */
const messageItem = z.object({
  type: z.literal("message").optional(),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: z.union([z.string(), z.array(z.discriminatedUnion("type", [textContent, mediaContent]))]),
});

/** A function call the model made earlier (sent back by the client with its output). */
const functionCallItem = z.object({
  type: z.literal("function_call"),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  id: z.string().optional(),
});

/** The output of a function call, for the model to read. */
const functionCallOutputItem = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string(),
  output: z.union([z.string(), z.array(textContent)]),
});

/**
 * A reasoning item of an earlier response: its `content` texts (else the text of this server's
 * `encrypted_content`) become the `reasoning_content` of the assistant turn that follows it; `summary`
 * is accepted and not rendered.
 */
const reasoningItem = z.looseObject({
  type: z.literal("reasoning"),
  id: z.string().nullish(),
  summary: z.array(z.looseObject({ type: z.string(), text: z.string() })).nullish(),
  content: z.array(z.object({ type: z.literal("reasoning_text"), text: z.string() })).nullish(),
  encrypted_content: z.string().nullish(),
});

/** One `input` item. */
export const ResponseInputItemSchema = z.union([
  messageItem,
  functionCallItem,
  functionCallOutputItem,
  reasoningItem,
]);

/** A validated `input` item. */
export type ResponseInputItem = z.infer<typeof ResponseInputItemSchema>;

/** A function tool (Responses' flat shape: `{type: "function", name, description?, parameters?, strict?}`). */
export const ResponseFunctionToolSchema = z.object({
  type: z.literal("function"),
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

/** `text.format`: plain text, JSON mode, or a JSON Schema (flat: `{type, name, schema, strict?}`). */
export const ResponseTextFormatSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: z.string(),
    description: z.string().nullish(),
    schema: z.record(z.string(), z.unknown()),
    strict: z.boolean().nullish(),
  }),
]);

/** The `POST /v1/responses` request body. */
export const ResponseCreateRequestSchema = z.object({
  /** Defaults to the first served model. */
  model: z.string().nullish(),
  input: z.union([z.string(), z.array(ResponseInputItemSchema).min(1)]),
  instructions: z.string().nullish(),
  /** Default: until EOS or the end of the context (as chat). */
  max_output_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  text: z.object({ format: ResponseTextFormatSchema.nullish() }).nullish(),
  /** Only function tools; any other type is a 400. */
  tools: z.array(z.looseObject({ type: z.string() })).nullish(),
  tool_choice: z
    .union([
      z.enum(["none", "auto", "required"]),
      z.object({ type: z.literal("function"), name: z.string() }),
    ])
    .nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  /**
   * Extra output to include: only `reasoning.encrypted_content` (each reasoning item then carries
   * `encrypted_content`, this server's encoding of its text, which it reads back in `input`); any
   * other value is a 400.
   */
  include: z.array(z.string()).nullish(),
  /**
   * OpenAI's reasoning configuration: `effort` maps as chat's `reasoning_effort`; `summary` is accepted
   * and no summary is written (the reasoning item carries the whole reasoning text in `content`).
   */
  reasoning: z
    .looseObject({ effort: z.enum(REASONING_EFFORTS).nullish(), summary: z.string().nullish() })
    .nullish(),
  /**
   * The thinking budget in tokens, as on chat completions (`ChatCompletionRequestSchema`): vLLM's
   * `thinking_token_budget`, llama-server's `reasoning_budget_tokens` / `thinking_budget_tokens` (-1:
   * unlimited), each an alias of `nvext.max_thinking_tokens`; two that differ are a 400.
   */
  thinking_token_budget: z.number().int().min(0).nullish(),
  reasoning_budget_tokens: z.number().int().min(-1).nullish(),
  thinking_budget_tokens: z.number().int().min(-1).nullish(),
  stream: z.boolean().nullish(),
  /** Refused when set: responses are not stored, so there is nothing to continue from. */
  previous_response_id: z.string().nullish(),
  /** `true` is refused (nothing is stored); absent or false: stateless. */
  store: z.boolean().nullish(),
  user: z.string().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  /** vLLM's prefix-cache isolation salt (see `CacheSaltSchema`). */
  cache_salt: CacheSaltSchema,
});

/** A validated `POST /v1/responses` request. */
export type ResponseCreateRequest = z.infer<typeof ResponseCreateRequestSchema>;

const OutputTextSchema = z.object({
  type: z.literal("output_text"),
  text: z.string(),
  annotations: z.array(z.unknown()),
});

/** An output message item. */
export const ResponseOutputMessageSchema = z.object({
  type: z.literal("message"),
  id: z.string(),
  status: z.enum(["in_progress", "completed", "incomplete"]),
  role: z.literal("assistant"),
  content: z.array(OutputTextSchema),
});

/** An output function call item. */
export const ResponseFunctionCallSchema = z.object({
  type: z.literal("function_call"),
  id: z.string(),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  status: z.enum(["in_progress", "completed", "incomplete"]),
});

/**
 * An output reasoning item (the text a reasoning parser split off); `summary` is always empty (no
 * summaries are written), `encrypted_content` only with `include: ["reasoning.encrypted_content"]`.
 */
export const ResponseReasoningSchema = z.object({
  type: z.literal("reasoning"),
  id: z.string(),
  status: z.enum(["in_progress", "completed", "incomplete"]),
  summary: z.array(z.unknown()),
  content: z.array(z.object({ type: z.literal("reasoning_text"), text: z.string() })),
  encrypted_content: z.string().optional(),
});

/** One output item. */
export const ResponseOutputItemSchema = z.union([
  ResponseOutputMessageSchema,
  ResponseFunctionCallSchema,
  ResponseReasoningSchema,
]);

/** `usage` of a response. */
export const ResponseUsageSchema = z.object({
  input_tokens: z.number().int(),
  input_tokens_details: z.object({ cached_tokens: z.number().int() }),
  output_tokens: z.number().int(),
  output_tokens_details: z.object({ reasoning_tokens: z.number().int() }),
  total_tokens: z.number().int(),
});

/** The response object (`object: "response"`). */
export const ResponseObjectSchema = z.object({
  id: z.string(),
  object: z.literal("response"),
  created_at: z.number().int(),
  status: z.enum(["in_progress", "completed", "incomplete", "failed"]),
  error: z.null(),
  incomplete_details: z.object({ reason: z.literal("max_output_tokens") }).nullable(),
  instructions: z.string().nullable(),
  max_output_tokens: z.number().int().nullable(),
  model: z.string(),
  output: z.array(ResponseOutputItemSchema),
  parallel_tool_calls: z.boolean(),
  previous_response_id: z.null(),
  store: z.literal(false),
  temperature: z.number().nullable(),
  top_p: z.number().nullable(),
  text: z.object({ format: z.record(z.string(), z.unknown()) }),
  tool_choice: z.unknown(),
  tools: z.array(z.unknown()),
  truncation: z.literal("disabled"),
  usage: ResponseUsageSchema.nullable(),
  user: z.string().nullable(),
  metadata: z.record(z.string(), z.string()),
});

/** A response object. */
export type ResponseObject = z.infer<typeof ResponseObjectSchema>;
/** An output item. */
export type ResponseOutputItem = z.infer<typeof ResponseOutputItemSchema>;

/** One streamed event: `type` plus its fields (`response.created`, `response.output_text.delta`, ...). */
export const ResponseStreamEventSchema = z.looseObject({
  type: z.string(),
  sequence_number: z.number().int(),
});

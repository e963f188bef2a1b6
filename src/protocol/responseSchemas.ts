/**
 * zod schemas of the response bodies, for the OpenAPI document (`server/openapi.ts`). The response
 * *types* the code builds live next to their requests (`completions.ts`, `chat.ts`, `models.ts`,
 * `server/errorBody.ts`); `test/unit/responseSchemas.test.ts` checks at compile time that each schema
 * here infers exactly that type, so the document cannot drift from what the server sends.
 */
import { z } from "zod";

/** `usage` (OpenAI), with vLLM's `prompt_tokens_details.cached_tokens`. */
export const UsageSchema = z.object({
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  prompt_tokens_details: z.object({ cached_tokens: z.number().int() }).nullable().exactOptional(),
});

/** OpenAI's legacy completion `logprobs` object. */
export const CompletionLogprobsSchema = z.object({
  tokens: z.array(z.string()),
  token_logprobs: z.array(z.number().nullable()),
  top_logprobs: z.array(z.record(z.string(), z.number()).nullable()),
  text_offset: z.array(z.number().int()),
});

/** A choice of a completions response or stream chunk. */
export const CompletionChoiceSchema = z.object({
  index: z.number().int(),
  text: z.string(),
  logprobs: CompletionLogprobsSchema.nullable(),
  finish_reason: z.enum(["stop", "length"]).nullable(),
  /** vLLM: the stop string (or token id) that ended the choice. */
  stop_reason: z.union([z.string(), z.number()]).nullable(),
  /**
   * vLLM: with `prompt_logprobs`, per prompt position (the first `null`) the top tokens by id, each with
   * its `logprob`, `rank` and `decoded_token`.
   */
  prompt_logprobs: z
    .array(
      z
        .record(
          z.string(),
          z.object({ logprob: z.number(), rank: z.number().int().nullable(), decoded_token: z.string() }),
        )
        .nullable(),
    )
    .optional(),
});

/** `POST /v1/completions` response; every stream chunk has the same shape. */
export const CompletionResponseSchema = z.object({
  id: z.string(),
  object: z.literal("text_completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(CompletionChoiceSchema),
  usage: UsageSchema.nullable().exactOptional(),
  system_fingerprint: z.string(),
});

const TopLogprobSchema = z.object({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.number().int()).nullable(),
});

/** One entry of chat `logprobs.content`. */
export const ChatLogprobEntrySchema = z.object({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.number().int()).nullable(),
  top_logprobs: z.array(TopLogprobSchema),
});

/** A tool call of an assistant message. */
export const ResponseToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

const ChatFinishReasonSchema = z.enum(["stop", "length", "tool_calls"]).nullable();

/** A choice of a non-streamed chat completion. */
export const ChatChoiceSchema = z.object({
  index: z.number().int(),
  message: z.object({
    role: z.literal("assistant"),
    content: z.string().nullable(),
    reasoning_content: z.string().nullable().exactOptional(),
    tool_calls: z.array(ResponseToolCallSchema).exactOptional(),
  }),
  logprobs: z.object({ content: z.array(ChatLogprobEntrySchema) }).nullable(),
  finish_reason: ChatFinishReasonSchema,
  stop_reason: z.union([z.string(), z.number()]).nullable(),
});

/** `POST /v1/chat/completions` response (not streamed). */
export const ChatCompletionResponseSchema = z.object({
  id: z.string(),
  object: z.literal("chat.completion"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(ChatChoiceSchema),
  usage: UsageSchema,
  system_fingerprint: z.string(),
});

/** A choice of a chat stream chunk. */
export const ChatChunkChoiceSchema = z.object({
  index: z.number().int(),
  delta: z.object({
    role: z.literal("assistant").exactOptional(),
    content: z.string().nullable().exactOptional(),
    reasoning_content: z.string().nullable().exactOptional(),
    tool_calls: z
      .array(
        z.object({
          index: z.number().int(),
          id: z.string().exactOptional(),
          type: z.literal("function").exactOptional(),
          function: z.object({ name: z.string().exactOptional(), arguments: z.string().exactOptional() }),
        }),
      )
      .exactOptional(),
  }),
  logprobs: z.object({ content: z.array(ChatLogprobEntrySchema) }).nullable(),
  finish_reason: ChatFinishReasonSchema,
  stop_reason: z.union([z.string(), z.number()]).nullable().exactOptional(),
});

/** One `data:` event of a streamed chat completion. */
export const ChatCompletionChunkSchema = z.object({
  id: z.string(),
  object: z.literal("chat.completion.chunk"),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(ChatChunkChoiceSchema),
  usage: UsageSchema.nullable().exactOptional(),
  system_fingerprint: z.string(),
});

/** OpenAI's model object plus vLLM's `root`, `parent` and `max_model_len`, and lmserve's `capabilities`. */
export const ModelObjectSchema = z.object({
  id: z.string(),
  object: z.literal("model"),
  created: z.number().int(),
  owned_by: z.string(),
  root: z.string(),
  parent: z.string().nullable(),
  /** The context length; absent while the model is not loaded. */
  max_model_len: z.number().int().exactOptional(),
  /**
   * What the model serves and takes: `vision` with a projector (`--mmproj`), its `task`, and how
   * `/v1/embeddings` (or rerank) pools its hidden states; absent while not loaded.
   */
  capabilities: z
    .object({
      vision: z.boolean(),
      task: z.enum(["generate", "embed", "rerank"]),
      pooling: z.enum(["mean", "cls", "last", "rank"]),
    })
    .exactOptional(),
  /** Its GGUF file (models served from `--models-dir` or the download cache). */
  path: z.string().exactOptional(),
  /** Its residency (run-time load/unload, `--models-dir`): llama-server's router `status`. */
  status: z
    .object({
      value: z.enum(["loaded", "loading", "unloading", "unloaded", "failed"]),
      /** Why its last load failed. */
      reason: z.string().exactOptional(),
      /** Bytes it holds: weights + KV cache + projector, as measured at load. */
      memory_bytes: z.number().int().exactOptional(),
      /** Requests holding it now. */
      in_flight: z.number().int().exactOptional(),
      /** When it unloads if idle (ISO 8601, Ollama's); null: not scheduled. */
      expires_at: z.string().nullable().exactOptional(),
    })
    .exactOptional(),
});

/** `POST /models/load` / `POST /models/unload` response (llama-server's router). */
export const ModelActionResponseSchema = z.object({ success: z.literal(true) });

/** `GET /v1/models` response. */
export const ModelListSchema = z.object({ object: z.literal("list"), data: z.array(ModelObjectSchema) });

/** The error body of every 4xx/5xx (and of a stream's final error event). */
export const ErrorBodySchema = z.object({
  object: z.literal("error"),
  message: z.string(),
  type: z.string(),
  param: z.string().nullable(),
  /** The HTTP status (NIM). */
  code: z.number().int(),
  /** OpenAI's error object; its `code` is a stable snake_case identifier. */
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string() }),
  /** FastAPI's validation details, on a 422. */
  detail: z
    .array(z.object({ loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), type: z.string() }))
    .exactOptional(),
});

/** The health endpoints' body (NIM's shape). */
export const HealthResponseSchema = z.object({ object: z.literal("health.response"), message: z.string() });

/** `GET /v1/version`: the server's version (package.json), as vLLM's `/version`. */
export const VersionResponseSchema = z.object({ version: z.string() });

/** A `GET /v1/version` response. */
export type VersionResponse = z.infer<typeof VersionResponseSchema>;

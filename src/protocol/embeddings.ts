/**
 * `POST /v1/embeddings`: OpenAI's embeddings request and response (`input` as a string, strings, token
 * ids or lists of token ids; `encoding_format` float or base64; `dimensions`; `user`).
 */
import { z } from "zod";

/** One input: text, or token ids. */
const tokenIds = z.array(z.number().int().min(0));

/** A `/v1/embeddings` request. `model` defaults to the first served model. */
export const EmbeddingRequestSchema = z.object({
  model: z.string().nullish(),
  /** A string, a list of strings, a list of token ids, or a list of lists of token ids (one embedding each). */
  input: z.union([z.string(), z.array(z.string()), tokenIds, z.array(tokenIds)]),
  /** `float` (default) or `base64` (little-endian float32, as OpenAI's). */
  encoding_format: z.enum(["float", "base64"]).nullish(),
  /** The embedding width; only the model's own width is served (no Matryoshka truncation). */
  dimensions: z.number().int().min(1).nullish(),
  user: z.string().nullish(),
});

/** A validated `/v1/embeddings` request. */
export type EmbeddingRequest = z.infer<typeof EmbeddingRequestSchema>;

/** One embedding of the response. */
export const EmbeddingObjectSchema = z.object({
  object: z.literal("embedding"),
  index: z.number().int(),
  embedding: z.union([z.array(z.number()), z.string()]),
});

/** The `/v1/embeddings` response. */
export const EmbeddingResponseSchema = z.object({
  object: z.literal("list"),
  data: z.array(EmbeddingObjectSchema),
  model: z.string(),
  usage: z.object({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
});

/** A `/v1/embeddings` response. */
export type EmbeddingResponse = z.infer<typeof EmbeddingResponseSchema>;

/**
 * Reranking requests and responses: `POST /v1/rerank`, `/rerank` (Jina's and llama-server's shape),
 * `/v2/rerank` (Cohere's), and `POST /score`, `/v1/score` (vLLM's score API).
 */
import { z } from "zod";

/** A document: its text, or an object with `text` (Jina, Cohere v1). */
const DocumentSchema = z.union([z.string(), z.object({ text: z.string() }).passthrough()]);

/** A rerank request (Jina / Cohere / llama-server). `model` defaults to the first served model. */
export const RerankRequestSchema = z.object({
  model: z.string().nullish(),
  query: z.string(),
  /** The documents to score against `query`; at least one. */
  documents: z.array(DocumentSchema),
  /** Results to return, best first. Defaults to all. */
  top_n: z.number().int().min(1).nullish(),
  /** Include each result's document. Defaults to false. */
  return_documents: z.boolean().nullish(),
  /** Cohere's limit on tokens per document; documents are never split here. */
  max_tokens_per_doc: z.number().int().min(1).nullish(),
});

/** A validated rerank request. */
export type RerankRequest = z.infer<typeof RerankRequestSchema>;

/** One rerank result: the document's index in the request and its score (higher is more relevant). */
const RerankResultSchema = z.object({
  index: z.number().int(),
  relevance_score: z.number(),
  document: z.object({ text: z.string() }).optional(),
});

/** One rerank result. */
export type RerankResult = z.infer<typeof RerankResultSchema>;

/** The rerank response (Jina's shape; `/v2/rerank` adds Cohere's `meta`). */
export const RerankResponseSchema = z.object({
  id: z.string(),
  model: z.string(),
  object: z.literal("list").optional(),
  results: z.array(RerankResultSchema),
  usage: z.object({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
  meta: z
    .object({
      billed_units: z.object({ search_units: z.number().int() }),
      tokens: z.object({ input_tokens: z.number().int() }),
    })
    .optional(),
});

/** A rerank response. */
export type RerankResponse = z.infer<typeof RerankResponseSchema>;

/** vLLM's score request: `text_1` scored against `text_2` (one or many; a list `text_1` pairs up with `text_2`). */
export const ScoreRequestSchema = z.object({
  model: z.string().nullish(),
  text_1: z.union([z.string(), z.array(z.string())]),
  text_2: z.union([z.string(), z.array(z.string())]),
});

/** A validated score request. */
export type ScoreRequest = z.infer<typeof ScoreRequestSchema>;

/** vLLM's score response. */
export const ScoreResponseSchema = z.object({
  id: z.string(),
  object: z.literal("list"),
  created: z.number().int(),
  model: z.string(),
  data: z.array(z.object({ index: z.number().int(), object: z.literal("score"), score: z.number() })),
  usage: z.object({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
});

/** A score response. */
export type ScoreResponse = z.infer<typeof ScoreResponseSchema>;

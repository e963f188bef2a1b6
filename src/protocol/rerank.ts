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
export type RerankResult = {
  index: number;
  relevance_score: number;
  document?: { text: string };
};

/** The rerank response (Jina's shape; Cohere's adds `meta`). */
export type RerankResponse = {
  id: string;
  model: string;
  object?: "list";
  results: RerankResult[];
  usage: { prompt_tokens: number; total_tokens: number };
  meta?: { billed_units: { search_units: number }; tokens: { input_tokens: number } };
};

/** vLLM's score request: `text_1` scored against `text_2` (one or many; a list `text_1` pairs up with `text_2`). */
export const ScoreRequestSchema = z.object({
  model: z.string().nullish(),
  text_1: z.union([z.string(), z.array(z.string())]),
  text_2: z.union([z.string(), z.array(z.string())]),
});

/** A validated score request. */
export type ScoreRequest = z.infer<typeof ScoreRequestSchema>;

/** vLLM's score response. */
export type ScoreResponse = {
  id: string;
  object: "list";
  created: number;
  model: string;
  data: { index: number; object: "score"; score: number }[];
  usage: { prompt_tokens: number; total_tokens: number };
};

/**
 * Reranking (`/v1/rerank`, `/rerank`, `/v2/rerank`) and vLLM's score API (`/score`, `/v1/score`) on a
 * cross-encoder reranker: each (query, document) pair is one input laid out as llama-server lays it out
 * (BOS, query, EOS where the tokenizer appends one, SEP where it adds one, document, EOS), and the
 * engine's rank pooling returns the classifier's score; pairs of one request share steps.
 */
import { randomUUID } from "node:crypto";
import { plainRequest } from "../engine/plainRequest.ts";
import { badRequest } from "../errors.ts";
import type { RerankRequest, RerankResponse, ScoreRequest, ScoreResponse } from "../protocol/rerank.ts";
import type { EngineHost } from "./engine.ts";
import type { ModelRegistry } from "./ModelRegistry.ts";

/**
 * The token ids of one (query, document) pair, as llama-server's `format_prompt_rerank`: with the GGUF's
 * rerank prompt (`tokenizer.chat_template.rerank`, Qwen3-Reranker's), that prompt with `{query}` and
 * `{document}` replaced, its special-token text read as those tokens and nothing added; without one,
 * BOS, the query, EOS / SEP, the document, EOS as the tokenizer adds them.
 */
export function rerankTokens(host: EngineHost, query: string, document: string): number[] {
  if (host.rerankPrompt) {
    const prompt = host.rerankPrompt.replaceAll("{query}", query).replaceAll("{document}", document);
    return host.tokenize(prompt, false);
  }
  const { bos, eos, sep, addBos, addEos, addSep } = host.info;
  const end = eos >= 0 ? eos : (sep ?? -1);
  const tokens: number[] = [];
  if (addBos && bos >= 0) tokens.push(bos);
  tokens.push(...host.tokenize(query, false));
  if (addEos && end >= 0) tokens.push(end);
  if (addSep && sep !== undefined && sep >= 0) tokens.push(sep);
  tokens.push(...host.tokenize(document, false));
  if (addEos && end >= 0) tokens.push(end);
  return tokens;
}

/**
 * The scores of each (query, document) pair, in order, and the tokens they took.
 * @throws ApiError 404 for an unknown model; 400 for a model that does not rerank, no documents, or a
 *   pair longer than the model's window (with the numbers); 503 when the queue is full.
 */
async function scorePairs(
  registry: ModelRegistry,
  model: string | null | undefined,
  pairs: [string, string][],
  param: string,
  signal: AbortSignal,
): Promise<{ name: string; scores: number[]; tokens: number }> {
  const { name, scheduler } = registry.resolve(model, "rerank");
  const host = scheduler.host;
  if (pairs.length === 0) throw badRequest(`${param} must not be empty.`, param);
  const prompts = pairs.map(([query, document]) => rerankTokens(host, query, document));
  prompts.forEach((tokens, index) => {
    if (tokens.length > host.contextSize) {
      throw badRequest(
        `${param}[${index}] with the query has ${tokens.length} tokens, more than the model's window of ${host.contextSize}.`,
        `${param}[${index}]`,
      );
    }
  });
  scheduler.assertCapacity(prompts.length);
  const results = await Promise.all(
    prompts.map((tokens) =>
      scheduler.submit(plainRequest(tokens, 0, { embed: "rank" }), { onDelta: () => undefined }, signal),
    ),
  );
  const scores = results.map((result) => {
    if (!result.embedding) throw result.abortReason ?? new Error("the rerank request was aborted");
    return result.embedding[0] as number;
  });
  return { name, scores, tokens: prompts.reduce((sum, tokens) => sum + tokens.length, 0) };
}

/** The text of a document (a string, or an object with `text`). */
function documentText(document: RerankRequest["documents"][number]): string {
  return typeof document === "string" ? document : document.text;
}

/**
 * Reranks `documents` against `query`: results sorted by `relevance_score` (the model's raw score, as
 * llama-server's), best first, each with its index, at most `top_n`, with the document when
 * `return_documents`. `cohere` adds Cohere's `meta` (`/v2/rerank`).
 * @throws ApiError as {@link scorePairs} (`documents` empty: 400).
 */
export async function createRerank(
  registry: ModelRegistry,
  body: RerankRequest,
  signal: AbortSignal,
  cohere = false,
): Promise<RerankResponse> {
  const texts = body.documents.map(documentText);
  const { name, scores, tokens } = await scorePairs(
    registry,
    body.model,
    texts.map((text) => [body.query, text]),
    "documents",
    signal,
  );
  const order = scores
    .map((score, index) => ({ index, score }))
    .sort((a, b) => b.score - a.score || a.index - b.index);
  const results = order.slice(0, body.top_n ?? order.length).map(({ index, score }) => ({
    index,
    relevance_score: score,
    ...(body.return_documents ? { document: { text: texts[index] as string } } : {}),
  }));
  return {
    id: `rerank-${randomUUID().replaceAll("-", "")}`,
    model: name,
    object: "list",
    results,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
    ...(cohere ? { meta: { billed_units: { search_units: 1 }, tokens: { input_tokens: tokens } } } : {}),
  };
}

/**
 * vLLM's score API: `text_1` (one) against each `text_2`, or pairwise when both are lists of one length.
 * @throws ApiError 400 for lists of different lengths or empty ones; as {@link scorePairs}.
 */
export async function createScore(
  registry: ModelRegistry,
  body: ScoreRequest,
  signal: AbortSignal,
): Promise<ScoreResponse> {
  const first = typeof body.text_1 === "string" ? [body.text_1] : body.text_1;
  const second = typeof body.text_2 === "string" ? [body.text_2] : body.text_2;
  if (first.length === 0) throw badRequest("text_1 must not be empty.", "text_1");
  if (first.length !== 1 && first.length !== second.length) {
    throw badRequest(
      `text_1 has ${first.length} texts and text_2 ${second.length}: give one text_1, or as many as text_2.`,
      "text_1",
    );
  }
  const pairs = second.map((text, index): [string, string] => [
    (first.length === 1 ? first[0] : first[index]) as string,
    text,
  ]);
  const { name, scores, tokens } = await scorePairs(registry, body.model, pairs, "text_2", signal);
  return {
    id: `score-${randomUUID().replaceAll("-", "")}`,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model: name,
    data: scores.map((score, index) => ({ index, object: "score", score })),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

/**
 * `POST /v1/embeddings` (OpenAI's shape): each input is tokenized (BOS as the model asks) and runs through
 * the engine's step loop as a sequence that returns its pooled hidden state instead of generating, so
 * embeddings share the slots, the queue, the metrics and the limits with generation. Vectors are
 * L2-normalised, as OpenAI's are. `dimensions` shortens them only for a model declared Matryoshka
 * (`--matryoshka-dimensions`): the first `dimensions` values of the pooled vector, renormalised, as
 * vLLM's pooler does for `is_matryoshka` models.
 */
import { plainRequest } from "../engine/plainRequest.ts";
import type { GenerationRequest, Pooling } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import type { EmbeddingRequest, EmbeddingResponse } from "../protocol/embeddings.ts";
import type { EngineHost } from "./engine.ts";
import type { ModelRegistry } from "./ModelRegistry.ts";

/**
 * Embeds every input of the request, in order.
 * @throws ApiError 404 for an unknown model; 400 for an empty input or list, a token id outside the
 *   vocabulary, an input longer than the context (with the numbers), and `dimensions` other than the
 *   model's width or one of its Matryoshka widths (naming the allowed values); 503 when the queue is full.
 */
export async function createEmbeddings(
  registry: ModelRegistry,
  body: EmbeddingRequest,
  signal: AbortSignal,
): Promise<EmbeddingResponse> {
  const { name, scheduler, matryoshkaDimensions } = registry.resolve(body.model, "embed");
  const host = scheduler.host;
  const dimensions = outputWidth(body.dimensions, host.info.nEmbd, matryoshkaDimensions);
  const prompts = inputTokens(body.input, (text) => textTokens(host, text), host.vocabularySize);
  prompts.forEach((tokens, index) => {
    if (tokens.length > host.contextSize) {
      throw badRequest(
        `input${Array.isArray(body.input) ? `[${index}]` : ""} has ${tokens.length} tokens, more than the model's context of ${host.contextSize}.`,
        "input",
      );
    }
  });
  scheduler.assertCapacity(prompts.length);
  const results = await Promise.all(
    prompts.map((promptTokens) =>
      scheduler.submit(embeddingRequest(promptTokens, host.pooling), { onDelta: () => undefined }, signal),
    ),
  );
  const data = results.map((result, index) => {
    if (!result.embedding) throw result.abortReason ?? new Error("the embedding request was aborted");
    const vector = normalised(
      dimensions < result.embedding.length ? result.embedding.subarray(0, dimensions) : result.embedding,
    );
    return {
      object: "embedding" as const,
      index,
      embedding: body.encoding_format === "base64" ? base64Of(vector) : Array.from(vector),
    };
  });
  const promptTokens = prompts.reduce((sum, tokens) => sum + tokens.length, 0);
  return {
    object: "list",
    data,
    model: name,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

/**
 * A text input's tokens with the special tokens the tokenizer adds (as llama.cpp's `llama_tokenize` with
 * `add_special`, what llama-server embeds): BOS where asked, and SEP / EOS at the end where the
 * tokenizer appends them (BERT's `[CLS] text [SEP]`).
 */
function textTokens(host: EngineHost, text: string): number[] {
  const tokens = host.tokenize(text, true);
  const { sep, addSep, eos, addEos } = host.info;
  if (addSep && sep !== undefined && sep >= 0) tokens.push(sep);
  else if (addEos && eos >= 0) tokens.push(eos);
  return tokens;
}

/**
 * The width of the vectors returned: the model's own, or a requested Matryoshka width it declares.
 * @throws ApiError 400 (`param` dimensions) for any other `dimensions`, naming the allowed values.
 */
function outputWidth(
  dimensions: number | null | undefined,
  width: number,
  matryoshka: readonly number[],
): number {
  if (dimensions === undefined || dimensions === null || dimensions === width) return width;
  const allowed = matryoshka.filter((value) => value < width);
  if (allowed.includes(dimensions)) return dimensions;
  throw badRequest(
    allowed.length === 0
      ? `dimensions: this model's embeddings have ${width} dimensions and cannot be shortened (it declares no Matryoshka dimensions; --matryoshka-dimensions).`
      : `dimensions: this model gives ${[...allowed, width].join(", ")} dimensions, not ${dimensions}.`,
    "dimensions",
  );
}

/** The token ids of each input (OpenAI's four `input` forms). @throws ApiError 400 for an empty input or a bad id. */
function inputTokens(
  input: EmbeddingRequest["input"],
  tokenize: (text: string) => number[],
  vocabularySize: number,
): number[][] {
  const empty = () => badRequest("input must not be empty.", "input");
  if (typeof input === "string") {
    if (input.length === 0) throw empty();
    return [tokenize(input)];
  }
  if (input.length === 0) throw empty();
  if (input.every((item) => typeof item === "number"))
    return [checkIds(input as number[], vocabularySize, "input")];
  return input.map((item, index) => {
    if (typeof item === "string") {
      if (item.length === 0) throw badRequest(`input[${index}] must not be empty.`, `input[${index}]`);
      return tokenize(item);
    }
    if (item.length === 0) throw badRequest(`input[${index}] must not be empty.`, `input[${index}]`);
    return checkIds(item, vocabularySize, `input[${index}]`);
  });
}

function checkIds(ids: number[], vocabularySize: number, param: string): number[] {
  const outside = ids.findIndex((id) => id >= vocabularySize);
  if (outside !== -1) {
    throw badRequest(
      `Token id ${ids[outside]} is outside the vocabulary (0..${vocabularySize - 1}).`,
      `${param}[${outside}]`,
    );
  }
  return ids;
}

/** The engine request of one input: its prompt, pooled, nothing generated. */
function embeddingRequest(promptTokens: number[], pooling: Pooling): GenerationRequest {
  return plainRequest(promptTokens, 0, { embed: pooling });
}

/** The vector scaled to unit L2 length (a zero vector stays zero). */
function normalised(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const value of vector) sum += value * value;
  const norm = Math.sqrt(sum);
  return norm > 0 ? Float32Array.from(vector, (value) => value / norm) : Float32Array.from(vector);
}

/** OpenAI's base64 encoding: the little-endian float32 bytes. */
function base64Of(vector: Float32Array): string {
  const bytes = new Uint8Array(vector.length * 4);
  const view = new DataView(bytes.buffer);
  vector.forEach((value, index) => {
    view.setFloat32(index * 4, value, true);
  });
  return Buffer.from(bytes).toString("base64");
}

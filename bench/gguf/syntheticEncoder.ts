/**
 * Builds a random-weight BERT-family encoder GGUF that llama.cpp loads as a real `bert` model (an
 * embedding model such as bge-small, or with `rerank`, a cross-encoder reranker such as bge-reranker
 * with the classification head `cls` / `cls.output`). The tokenizer is copied verbatim from a
 * vocabulary GGUF (e.g. llama.cpp's `models/ggml-vocab-bert-bge.gguf`); weights are seeded noise,
 * norms are ones.
 *
 * Tensor names and shapes follow llama.cpp's loader (`src/models/bert.cpp`,
 * `llama_model_base::create_tensor_qkv`); metadata keys follow `src/llama-arch.cpp` (`LLM_KV_*`).
 */
import { GgmlType, GgufValueType } from "./format.ts";
import { GgufWriter } from "./GgufWriter.ts";
import { readVocab } from "./readVocab.ts";
import type { TensorPlan, WrittenPlan } from "./syntheticModel.ts";
import { writeTensorPlan } from "./syntheticModel.ts";

/** Shape of a BERT encoder; sizes are element counts. */
export interface EncoderShape {
  /** `n_embd`. */
  hidden: number;
  /** `n_layer`. */
  layers: number;
  /** `n_head`; divides `hidden`. */
  heads: number;
  /** `n_ff`. */
  ffn: number;
  /** `n_ctx_train` (the position-embedding rows), in tokens. */
  context: number;
}

/** bge-small-en-v1.5's shape: 12 layers, 384 wide, 12 heads, 1536 ffn, 512 positions. */
export const BGE_SMALL_SHAPE: Readonly<EncoderShape> = {
  hidden: 384,
  layers: 12,
  heads: 12,
  ffn: 1536,
  context: 512,
};

/** BERT-base's shape (bge-base, bge-reranker-base): 12 layers, 768 wide, 12 heads, 3072 ffn, 512 positions. */
export const BERT_BASE_SHAPE: Readonly<EncoderShape> = {
  hidden: 768,
  layers: 12,
  heads: 12,
  ffn: 3072,
  context: 512,
};

/** Options of {@link writeSyntheticEncoder}. */
export interface SyntheticEncoderOptions {
  shape: EncoderShape;
  /** GGUF whose `tokenizer.*` keys are copied. */
  vocabPath: string;
  outPath: string;
  /** PRNG seed (32-bit integer). */
  seed: number;
  /**
   * llama.cpp's pooling type written as `bert.pooling_type`: 1 mean, 2 cls, 3 last, 4 rank. Defaults to
   * 2 (cls, as bge), or 4 with `rerank`.
   */
  pooling?: number;
  /** Add the classification head (`cls.*`, `cls.output.*`, one label) of a cross-encoder reranker. Defaults to false. */
  rerank?: boolean;
  /** Standard deviation of the random weights. Defaults to 0.02. */
  std?: number;
}

/** The tensors of a `bert` GGUF of `shape` over `vocabSize` tokens, F32 throughout. */
export function planEncoderTensors(shape: EncoderShape, vocabSize: number, rerank: boolean): TensorPlan[] {
  const f32 = GgmlType.F32;
  const { hidden: h, ffn } = shape;
  const normal = (name: string, dims: number[]): TensorPlan => ({ name, dims, type: f32, init: "normal" });
  const ones = (name: string): TensorPlan => ({ name, dims: [h], type: f32, init: "ones" });
  const zeros = (name: string, size = h): TensorPlan => ({ name, dims: [size], type: f32, init: "zeros" });
  const plan: TensorPlan[] = [
    normal("token_embd.weight", [h, vocabSize]),
    normal("token_types.weight", [h, 2]),
    normal("position_embd.weight", [h, shape.context]),
    ones("token_embd_norm.weight"),
    zeros("token_embd_norm.bias"),
  ];
  for (let i = 0; i < shape.layers; i++) {
    const p = `blk.${i}`;
    for (const part of ["attn_q", "attn_k", "attn_v", "attn_output"]) {
      plan.push(normal(`${p}.${part}.weight`, [h, h]), normal(`${p}.${part}.bias`, [h]));
    }
    plan.push(ones(`${p}.attn_output_norm.weight`), zeros(`${p}.attn_output_norm.bias`));
    plan.push(normal(`${p}.ffn_up.weight`, [h, ffn]), normal(`${p}.ffn_up.bias`, [ffn]));
    plan.push(normal(`${p}.ffn_down.weight`, [ffn, h]), normal(`${p}.ffn_down.bias`, [h]));
    plan.push(ones(`${p}.layer_output_norm.weight`), zeros(`${p}.layer_output_norm.bias`));
  }
  if (rerank) {
    plan.push(normal("cls.weight", [h, h]), normal("cls.bias", [h]));
    plan.push(normal("cls.output.weight", [h, 1]), normal("cls.output.bias", [1]));
  }
  return plan;
}

/**
 * Writes a random-weight `bert` GGUF (see the file's header).
 * @throws {RangeError} when `hidden` is not divisible by `heads`; readVocab's errors; I/O errors.
 */
export async function writeSyntheticEncoder(options: SyntheticEncoderOptions): Promise<WrittenPlan> {
  const { shape } = options;
  if (shape.hidden % shape.heads !== 0)
    throw new RangeError(`hidden ${shape.hidden} not divisible by heads ${shape.heads}`);
  const vocab = readVocab(options.vocabPath);
  const rerank = options.rerank ?? false;
  const u32 = GgufValueType.UINT32;
  const writer = new GgufWriter();
  writer
    .addScalar("general.architecture", GgufValueType.STRING, "bert")
    .addScalar("general.type", GgufValueType.STRING, "model")
    .addScalar(
      "general.name",
      GgufValueType.STRING,
      `synthetic bert h${shape.hidden} l${shape.layers}${rerank ? " reranker" : ""}`,
    )
    .addScalar("general.file_type", u32, 0)
    .addScalar("general.alignment", u32, writer.alignment)
    .addScalar("bert.context_length", u32, shape.context)
    .addScalar("bert.embedding_length", u32, shape.hidden)
    .addScalar("bert.block_count", u32, shape.layers)
    .addScalar("bert.feed_forward_length", u32, shape.ffn)
    .addScalar("bert.attention.head_count", u32, shape.heads)
    .addScalar("bert.attention.layer_norm_epsilon", GgufValueType.FLOAT32, 1e-12)
    .addScalar("bert.attention.causal", GgufValueType.BOOL, false)
    .addScalar("bert.pooling_type", u32, options.pooling ?? (rerank ? 4 : 2));
  const hasTypeCount = vocab.tokenizerKvs.some((kv) => kv.key === "tokenizer.ggml.token_type_count");
  for (const kv of vocab.tokenizerKvs) writer.addKv(kv.key, { kind: "raw", bytes: kv.raw });
  if (!hasTypeCount) writer.addScalar("tokenizer.ggml.token_type_count", u32, 2);
  const plan = planEncoderTensors(shape, vocab.tokenCount, rerank);
  return writeTensorPlan(writer, plan, {
    outPath: options.outPath,
    seed: options.seed,
    ...(options.std !== undefined ? { std: options.std } : {}),
  });
}

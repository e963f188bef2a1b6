/**
 * Builds a random-weight BERT-family encoder GGUF that llama.cpp loads as a real model of one of three
 * architectures:
 * - `bert` (bge-small, bge-base): learned position embeddings, separate Q/K/V with biases, a GELU FFN;
 *   with `rerank`, a cross-encoder reranker such as bge-reranker with the head `cls` / `cls.output`.
 * - `nomic-bert` (nomic-embed-text-v1.5): rotary positions (`rope.freq_base` 1000), one fused
 *   `attn_qkv` without bias, a SwiGLU FFN (`ffn_up`, `ffn_gate`, `ffn_down`) without biases; no reranker
 *   head (llama.cpp loads `cls` only for `bert`).
 * - `nomic-bert-moe` (nomic-embed-text-v2-moe): nomic-bert's rotary attention and fused QKV, a plain GELU
 *   FFN (`ffn_up` / `ffn_down` with biases), and every `moeEvery`-th layer a mixture of GELU experts
 *   (`ffn_gate_inp` router, `ffn_up_exps` / `ffn_down_exps`), as llama.cpp's `nomic-bert-moe.cpp` loads it;
 * - `jina-bert-v2` (jina-embeddings-v2-small-en): ALiBi (no position tensor), Q/K/V with biases, a GEGLU
 *   FFN (`ffn_up` and `ffn_gate` without bias, `ffn_down` with); with `rerank`, jina-reranker-v1's
 *   one-row head `cls` (`[hidden, 1]`, no `cls.output`).
 * The tokenizer is copied verbatim from a vocabulary GGUF (e.g. llama.cpp's
 * `models/ggml-vocab-bert-bge.gguf`); weights are seeded noise, norms are ones.
 *
 * Tensor names and shapes follow llama.cpp's loaders (`src/models/bert.cpp`, `nomic-bert.cpp`,
 * `jina-bert-v2.cpp`, `llama_model_base::create_tensor_qkv`) and the graph they share
 * (`llama_model_bert::graph`); metadata keys follow `src/llama-arch.cpp` (`LLM_KV_*`).
 */
import { GgmlType, GgufValueType } from "./format.ts";
import { GgufWriter } from "./GgufWriter.ts";
import { readVocab } from "./readVocab.ts";
import type { TensorPlan, WrittenPlan } from "./syntheticModel.ts";
import { writeTensorPlan } from "./syntheticModel.ts";

/** The encoder architectures this writer produces (`general.architecture`). */
export type EncoderArchitecture = "bert" | "nomic-bert" | "nomic-bert-moe" | "jina-bert-v2";

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
  /** `n_ctx_train` (for `bert`, the position-embedding rows), in tokens. */
  context: number;
  /** `nomic-bert-moe`: experts of a mixture-of-experts layer (`expert_count`). Defaults to 4. */
  experts?: number;
  /** `nomic-bert-moe`: experts each token is routed to (`expert_used_count`). Defaults to 2. */
  expertsUsed?: number;
  /**
   * `nomic-bert-moe`: every this many layers one is a mixture of experts (`moe_every_n_layers`; llama.cpp
   * makes layer `i` one when `i % n == 1`). Defaults to 2, as nomic-embed-text-v2-moe.
   */
  moeEvery?: number;
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
  /** `general.architecture` (see the file's header). Defaults to `bert`. */
  architecture?: EncoderArchitecture;
  /**
   * llama.cpp's pooling type written as `<arch>.pooling_type`: 1 mean, 2 cls, 3 last, 4 rank. Defaults to
   * 4 with `rerank`, else 2 (cls, as bge) for `bert` and 1 (mean, as nomic-embed and jina-embeddings)
   * for the others.
   */
  pooling?: number;
  /**
   * Add the classification head of a cross-encoder reranker (`bert`: `cls.*`, `cls.output.*`, one
   * label; `jina-bert-v2`: `cls.*` of one row). Defaults to false.
   */
  rerank?: boolean;
  /** Standard deviation of the random weights. Defaults to 0.02. */
  std?: number;
}

/**
 * The tensors of an `architecture` GGUF of `shape` over `vocabSize` tokens and `tokenTypes` token types
 * (the rows of `token_types.weight`), F32 throughout.
 * @throws {RangeError} for `rerank` on `nomic-bert` or `nomic-bert-moe`, whose loaders have no classification head.
 */
export function planEncoderTensors(
  shape: EncoderShape,
  vocabSize: number,
  rerank: boolean,
  architecture: EncoderArchitecture = "bert",
  tokenTypes = 2,
): TensorPlan[] {
  if (rerank && architecture.startsWith("nomic-bert"))
    throw new RangeError(
      `${architecture} has no classification head in llama.cpp; rerank needs bert or jina-bert-v2`,
    );
  const f32 = GgmlType.F32;
  const { hidden: h, ffn } = shape;
  const normal = (name: string, dims: number[]): TensorPlan => ({ name, dims, type: f32, init: "normal" });
  const ones = (name: string): TensorPlan => ({ name, dims: [h], type: f32, init: "ones" });
  const zeros = (name: string, size = h): TensorPlan => ({ name, dims: [size], type: f32, init: "zeros" });
  const plan: TensorPlan[] = [
    normal("token_embd.weight", [h, vocabSize]),
    normal("token_types.weight", [h, tokenTypes]),
  ];
  if (architecture === "bert") plan.push(normal("position_embd.weight", [h, shape.context]));
  plan.push(ones("token_embd_norm.weight"), zeros("token_embd_norm.bias"));
  const nomic = architecture === "nomic-bert" || architecture === "nomic-bert-moe";
  const experts = shape.experts ?? 4;
  const moeEvery = shape.moeEvery ?? 2;
  for (let i = 0; i < shape.layers; i++) {
    const p = `blk.${i}`;
    if (nomic) {
      plan.push(normal(`${p}.attn_qkv.weight`, [h, 3 * h]), normal(`${p}.attn_output.weight`, [h, h]));
    } else {
      for (const part of ["attn_q", "attn_k", "attn_v", "attn_output"]) {
        plan.push(normal(`${p}.${part}.weight`, [h, h]), normal(`${p}.${part}.bias`, [h]));
      }
    }
    plan.push(ones(`${p}.attn_output_norm.weight`), zeros(`${p}.attn_output_norm.bias`));
    if (architecture === "nomic-bert-moe" && i % moeEvery === 1) {
      plan.push(normal(`${p}.ffn_gate_inp.weight`, [h, experts]));
      plan.push(normal(`${p}.ffn_up_exps.weight`, [h, ffn, experts]));
      plan.push(normal(`${p}.ffn_down_exps.weight`, [ffn, h, experts]));
    } else if (architecture === "bert" || architecture === "nomic-bert-moe") {
      plan.push(normal(`${p}.ffn_up.weight`, [h, ffn]), normal(`${p}.ffn_up.bias`, [ffn]));
      plan.push(normal(`${p}.ffn_down.weight`, [ffn, h]), normal(`${p}.ffn_down.bias`, [h]));
    } else {
      plan.push(normal(`${p}.ffn_up.weight`, [h, ffn]), normal(`${p}.ffn_gate.weight`, [h, ffn]));
      plan.push(normal(`${p}.ffn_down.weight`, [ffn, h]));
      if (architecture === "jina-bert-v2") plan.push(normal(`${p}.ffn_down.bias`, [h]));
    }
    plan.push(ones(`${p}.layer_output_norm.weight`), zeros(`${p}.layer_output_norm.bias`));
  }
  if (rerank && architecture === "bert") {
    plan.push(normal("cls.weight", [h, h]), normal("cls.bias", [h]));
    plan.push(normal("cls.output.weight", [h, 1]), normal("cls.output.bias", [1]));
  }
  if (rerank && architecture === "jina-bert-v2")
    plan.push(normal("cls.weight", [h, 1]), normal("cls.bias", [1]));
  return plan;
}

/**
 * Writes a random-weight encoder GGUF (see the file's header).
 * @throws {RangeError} when `hidden` is not divisible by `heads`, or for `rerank` on `nomic-bert` / `nomic-bert-moe`;
 *   readVocab's errors; I/O errors.
 */
export async function writeSyntheticEncoder(options: SyntheticEncoderOptions): Promise<WrittenPlan> {
  const { shape } = options;
  if (shape.hidden % shape.heads !== 0)
    throw new RangeError(`hidden ${shape.hidden} not divisible by heads ${shape.heads}`);
  const architecture = options.architecture ?? "bert";
  const rerank = options.rerank ?? false;
  if (rerank && architecture.startsWith("nomic-bert"))
    throw new RangeError(
      `${architecture} has no classification head in llama.cpp; rerank needs bert or jina-bert-v2`,
    );
  const vocab = readVocab(options.vocabPath);
  const u32 = GgufValueType.UINT32;
  const a = architecture;
  const writer = new GgufWriter();
  writer
    .addScalar("general.architecture", GgufValueType.STRING, a)
    .addScalar("general.type", GgufValueType.STRING, "model")
    .addScalar(
      "general.name",
      GgufValueType.STRING,
      `synthetic ${a} h${shape.hidden} l${shape.layers}${rerank ? " reranker" : ""}`,
    )
    .addScalar("general.file_type", u32, 0)
    .addScalar("general.alignment", u32, writer.alignment)
    .addScalar(`${a}.context_length`, u32, shape.context)
    .addScalar(`${a}.embedding_length`, u32, shape.hidden)
    .addScalar(`${a}.block_count`, u32, shape.layers)
    .addScalar(`${a}.feed_forward_length`, u32, shape.ffn)
    .addScalar(`${a}.attention.head_count`, u32, shape.heads)
    .addScalar(`${a}.attention.layer_norm_epsilon`, GgufValueType.FLOAT32, 1e-12)
    .addScalar(`${a}.attention.causal`, GgufValueType.BOOL, false)
    .addScalar(`${a}.pooling_type`, u32, options.pooling ?? (rerank ? 4 : a === "bert" ? 2 : 1));
  if (a === "nomic-bert" || a === "nomic-bert-moe")
    writer.addScalar(`${a}.rope.freq_base`, GgufValueType.FLOAT32, 1000);
  if (a === "nomic-bert-moe") {
    writer
      .addScalar(`${a}.expert_count`, u32, shape.experts ?? 4)
      .addScalar(`${a}.expert_used_count`, u32, shape.expertsUsed ?? 2)
      .addScalar(`${a}.moe_every_n_layers`, u32, shape.moeEvery ?? 2);
  }
  const typeCount = vocab.tokenizerKvs.find((kv) => kv.key === "tokenizer.ggml.token_type_count");
  for (const kv of vocab.tokenizerKvs) writer.addKv(kv.key, { kind: "raw", bytes: kv.raw });
  if (!typeCount) writer.addScalar("tokenizer.ggml.token_type_count", u32, 2);
  const tokenTypes = typeCount ? Number(typeCount.value) : 2;
  const plan = planEncoderTensors(shape, vocab.tokenCount, rerank, a, tokenTypes);
  return writeTensorPlan(writer, plan, {
    outPath: options.outPath,
    seed: options.seed,
    ...(options.std !== undefined ? { std: options.std } : {}),
  });
}

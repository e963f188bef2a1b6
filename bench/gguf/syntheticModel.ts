/**
 * Builds a random-weight model GGUF of a given transformer shape that llama.cpp loads as a real
 * `qwen2` (or `llama`) model: the tokenizer and chat template are copied verbatim from a vocabulary
 * GGUF, the weights are seeded noise (std 0.02), norms are ones. Meant for throughput benchmarks,
 * where only the shape and the tokenizer matter, never the output quality.
 *
 * Tensor names and shapes follow llama.cpp's loaders (`src/models/qwen2.cpp`, `src/models/llama.cpp`,
 * `llama_model_base::create_tensor_qkv`); metadata keys follow `src/llama-arch.cpp` (`LLM_KV_*`).
 */
import { endianness } from "node:os";
import { GgmlType, type GgufScalarType, GgufValueType, LlamaFileType } from "./format.ts";
import { GgufWriter, type TensorDataSource, type WriteProgress } from "./GgufWriter.ts";
import { floatToHalf, Q8_0_BLOCK_BYTES, QK8_0, quantizeQ8_0, WeightRng } from "./numeric.ts";
import { type GgufKv, type GgufScalar, readVocab, type VocabInfo } from "./readVocab.ts";

/** Architectures this tool can emit (`general.architecture`). */
export type ModelArch = "qwen2" | "qwen3" | "llama";

/** Storage type of the 2-D weight matrices (norms and biases are always F32, as in llama.cpp's quantizer). */
export type WeightType = "q8_0" | "f16" | "f32";

/** Transformer shape; all sizes are element counts. */
export interface ModelShape {
  /** Architecture whose loader the file targets. */
  arch: ModelArch;
  /** `n_embd`: hidden size. */
  hidden: number;
  /** `n_layer`: number of transformer blocks. */
  layers: number;
  /** `n_head`: attention (query) heads; `hidden / heads` is the head size. */
  heads: number;
  /** `n_head_kv`: key/value heads (grouped-query attention); divides `heads`. */
  kvHeads: number;
  /** `n_ff`: feed-forward (SwiGLU) inner size. */
  ffn: number;
  /** `n_ctx_train`: the trained context length advertised in metadata, in tokens. */
  context: number;
}

/** Qwen2.5-0.5B's shape (its `config.json`): about 494M parameters, about 530 MB as Q8_0 with tied embeddings. */
export const QWEN25_05B_SHAPE: Readonly<ModelShape> = {
  arch: "qwen2",
  hidden: 896,
  layers: 24,
  heads: 14,
  kvHeads: 2,
  ffn: 4864,
  context: 32768,
};

/**
 * Per-architecture constants: Qwen2.5 (`rope_theta` 1e6, `rms_norm_eps` 1e-6, q/k/v biases), Qwen3 (1e6,
 * 1e-6, no biases, per-head q/k RMS norms) and Llama 3 (5e5, 1e-5, none).
 */
export const ARCH_DEFAULTS: Readonly<
  Record<ModelArch, { ropeFreqBase: number; rmsEps: number; qkvBias: boolean; vocab: string }>
> = {
  qwen2: { ropeFreqBase: 1_000_000, rmsEps: 1e-6, qkvBias: true, vocab: "ggml-vocab-qwen2.gguf" },
  qwen3: { ropeFreqBase: 1_000_000, rmsEps: 1e-6, qkvBias: false, vocab: "ggml-vocab-qwen2.gguf" },
  llama: { ropeFreqBase: 500_000, rmsEps: 1e-5, qkvBias: false, vocab: "ggml-vocab-llama-bpe.gguf" },
};

/** One tensor of the plan: ggml `ne` dims (innermost first), storage type and initial values. */
export interface TensorPlan {
  /** GGUF tensor name, e.g. `blk.3.ffn_down.weight`. */
  name: string;
  /** Dimensions in ggml order, e.g. `[n_embd, n_vocab]` for `token_embd.weight`. */
  dims: number[];
  /** Storage type. */
  type: GgmlType;
  /** `ones` for norm weights, `zeros` for norm biases, `normal` for seeded noise. */
  init: "ones" | "zeros" | "normal";
}

/** Options of {@link writeSyntheticModel}. */
export interface SyntheticModelOptions {
  /** Model shape. */
  shape: ModelShape;
  /** GGUF whose `tokenizer.*` keys are copied (e.g. `../shared/models/ggml-vocab-qwen2.gguf`). */
  vocabPath: string;
  /** Output file (written via `<out>.partial` and renamed). */
  outPath: string;
  /** Storage type of the weight matrices. */
  weightType: WeightType;
  /** PRNG seed (32-bit integer); same seed and shape give a byte-identical file. */
  seed: number;
  /** Reuse `token_embd.weight` as the output head (no `output.weight`), like Qwen2.5-0.5B. Default true. */
  tiedEmbeddings?: boolean;
  /** Standard deviation of the random weights and biases. Default 0.02. */
  std?: number;
  /** `general.name`; defaults to a description of the shape. */
  name?: string;
  /**
   * Qwen3 only: a Qwen3-Reranker as llama.cpp's `convert_hf_to_gguf.py` writes one (`conversion/qwen.py`):
   * `pooling_type` rank, `classifier.output_labels` ["yes", "no"], a `cls.output.weight` of two rows and
   * the `tokenizer.chat_template.rerank` prompt with `{query}` and `{document}`. Defaults to false.
   */
  rerank?: boolean;
  /**
   * Vocabulary entries to rename, by token id: each must be a padding token (`[PAD<id>]`, a user-defined
   * token of Qwen2's vocabulary) and becomes the given text, as Qwen2.5's tokenizer adds `<tool_call>`
   * (151657) and `</tool_call>` (151658) over Qwen2's padding. Defaults to none.
   */
  addedTokens?: Readonly<Record<number, string>>;
  /** Called after each tensor is written. */
  onProgress?: WriteProgress;
}

/** What {@link writeSyntheticModel} produced. */
export interface SyntheticModelResult extends WrittenPlan {
  /** `n_vocab`: tokens in the copied vocabulary. */
  vocabSize: number;
}

const GGML_OF: Readonly<Record<WeightType, GgmlType>> = {
  q8_0: GgmlType.Q8_0,
  f16: GgmlType.F16,
  f32: GgmlType.F32,
};
const FILE_TYPE_OF: Readonly<Record<WeightType, number>> = {
  q8_0: LlamaFileType.MOSTLY_Q8_0,
  f16: LlamaFileType.MOSTLY_F16,
  f32: LlamaFileType.ALL_F32,
};

/**
 * Checks that a shape is loadable by llama.cpp and storable in `weightType`.
 *
 * @throws {RangeError} for non-positive sizes, `hidden` not divisible by `heads`, an odd head size
 *   (RoPE rotates pairs), `heads` not divisible by `kvHeads`, or (Q8_0) `hidden`/`ffn` not multiples of 32.
 */
export function validateShape(shape: ModelShape, weightType: WeightType): void {
  for (const key of ["hidden", "layers", "heads", "kvHeads", "ffn", "context"] as const) {
    const v = shape[key];
    if (!Number.isSafeInteger(v) || v <= 0)
      throw new RangeError(`${key} must be a positive integer, got ${v}`);
  }
  if (shape.hidden % shape.heads !== 0)
    throw new RangeError(`hidden ${shape.hidden} not divisible by heads ${shape.heads}`);
  if ((shape.hidden / shape.heads) % 2 !== 0)
    throw new RangeError("head size (hidden / heads) must be even for RoPE");
  if (shape.heads % shape.kvHeads !== 0)
    throw new RangeError(`heads ${shape.heads} not divisible by kv-heads ${shape.kvHeads}`);
  if (weightType === "q8_0" && (shape.hidden % QK8_0 !== 0 || shape.ffn % QK8_0 !== 0)) {
    throw new RangeError(`q8_0 needs hidden and ffn to be multiples of ${QK8_0}`);
  }
}

/**
 * Lists the tensors llama.cpp's loader for `shape.arch` requires, in the usual file order
 * (`token_embd`, blocks, `output_norm`, optional `output`).
 *
 * @param vocabSize - `n_vocab`, the number of tokens (rows of the embedding matrix).
 * @param tied - When false, a separate `output.weight` `[hidden, vocabSize]` is added.
 */
export function planTensors(
  shape: ModelShape,
  vocabSize: number,
  weightType: WeightType,
  tied = true,
  rerank = false,
): TensorPlan[] {
  const w = GGML_OF[weightType];
  const f32 = GgmlType.F32;
  const kvDim = (shape.hidden / shape.heads) * shape.kvHeads;
  const { hidden: h, ffn } = shape;
  const plan: TensorPlan[] = [{ name: "token_embd.weight", dims: [h, vocabSize], type: w, init: "normal" }];
  for (let i = 0; i < shape.layers; i++) {
    const p = `blk.${i}`;
    plan.push({ name: `${p}.attn_norm.weight`, dims: [h], type: f32, init: "ones" });
    plan.push({ name: `${p}.attn_q.weight`, dims: [h, h], type: w, init: "normal" });
    plan.push({ name: `${p}.attn_k.weight`, dims: [h, kvDim], type: w, init: "normal" });
    plan.push({ name: `${p}.attn_v.weight`, dims: [h, kvDim], type: w, init: "normal" });
    if (ARCH_DEFAULTS[shape.arch].qkvBias) {
      plan.push({ name: `${p}.attn_q.bias`, dims: [h], type: f32, init: "normal" });
      plan.push({ name: `${p}.attn_k.bias`, dims: [kvDim], type: f32, init: "normal" });
      plan.push({ name: `${p}.attn_v.bias`, dims: [kvDim], type: f32, init: "normal" });
    }
    if (shape.arch === "qwen3") {
      const headSize = h / shape.heads;
      plan.push({ name: `${p}.attn_k_norm.weight`, dims: [headSize], type: f32, init: "ones" });
      plan.push({ name: `${p}.attn_q_norm.weight`, dims: [headSize], type: f32, init: "ones" });
    }
    plan.push({ name: `${p}.attn_output.weight`, dims: [h, h], type: w, init: "normal" });
    plan.push({ name: `${p}.ffn_norm.weight`, dims: [h], type: f32, init: "ones" });
    plan.push({ name: `${p}.ffn_gate.weight`, dims: [h, ffn], type: w, init: "normal" });
    plan.push({ name: `${p}.ffn_up.weight`, dims: [h, ffn], type: w, init: "normal" });
    plan.push({ name: `${p}.ffn_down.weight`, dims: [ffn, h], type: w, init: "normal" });
  }
  plan.push({ name: "output_norm.weight", dims: [h], type: f32, init: "ones" });
  if (!tied) plan.push({ name: "output.weight", dims: [h, vocabSize], type: w, init: "normal" });
  if (rerank) plan.push({ name: "cls.output.weight", dims: [h, 2], type: f32, init: "normal" });
  return plan;
}

/** The rerank prompt llama.cpp's converter writes for Qwen3-Reranker (`conversion/qwen.py`). */
export const QWEN3_RERANK_PROMPT =
  '<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n' +
  "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n" +
  "<|im_start|>assistant\n<think>\n\n</think>\n\n";

/** Values generated per chunk: 1 Mi elements (4 MiB of f32), a multiple of the Q8_0 block. */
const CHUNK_VALUES = 1 << 20;

/**
 * Streams a tensor's encoded data in chunks, reusing the same buffers (the writer awaits each chunk).
 * Seeded per tensor name (`WeightRng(seed, name)`), so a tensor's values do not depend on the others.
 *
 * @param std - Standard deviation of `normal` values.
 */
export function tensorSource(t: TensorPlan, seed: number, std: number): TensorDataSource {
  const total = t.dims.reduce((a, b) => a * b, 1);
  return function* () {
    const values = new Float32Array(Math.min(total, CHUNK_VALUES));
    if (t.init === "ones") values.fill(1);
    const rng = new WeightRng(seed, t.name);
    const q8 =
      t.type === GgmlType.Q8_0 ? new Uint8Array((values.length / QK8_0) * Q8_0_BLOCK_BYTES) : undefined;
    const halves = t.type === GgmlType.F16 ? new Uint16Array(values.length) : undefined;
    for (let done = 0; done < total; done += values.length) {
      const chunk = values.subarray(0, Math.min(values.length, total - done));
      if (t.init === "normal") rng.fillNormal(chunk, std);
      if (q8) {
        quantizeQ8_0(chunk, q8);
        yield q8.subarray(0, (chunk.length / QK8_0) * Q8_0_BLOCK_BYTES);
      } else if (halves) {
        for (let i = 0; i < chunk.length; i++) halves[i] = floatToHalf(chunk[i]!);
        yield new Uint8Array(halves.buffer, 0, chunk.length * 2);
      } else {
        yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      }
    }
  };
}

/** What {@link writeTensorPlan} wrote. */
export interface WrittenPlan {
  /** The written file. */
  path: string;
  /** File size in bytes. */
  bytes: number;
  /** Number of tensors. */
  tensorCount: number;
  /** Number of weights (elements over all tensors). */
  parameterCount: number;
}

/**
 * Adds `plan`'s tensors with seeded data ({@link tensorSource}) to `writer`, whose metadata is already
 * added, and writes the file (shared by the synthetic model and projector writers).
 *
 * @param options - `outPath`, `seed` (32-bit integer), `std` (Defaults to 0.02), `onProgress`.
 * @throws {RangeError} for a non-integer seed; an Error on big-endian hosts; the writer's I/O errors (no
 *   partial file is left behind).
 */
export async function writeTensorPlan(
  writer: GgufWriter,
  plan: readonly TensorPlan[],
  options: { outPath: string; seed: number; std?: number; onProgress?: WriteProgress },
): Promise<WrittenPlan> {
  if (endianness() !== "LE") throw new Error("synthetic GGUF files need a little-endian host");
  if (!Number.isInteger(options.seed)) throw new RangeError(`seed must be an integer, got ${options.seed}`);
  const std = options.std ?? 0.02;
  for (const t of plan) writer.addTensor({ ...t, data: tensorSource(t, options.seed | 0, std) });
  const bytes = await writer.write(options.outPath, options.onProgress);
  return {
    path: options.outPath,
    bytes,
    tensorCount: plan.length,
    parameterCount: plan.reduce((sum, t) => sum + t.dims.reduce((a, b) => a * b, 1), 0),
  };
}

/** Adds `general.*` and `<arch>.*` hyper-parameter keys, then the vocabulary's `tokenizer.*` keys verbatim. */
function addMetadata(writer: GgufWriter, o: SyntheticModelOptions, vocab: VocabInfo): void {
  const { shape } = o;
  const arch = shape.arch;
  const u32 = GgufValueType.UINT32;
  const f32: GgufScalarType = GgufValueType.FLOAT32;
  const str = GgufValueType.STRING;
  const defaults = ARCH_DEFAULTS[arch];
  const name =
    o.name ??
    `synthetic ${arch} h${shape.hidden} l${shape.layers} a${shape.heads}/${shape.kvHeads} ff${shape.ffn} ${o.weightType}`;
  writer
    .addScalar("general.architecture", str, arch)
    .addScalar("general.type", str, "model")
    .addScalar("general.name", str, name)
    .addScalar(
      "general.description",
      str,
      `Random weights (seed ${o.seed}) for benchmarking; not a trained model.`,
    )
    .addScalar("general.file_type", u32, FILE_TYPE_OF[o.weightType])
    .addScalar("general.quantization_version", u32, 2)
    .addScalar("general.alignment", u32, writer.alignment)
    .addScalar(`${arch}.context_length`, u32, shape.context)
    .addScalar(`${arch}.embedding_length`, u32, shape.hidden)
    .addScalar(`${arch}.block_count`, u32, shape.layers)
    .addScalar(`${arch}.feed_forward_length`, u32, shape.ffn)
    .addScalar(`${arch}.attention.head_count`, u32, shape.heads)
    .addScalar(`${arch}.attention.head_count_kv`, u32, shape.kvHeads)
    .addScalar(`${arch}.rope.freq_base`, f32, defaults.ropeFreqBase)
    .addScalar(`${arch}.attention.layer_norm_rms_epsilon`, f32, defaults.rmsEps);
  if (o.rerank) {
    if (arch !== "qwen3") throw new RangeError("rerank needs arch qwen3");
    writer
      .addScalar("qwen3.pooling_type", u32, 4)
      .addKv("qwen3.classifier.output_labels", { kind: "array", elementType: str, values: ["yes", "no"] })
      .addScalar("tokenizer.chat_template.rerank", str, QWEN3_RERANK_PROMPT);
  }
  if (arch === "llama") {
    writer
      .addScalar("llama.rope.dimension_count", u32, shape.hidden / shape.heads)
      .addScalar("llama.vocab_size", u32, vocab.tokenCount);
  }
  for (const kv of vocab.tokenizerKvs) {
    if (kv.key === "tokenizer.ggml.tokens" && o.addedTokens) {
      writer.addKv(kv.key, { kind: "array", elementType: str, values: renamed(kv, o.addedTokens) });
    } else writer.addKv(kv.key, { kind: "raw", bytes: kv.raw });
  }
}

/**
 * The tokens of `kv` (`tokenizer.ggml.tokens`) with `added` renamed.
 * @throws {RangeError} for an id that is not a padding token.
 */
function renamed(kv: GgufKv, added: Readonly<Record<number, string>>): string[] {
  const tokens = (kv.value as GgufScalar[]).map(String);
  for (const [id, text] of Object.entries(added)) {
    const at = Number(id);
    if (tokens[at] !== `[PAD${at}]`) throw new RangeError(`token ${at} is not a padding token`);
    tokens[at] = text;
  }
  return tokens;
}

/**
 * Writes a random-weight GGUF for `options.shape`, streaming tensor by tensor.
 *
 * @returns Path, size in bytes, tensor and parameter counts, vocabulary size.
 * @throws {RangeError} from {@link validateShape}; {@link readVocab}'s errors for a bad vocabulary
 *   file; I/O errors (no partial file is left behind); an Error on big-endian hosts.
 */
export async function writeSyntheticModel(options: SyntheticModelOptions): Promise<SyntheticModelResult> {
  validateShape(options.shape, options.weightType);
  const vocab = readVocab(options.vocabPath);
  const plan = planTensors(
    options.shape,
    vocab.tokenCount,
    options.weightType,
    options.tiedEmbeddings ?? true,
    options.rerank ?? false,
  );
  const writer = new GgufWriter();
  addMetadata(writer, options, vocab);
  return { ...(await writeTensorPlan(writer, plan, options)), vocabSize: vocab.tokenCount };
}

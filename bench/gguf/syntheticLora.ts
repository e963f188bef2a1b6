/**
 * Writes a random-weight LoRA adapter GGUF for a base model, in the layout llama.cpp's
 * `llama_adapter_lora_init` reads (`src/llama-adapter.cpp`): `general.type` "adapter",
 * `general.architecture` equal to the base's, `adapter.type` "lora", `adapter.lora.alpha` (f32), and per
 * adapted weight `W` (ggml dims `[in, out]`) the pair `W.lora_a` with dims `[in, rank]` and `W.lora_b`
 * with dims `[rank, out]`, so that the layer computes `W x + scale * (alpha / rank) * B (A x)`. Both
 * matrices are seeded noise (a trained PEFT adapter starts with B = 0; a random B is what makes the
 * adapter change the output). Meant for tests and benchmarks, never for quality.
 */
import { endianness } from "node:os";
import { GgmlType, GgufValueType } from "./format.ts";
import { GgufWriter } from "./GgufWriter.ts";
import { WeightRng } from "./numeric.ts";
import { readGgufMetadata } from "./readVocab.ts";

/** The per-block weights an adapter may target (llama.cpp's tensor names, `blk.N.<target>.weight`). */
export type LoraTarget = "attn_q" | "attn_k" | "attn_v" | "attn_output" | "ffn_gate" | "ffn_up" | "ffn_down";

/** Options of {@link writeSyntheticLora}. */
export interface SyntheticLoraOptions {
  /** The base model GGUF whose shape (from its metadata) the adapter fits. */
  basePath: string;
  /** Output file (written via `<out>.partial` and renamed). */
  outPath: string;
  /** The adapter's rank r. Defaults to 8. */
  rank?: number;
  /** `adapter.lora.alpha`; the effective scale is alpha / rank. Defaults to the rank (scale 1). */
  alpha?: number;
  /** Weights adapted in every block. Defaults to `["attn_q", "attn_v"]` (PEFT's usual default). */
  targets?: readonly LoraTarget[];
  /** PRNG seed (32-bit integer); same seed, base and options give a byte-identical file. */
  seed: number;
  /** Standard deviation of A's and B's entries. Defaults to 0.15 (enough to change a tiny model's text). */
  std?: number;
}

/** What {@link writeSyntheticLora} wrote. */
export interface SyntheticLoraResult {
  /** Bytes of the file. */
  bytes: number;
  /** Tensor names in file order. */
  tensors: string[];
}

/** The ggml dims `[in, out]` of each target weight of one block, from the base's metadata. */
function targetDims(basePath: string): {
  arch: string;
  layers: number;
  dims: Record<LoraTarget, [number, number]>;
} {
  const { kvs } = readGgufMetadata(basePath);
  const value = (key: string): unknown => kvs.find((kv) => kv.key === key)?.value;
  const arch = value("general.architecture");
  if (typeof arch !== "string") throw new Error(`${basePath}: no general.architecture`);
  const num = (key: string, fallback?: number): number => {
    const v = value(`${arch}.${key}`);
    if (typeof v === "number" || typeof v === "bigint") return Number(v);
    if (fallback !== undefined) return fallback;
    throw new Error(`${basePath}: no ${arch}.${key}`);
  };
  const embd = num("embedding_length");
  const heads = num("attention.head_count");
  const kvHeads = num("attention.head_count_kv", heads);
  const headK = num("attention.key_length", embd / heads);
  const headV = num("attention.value_length", embd / heads);
  const ffn = num("feed_forward_length");
  return {
    arch,
    layers: num("block_count"),
    dims: {
      attn_q: [embd, heads * headK],
      attn_k: [embd, kvHeads * headK],
      attn_v: [embd, kvHeads * headV],
      attn_output: [heads * headV, embd],
      ffn_gate: [embd, ffn],
      ffn_up: [embd, ffn],
      ffn_down: [ffn, embd],
    },
  };
}

/** A tensor source of `count` seeded F32 values. */
function noise(seed: number, name: string, count: number, std: number): () => Iterable<Uint8Array> {
  return function* () {
    const values = new Float32Array(count);
    new WeightRng(seed, name).fillNormal(values, std);
    yield new Uint8Array(values.buffer);
  };
}

/**
 * Writes a LoRA adapter for the model at `basePath` (F32 tensors).
 *
 * @returns The file's size and tensor names.
 * @throws {Error} when the base's metadata lacks its shape, or on I/O errors; {@link RangeError} for a
 *   rank that is not a positive integer.
 */
export async function writeSyntheticLora(options: SyntheticLoraOptions): Promise<SyntheticLoraResult> {
  if (endianness() !== "LE") throw new Error("synthetic GGUF files need a little-endian host");
  const rank = options.rank ?? 8;
  if (!Number.isInteger(rank) || rank <= 0)
    throw new RangeError(`rank must be a positive integer, got ${rank}`);
  const std = options.std ?? 0.15;
  const { arch, layers, dims } = targetDims(options.basePath);
  const writer = new GgufWriter()
    .addScalar("general.architecture", GgufValueType.STRING, arch)
    .addScalar("general.type", GgufValueType.STRING, "adapter")
    .addScalar("general.name", GgufValueType.STRING, `random LoRA r${rank} seed ${options.seed}`)
    .addScalar("adapter.type", GgufValueType.STRING, "lora")
    .addScalar("adapter.lora.alpha", GgufValueType.FLOAT32, options.alpha ?? rank);
  const tensors: string[] = [];
  for (let layer = 0; layer < layers; layer++) {
    for (const target of options.targets ?? ["attn_q", "attn_v"]) {
      const [input, output] = dims[target];
      const base = `blk.${layer}.${target}.weight`;
      for (const [suffix, shape] of [
        ["lora_a", [input, rank]],
        ["lora_b", [rank, output]],
      ] as const) {
        const name = `${base}.${suffix}`;
        writer.addTensor({
          name,
          dims: shape,
          type: GgmlType.F32,
          data: noise(options.seed | 0, name, shape[0] * shape[1], std),
        });
        tensors.push(name);
      }
    }
  }
  const bytes = await writer.write(options.outPath);
  return { bytes, tensors };
}

/**
 * Builds a tiny random-weight multimodal projector GGUF (an "mmproj", as llama.cpp's `--mmproj` loads)
 * for a given text model: a LLaVA-1.5-style CLIP vision tower (`clip.projector_type` "mlp") whose
 * two-layer MLP projector outputs the text model's embedding width, so llama.cpp's `mtmd` accepts it
 * next to that model. For tests of the image path (`image_url` content parts): the images' tokens are
 * noise, the shapes and the plumbing are real.
 *
 * Metadata keys and tensor names follow llama.cpp's `tools/mtmd/clip-impl.h` (`KEY_*`, `TN_*`) and
 * what `clip_model_loader::load_hparams` / `load_tensors` in `tools/mtmd/clip.cpp` require; the graph
 * that runs it is `tools/mtmd/models/llava.cpp`. Integers are written as UINT32 (`get_u32` asserts the
 * type), every tensor as F32.
 */
import { GgmlType, GgufValueType } from "./format.ts";
import { GgufWriter, type WriteProgress } from "./GgufWriter.ts";
import { readGgufMetadata } from "./readVocab.ts";
import { type TensorPlan, type WrittenPlan, writeTensorPlan } from "./syntheticModel.ts";

/** The vision tower's shape; all sizes are element counts unless stated. */
export interface ProjectorShape {
  /** `clip.vision.image_size`: side of the square image the encoder sees, in pixels. */
  imageSize: number;
  /** `clip.vision.patch_size`: side of a patch in pixels; divides `imageSize`. */
  patchSize: number;
  /** `clip.vision.embedding_length`: the vision width. */
  hidden: number;
  /** `clip.vision.feed_forward_length`: must differ from `hidden` (see {@link validateProjectorShape}). */
  ffn: number;
  /** `clip.vision.block_count`: encoder blocks; llava runs all but the last one. */
  layers: number;
  /** `clip.vision.attention.head_count`; divides `hidden`. */
  heads: number;
  /** `clip.vision.projection_dim`, the output width: the text model's `n_embd`. */
  projectionDim: number;
}

/**
 * The default vision tower: 32-pixel images in 8-pixel patches (16 image tokens), width 32, 3 blocks of
 * 4 heads, feed-forward 64; `projectionDim` 64 is stories260K's `n_embd` (pass the text model's own).
 */
export const TINY_PROJECTOR_SHAPE: Readonly<ProjectorShape> = {
  imageSize: 32,
  patchSize: 8,
  hidden: 32,
  ffn: 64,
  layers: 3,
  heads: 4,
  projectionDim: 64,
};

/** CLIP's (and LLaVA-1.5's) per-channel normalisation, RGB: `(pixel / 255 - mean) / std`. */
const CLIP_IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073];
const CLIP_IMAGE_STD = [0.26862954, 0.26130258, 0.27577711];

/** Options of {@link writeSyntheticProjector}. */
export interface SyntheticProjectorOptions {
  /** Vision tower shape; `projectionDim` must equal the text model's embedding width. */
  shape: ProjectorShape;
  /** Output file (written via `<out>.partial` and renamed). */
  outPath: string;
  /** PRNG seed (32-bit integer); same seed and shape give a byte-identical file. */
  seed: number;
  /** Standard deviation of the random weights and biases. Defaults to 0.02. */
  std?: number;
  /** Called after each tensor is written. */
  onProgress?: WriteProgress;
}

/** What {@link writeSyntheticProjector} produced. */
export interface SyntheticProjectorResult extends WrittenPlan {
  /** Embeddings (text-model positions) one image becomes: `(imageSize / patchSize)²`. */
  imageTokens: number;
}

/**
 * Checks that `shape` builds a graph llama.cpp runs.
 *
 * @throws {RangeError} for non-positive sizes, `patchSize` not dividing `imageSize`, `heads` not
 *   dividing `hidden`, fewer than 2 layers (llava skips the last one), or `ffn` equal to `hidden` (clip.cpp
 *   then takes `ffn_down` for an old file's swapped `ffn_up` and swaps them back).
 */
export function validateProjectorShape(shape: ProjectorShape): void {
  for (const key of Object.keys(TINY_PROJECTOR_SHAPE) as (keyof ProjectorShape)[]) {
    const v = shape[key];
    if (!Number.isSafeInteger(v) || v <= 0)
      throw new RangeError(`${key} must be a positive integer, got ${v}`);
  }
  if (shape.imageSize % shape.patchSize !== 0)
    throw new RangeError(`patch size ${shape.patchSize} does not divide image size ${shape.imageSize}`);
  if (shape.hidden % shape.heads !== 0)
    throw new RangeError(`hidden ${shape.hidden} not divisible by heads ${shape.heads}`);
  if (shape.layers < 2) throw new RangeError("layers must be at least 2 (llava runs all but the last)");
  if (shape.ffn === shape.hidden)
    throw new RangeError("ffn must differ from hidden (clip.cpp swaps ffn_up/down)");
}

/**
 * The tensors of a LLaVA-1.5-style projector, in file order: patch embedding (a conv kernel
 * `[patch, patch, 3, hidden]` and its bias), position embedding, pre-layernorm, the blocks (layer norms
 * `ln1`/`ln2`, attention q/k/v/out, feed-forward up/down, each with a bias), then `mm.0` (hidden to
 * projectionDim), GELU, `mm.2` (projectionDim to projectionDim).
 */
export function planProjectorTensors(shape: ProjectorShape): TensorPlan[] {
  const f32 = GgmlType.F32;
  const { hidden: h, ffn, projectionDim: out, patchSize: p } = shape;
  const patches = (shape.imageSize / p) ** 2;
  const plan: TensorPlan[] = [];
  const add = (name: string, dims: number[], init: TensorPlan["init"] = "normal"): void => {
    plan.push({ name, dims, type: f32, init });
  };
  const linear = (name: string, input: number, output: number): void => {
    add(`${name}.weight`, [input, output]);
    add(`${name}.bias`, [output]);
  };
  const norm = (name: string): void => {
    add(`${name}.weight`, [h], "ones");
    add(`${name}.bias`, [h], "zeros");
  };
  add("v.patch_embd.weight", [p, p, 3, h]);
  add("v.patch_embd.bias", [h]);
  add("v.position_embd.weight", [h, patches]);
  norm("v.pre_ln");
  for (let i = 0; i < shape.layers; i++) {
    const b = `v.blk.${i}`;
    norm(`${b}.ln1`);
    for (const part of ["attn_q", "attn_k", "attn_v", "attn_out"]) linear(`${b}.${part}`, h, h);
    norm(`${b}.ln2`);
    linear(`${b}.ffn_up`, h, ffn);
    linear(`${b}.ffn_down`, ffn, h);
  }
  linear("mm.0", h, out);
  linear("mm.2", out, out);
  return plan;
}

/** Adds the `general.*` and `clip.*` keys clip.cpp reads for an "mlp" vision projector. */
function addProjectorMetadata(writer: GgufWriter, o: SyntheticProjectorOptions): void {
  const { shape } = o;
  const u32 = GgufValueType.UINT32;
  const f32 = GgufValueType.FLOAT32;
  const str = GgufValueType.STRING;
  const bool = GgufValueType.BOOL;
  writer
    .addScalar("general.architecture", str, "clip")
    .addScalar("general.type", str, "mmproj")
    .addScalar(
      "general.name",
      str,
      `synthetic mmproj ${shape.imageSize}px/${shape.patchSize} h${shape.hidden} l${shape.layers} -> ${shape.projectionDim}`,
    )
    .addScalar("general.description", str, `Random weights (seed ${o.seed}) for tests; not a trained model.`)
    .addScalar("general.file_type", u32, 0)
    .addScalar("general.alignment", u32, writer.alignment)
    .addScalar("clip.projector_type", str, "mlp")
    .addScalar("clip.has_vision_encoder", bool, true)
    .addScalar("clip.has_audio_encoder", bool, false)
    .addScalar("clip.use_gelu", bool, true)
    .addScalar("clip.vision.image_size", u32, shape.imageSize)
    .addScalar("clip.vision.patch_size", u32, shape.patchSize)
    .addScalar("clip.vision.embedding_length", u32, shape.hidden)
    .addScalar("clip.vision.feed_forward_length", u32, shape.ffn)
    .addScalar("clip.vision.block_count", u32, shape.layers)
    .addScalar("clip.vision.attention.head_count", u32, shape.heads)
    .addScalar("clip.vision.attention.layer_norm_epsilon", f32, 1e-5)
    .addScalar("clip.vision.projection_dim", u32, shape.projectionDim)
    .addKv("clip.vision.image_mean", { kind: "array", elementType: f32, values: CLIP_IMAGE_MEAN })
    .addKv("clip.vision.image_std", { kind: "array", elementType: f32, values: CLIP_IMAGE_STD });
}

/**
 * The embedding width (`<arch>.embedding_length`, llama.cpp's `n_embd`) of a text model GGUF: the
 * width a projector for it must output.
 *
 * @throws {Error} as `readGgufMetadata`, or when the file has no `general.architecture` or no integer
 *   `<arch>.embedding_length`.
 */
export function textEmbeddingLength(modelPath: string): number {
  const { kvs } = readGgufMetadata(modelPath);
  const value = (key: string) => kvs.find((kv) => kv.key === key)?.value;
  const arch = value("general.architecture");
  if (typeof arch !== "string") throw new Error(`${modelPath}: no general.architecture`);
  const width = value(`${arch}.embedding_length`);
  if (typeof width !== "number" && typeof width !== "bigint")
    throw new Error(`${modelPath}: no integer ${arch}.embedding_length`);
  return Number(width);
}

/**
 * Writes a random-weight projector GGUF for `options.shape` (about 0.2 MB for the tiny shape).
 *
 * @returns Path, size in bytes, tensor and parameter counts, image tokens per image.
 * @throws {RangeError} from {@link validateProjectorShape} or for a non-integer seed; I/O errors (no
 *   partial file is left behind); an Error on big-endian hosts.
 */
export async function writeSyntheticProjector(
  options: SyntheticProjectorOptions,
): Promise<SyntheticProjectorResult> {
  validateProjectorShape(options.shape);
  const writer = new GgufWriter();
  addProjectorMetadata(writer, options);
  return {
    ...(await writeTensorPlan(writer, planProjectorTensors(options.shape), options)),
    imageTokens: (options.shape.imageSize / options.shape.patchSize) ** 2,
  };
}

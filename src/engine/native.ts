/**
 * The native engine (native/, C++ over llama.cpp's C API): its typed surface, and loading it, building it
 * first when it is missing (`scripts/build-native.mjs`, also run by `npm ci`). Only `src/engine/` imports
 * this file.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { projectRoot } from "../paths.ts";
import type { FlashAttn, KvCacheType } from "./kvCacheTypes.ts";

/** A ggml device as llama.cpp sees it. */
export type NativeDevice = {
  /** ggml's device name, e.g. "CPU", "CUDA0", "Vulkan0". */
  name: string;
  description: string;
  type: "cpu" | "gpu" | "igpu" | "accel";
  /** The backend's registry name, e.g. "CPU", "CUDA", "Vulkan". */
  backend: string;
  /** Bytes. */
  memoryFree: number;
  /** Bytes. */
  memoryTotal: number;
};

/** What a loaded model tells about itself; token ids are -1 where the model has none. */
export type NativeModelInfo = {
  nVocab: number;
  nCtxTrain: number;
  nEmbd: number;
  nLayer: number;
  /** Outputs of the classification head (`cls.output`; 1 where the model has none). */
  nClsOut: number;
  /** Bytes of weights. */
  size: number;
  description: string;
  bos: number;
  eos: number;
  eot: number;
  /** Whether the tokenizer prepends BOS (`tokenizer.ggml.add_bos_token`). */
  addBos: boolean;
  /** Whether the tokenizer appends EOS, and SEP (`tokenizer.ggml.add_eos_token`, `add_sep_token`). */
  addEos?: boolean;
  addSep?: boolean;
  /** The SEP token (BERT's `[SEP]`), or -1. */
  sep?: number;
  fimPre: number;
  fimSuf: number;
  fimMid: number;
  chatTemplate: string | null;
};

/** A model loaded by llama.cpp. */
export interface NativeModel {
  info(): NativeModelInfo;
  /** Token ids of UTF-8 text; `parseSpecial` reads special-token text (`<|im_start|>`) as those tokens. */
  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): Int32Array;
  /**
   * The text `tokens` add after `lastTokens`; special tokens are rendered only with `renderSpecial`.
   * @throws RangeError for an id out of range.
   */
  detokenize(
    tokens: readonly number[] | Int32Array,
    lastTokens?: readonly number[] | Int32Array,
    renderSpecial?: boolean,
  ): string;
  isEog(token: number): boolean;
  dispose(): void;
}

/** One sequence's sampler settings (see native/src/sampler.h); every field has the neutral default. */
export type NativeSamplerConfig = {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  repetitionPenalty: number;
  frequencyPenalty: number;
  presencePenalty: number;
  /** Low 32 bits used. */
  seed: number;
  minTokens: number;
  biasIds?: Int32Array;
  biasValues?: Float32Array;
  banAlways?: Int32Array;
  banEarly?: Int32Array;
  promptTokens?: Int32Array;
  /** GBNF text, or absent. */
  grammar?: string;
  /** Defaults to "root". */
  grammarRoot?: string;
  /**
   * A lazy grammar's triggers (native `LazyStart`): the grammar starts at the first of them in the
   * output, outside the thinking block below; absent: the grammar constrains from the first token.
   */
  grammarTriggers?: string[];
  /** The thinking block the triggers are not looked for in (`grammarBlockClose` absent: none). */
  grammarBlockOpen?: string;
  grammarBlockClose?: string;
  /** True when the output starts inside that block (the prompt opened it). */
  grammarStartsInBlock?: boolean;
};

/**
 * What a step does with one output row, as the numbers of `NativeStepInput.kinds`: `Sample` draws the
 * row's sequence's next token, `PromptLogprob` scores `targets[i]` (a prompt logprob), `Embedding`
 * returns the row's final hidden state. The same numbers as native/src/step.h's `OutputKind`.
 */
export const OutputKind = { Sample: 0, PromptLogprob: 1, Embedding: 2 } as const;
/** One of OutputKind's numbers (0, 1 or 2). */
export type OutputKind = (typeof OutputKind)[keyof typeof OutputKind];

/** One step's batch: row i is `tokens[i]` at `positions[i]` of sequence `seqs[i]`. */
export type NativeStepInput = {
  tokens: Int32Array;
  positions: Int32Array;
  seqs: Int32Array;
  /** Rows whose logits are read, in order; each has one output below. */
  outputRows: Int32Array;
  /** Per output: what to do with its row, an OutputKind number. */
  kinds: Int32Array;
  /** Per output: the token an OutputKind.PromptLogprob output scores (ignored by the others). */
  targets: Int32Array;
  /** Per output: top logprobs to report; -1 = no logprobs. */
  topN: Int32Array;
};

/** One step's results, per output of the input (top entries: `topStride` per output, -1 padded). */
export type NativeStepOutput = {
  tokens: Int32Array;
  /** Raw log-softmax of each output's token (temperature 1, nothing truncated). */
  logprobs: Float32Array;
  /** 1-based rank of each output's token under the raw distribution. */
  ranks: Int32Array;
  topStride: number;
  topIds: Int32Array;
  topLogprobs: Float32Array;
  /** The final hidden state of each OutputKind.Embedding output (`embdStride` floats per output; empty without any). */
  embeddings: Float32Array;
  embdStride: number;
  /** Milliseconds the step spent in `llama_decode`. */
  decodeMs: number;
  /** Milliseconds the step spent sampling and scoring its outputs after the decode. */
  sampleMs: number;
};

/** A llama.cpp context: the KV cache of `nSeqMax` sequences, their samplers, and the step. */
export interface NativeContext {
  info(): {
    nCtx: number;
    nCtxSeq: number;
    nBatch: number;
    nUbatch: number;
    nSeqMax: number;
    /** The K and V caches' ggml types. */
    cacheTypeK: KvCacheType;
    cacheTypeV: KvCacheType;
    /** Whether attention runs as flash attention (llama.cpp resolved `auto`). */
    flashAttn: boolean;
    /** Bytes of the K and of the V cache (every layer, every cell). */
    kBytes: number;
    vBytes: number;
  };
  /** A fresh sampler for sequence `seq`. @throws Error when the grammar does not parse. */
  configure(seq: number, config: NativeSamplerConfig): void;
  release(seq: number): void;
  /** Feeds tokens that were not sampled (injected) to the sequence's sampler; false when its grammar refuses one. */
  accept(seq: number, tokens: Int32Array): boolean;
  /**
   * Jump-forward: the tokens the sequence's grammar forces next (the canonical tokenization of the only
   * text it allows, at most `maxTokens`), already accepted by its sampler. Empty without a grammar or
   * where more than one continuation is possible.
   */
  forced(seq: number, maxTokens: number): Int32Array;
  /** The grammar mask cache's counters (see `MaskCacheStats` in types.ts, which mirrors this shape). */
  maskStats(): { hits: number; misses: number; bytes: number; computed: number; computeMs: number };
  /**
   * Test entry point: 1 per token id the grammar allows after accepting `tokens` (null when it refuses
   * them), from the mask engine, or with `reference` by llama.cpp's grammar check of every token on its own.
   */
  grammarMask(gbnf: string, root: string, tokens: Int32Array, reference: boolean): Uint8Array | null;
  /**
   * Test entry point: one sampler from `config` (grammar and lazy start included) drawing once per row of
   * `rows` (n_vocab logits each); stops after the first -1 (no allowed token), which it returns last.
   */
  sampleRows(config: NativeSamplerConfig, rows: Float32Array): Int32Array;
  /** Drops the KV cells of positions [from, to) of `seq`; `to` < 0 means to the end. */
  removeTokens(seq: number, from: number, to: number): boolean;
  /** One llama_decode of the batch off the JS thread, then every output sampled or scored. */
  step(input: NativeStepInput): Promise<NativeStepOutput>;
  /**
   * Evaluates image chunk `chunk` of `prompt` into sequence `seq` from position `nPast` (the vision
   * encoder, then its embeddings' decode), off the JS thread. Resolves with the next position.
   */
  evalImage(
    seq: number,
    projector: NativeProjector,
    prompt: NativeMediaPrompt,
    chunk: number,
    nPast: number,
  ): Promise<{ nPast: number }>;
  /**
   * Pooled-embedding contexts only (created with `pooling`): the pooled vector of each of
   * `lengths.length` whole sequences laid end to end in `tokens`, in one batch (`stride` floats each: the
   * width, or the classifier's outputs for rank pooling). @throws RangeError for an empty or too big batch.
   */
  encode(
    tokens: Int32Array,
    lengths: Int32Array,
  ): Promise<{ embeddings: Float32Array; stride: number; encodeMs: number }>;
  /**
   * The LoRA adapters (of this context's model) the following steps run under, each at its scale; [] for
   * the base alone. True when the set changed (llama.cpp then reserves its compute graph again on the next
   * decode: about 0.4 ms on stories260K). @throws Error while a step runs, for a disposed adapter or one of
   * another model.
   */
  setAdapters(adapters: NativeLora[], scales: Float32Array): boolean;
  dispose(): void;
}

/** A LoRA adapter loaded for one model (llama.cpp's `llama_adapter_lora`). */
export interface NativeLora {
  /** The adapter's GGUF scalar metadata as text (e.g. `adapter.lora.alpha`). */
  info(): { meta: Record<string, string> };
  /** Frees the adapter. @throws Error while a context has it set. */
  dispose(): void;
}

/** One chunk of a prompt tokenized with its images: text tokens, or an image's embedding positions. */
export type NativeMediaChunk =
  | { type: "text"; tokens: Int32Array }
  | {
      type: "image" | "audio";
      /** KV cells the image takes. */
      nTokens: number;
      /** Positions it advances (differs from nTokens under M-RoPE). */
      nPos: number;
      /** The image's id: the SHA-256 of its bytes (hex). */
      id: string;
    };

/** A prompt's mtmd chunks, held natively for the evaluation of its image chunks. */
export interface NativeMediaPrompt {
  dispose(): void;
}

/** A multimodal projector (`--mmproj`) bound to its text model. */
export interface NativeProjector {
  info(): { vision: boolean; audio: boolean; marker: string; mrope: boolean };
  /**
   * The text (one `marker` per image, in order) and the images' encoded bytes as chunks.
   * @throws Error with `imageIndex` for an image that does not decode; Error when markers and images differ in number.
   */
  tokenize(text: string, images: Uint8Array[]): { chunks: NativeMediaChunk[]; prompt: NativeMediaPrompt };
  dispose(): void;
}

/** Options of a native context. */
export type NativeContextOptions = {
  /** KV cells in all: sequences x context per sequence. */
  nCtx: number;
  nSeqMax: number;
  /** Most tokens in one step. */
  nBatch: number;
  nUbatch: number;
  threads: number;
  /** One KV buffer for every sequence (llama.cpp's `kv_unified`). */
  kvUnified: boolean;
  /** llama.cpp's pooling type (1 mean, 2 cls, 3 last, 4 rank) for a pooled-embeddings context; absent: none. */
  pooling?: number;
  /** Memory bound of the guided-decoding mask cache, in bytes. Defaults to 64 MiB. */
  maskCacheBytes?: number;
  /** The K cache's type (llama.cpp's `type_k`). Defaults to f16. */
  cacheTypeK?: KvCacheType;
  /** The V cache's type (llama.cpp's `type_v`); a quantized one needs flash attention. Defaults to f16. */
  cacheTypeV?: KvCacheType;
  /** Flash attention (llama.cpp's `flash_attn_type`). Defaults to auto. */
  flashAttn?: FlashAttn;
};

/** The addon's exports. */
export interface NativeAddon {
  /**
   * Loads ggml's CPU backend (`cpuBackend`, the library scripts/build-native.mjs compiled for this
   * processor, when given and runnable here; else the prebuilt variants of `cpuBinsDir`) and initialises
   * llama.cpp; later calls only set the log level.
   */
  init(options: { cpuBinsDir: string; cpuBackend?: string; logLevel?: number }): NativeDevice[];
  /** The CPU backend library `init` loaded instead of the prebuilt variants, or "" for those. */
  cpuBackend(): string;
  /** Loads a GPU backend module; null when it loaded, else ggml's reason. */
  loadBackend(path: string): string | null;
  devices(): NativeDevice[];
  validateGrammar(text: string, root: string): string | null;
  loadModel(
    path: string,
    options: { nGpuLayers: number; devices?: string[]; cpuOnly?: boolean },
  ): Promise<NativeModel>;
  Context: new (model: NativeModel, options: NativeContextOptions) => NativeContext;
  /** Loads a multimodal projector for `model`. */
  loadProjector(
    path: string,
    model: NativeModel,
    options: { threads: number; useGpu: boolean },
  ): Promise<NativeProjector>;
  /** Loads a LoRA adapter GGUF for `model`; rejects with llama.cpp's reason (wrong base model, bad file). */
  loadLora(path: string, model: NativeModel): Promise<NativeLora>;
  /** Test entry point: `steps` draws of one sampler on the same logits row. */
  sampleLogits(logits: Float32Array, config: NativeSamplerConfig, steps: number): Int32Array;
  /** Test entry point: whether GBNF `gbnf` (from `root`) matches all of `text`, by llama.cpp's grammar engine. */
  grammarMatches(gbnf: string, root: string, text: string): boolean;
  /** Test entry point: the raw logprob, rank and top-N of `token` in a logits row. */
  rowLogprobs(
    logits: Float32Array,
    token: number,
    topN: number,
  ): { logprob: number; rank: number; topIds: Int32Array; topLogprobs: Float32Array };
}

/** Raised when the native engine cannot be built (e.g. no C++ compiler); its message is one line. */
export class NativeBuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NativeBuildError";
  }
}

/** Where `scripts/build-native.mjs` found node-llama-cpp's prebuilt libraries, relative to the project. */
type NativePaths = {
  cpuBinsDir: string;
  /** ggml's CPU backend compiled here for this processor, when the build made one. */
  cpuBackend?: string;
  gpuBackends: Partial<Record<"cuda" | "vulkan", string>>;
};

const buildDir = join(projectRoot, "native", "build");
const addonPath = join(buildDir, "lmserve_engine.node");

let addon: NativeAddon | undefined;
let paths: NativePaths | undefined;

/**
 * The native addon, built first when missing or out of date (a visible step on stderr, seconds).
 * @throws NativeBuildError with the build's one-line message when it cannot be built (e.g. no C++ compiler).
 */
export function nativeAddon(): NativeAddon {
  if (addon) return addon;
  // A runtime image ships the compiled addon without its sources: nothing to build there.
  if (existsSync(join(projectRoot, "native", "src"))) buildAddon();
  paths = JSON.parse(readFileSync(join(buildDir, "paths.json"), "utf8")) as NativePaths;
  const loaded = createRequire(import.meta.url)(addonPath) as NativeAddon;
  // ggml log levels: 2 info, 3 warn, 4 error. llama.cpp's own chatter stays off unless it is an error.
  // LMSERVE_CPU_BACKEND=prebuilt keeps node-llama-cpp's prebuilt CPU variants (for comparisons).
  const own =
    paths.cpuBackend && process.env.LMSERVE_CPU_BACKEND !== "prebuilt"
      ? { cpuBackend: join(projectRoot, paths.cpuBackend) }
      : {};
  loaded.init({ cpuBinsDir: join(projectRoot, paths.cpuBinsDir), ...own, logLevel: 4 });
  addon = loaded;
  return loaded;
}

/**
 * Which ggml CPU backend serves: `built here` (native/build/ggml-cpu, compiled for this processor by
 * scripts/build-native.mjs) or `prebuilt` (node-llama-cpp's variants: no cmake, a processor the
 * library does not run on, or `LMSERVE_CPU_BACKEND=prebuilt`).
 */
export function cpuBackendKind(): "built here" | "prebuilt" {
  return nativeAddon().cpuBackend() === "" ? "prebuilt" : "built here";
}

/** Runs the build script (a no-op when the addon is up to date). @throws NativeBuildError with its one-line message. */
function buildAddon(): void {
  const build = spawnSync(process.execPath, [join(projectRoot, "scripts", "build-native.mjs")], {
    stdio: ["ignore", "inherit", "pipe"],
    encoding: "utf8",
  });
  if (build.status !== 0 || !existsSync(addonPath)) {
    const message = (build.stderr || String(build.error ?? "")).trim().split("\n")[0];
    throw new NativeBuildError((message || "the native engine could not be built").replace(/^lmserve: /, ""));
  }
}

/** The GPU backend module of node-llama-cpp's `-cuda` / `-vulkan` package, when installed. */
export function gpuBackendPath(kind: "cuda" | "vulkan"): string | undefined {
  nativeAddon();
  const relativePath = paths?.gpuBackends[kind];
  return relativePath === undefined ? undefined : join(projectRoot, relativePath);
}

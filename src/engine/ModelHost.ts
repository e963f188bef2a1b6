import { stat } from "node:fs/promises";
import { basename } from "node:path";
import { type DeviceKind, type DevicePlan, planDevices } from "./devices.ts";
import { readGgufFileInfo } from "./ggufFiles.ts";
import type { FlashAttn, KvCacheType } from "./kvCacheTypes.ts";
import {
  type NativeContext,
  type NativeLora,
  type NativeModel,
  type NativeModelInfo,
  type NativeProjector,
  nativeAddon,
} from "./native.ts";
import { DEFAULT_MAX_NUM_BATCHED_TOKENS } from "./stepPlan.ts";
import { TokenVocabulary } from "./TokenVocabulary.ts";
import type { ModelTask, Pooling } from "./types.ts";

/** Options of {@link ModelHost.load}. */
export type ModelHostOptions = {
  /** Path of the GGUF file. */
  modelPath: string;
  /** Names the model is served under; the first is its id. Defaults to the file's base name without `.gguf`. */
  servedModelNames?: readonly string[];
  /** Tokens of context per sequence (vLLM's `--max-model-len`). Defaults to min(model's training context, 8192). */
  maxModelLen?: number;
  /** Number of sequences (slots) of the one context (vLLM's `--max-num-seqs`). */
  sequences: number;
  /** CPU threads of the context; set it, the library default oversubscribes small machines. */
  threads: number;
  /** `--device`. Defaults to `auto` (the first GPU backend with a device, else the CPU). */
  device?: DeviceKind;
  /**
   * Layers stored and run on the GPU (`--n-gpu-layers`, llama-server's `-ngl`); negative = all. Defaults
   * to all when a GPU is used; ignored on the CPU.
   */
  nGpuLayers?: number;
  /**
   * One KV buffer shared by every sequence (llama.cpp's `kv_unified`) instead of one per sequence.
   * Defaults to false, as llama-server with an explicit `-np`: in a shared buffer every token's attention
   * spans the other sequences' cells too (masked), which long prompts on several slots pay for; with one
   * buffer per sequence a gap in the running sequence ids costs an extra pass over the weights, which
   * the scheduler's slot choice avoids (see docs/ARCHITECTURE.md). An encoder (no KV cache) and a
   * decoder reranker (many short sequences in one small context) always share one.
   */
  kvUnified?: boolean;
  /**
   * The step budget: tokens one step evaluates at most, decodes and prompt chunks together
   * (`--max-num-batched-tokens`). Defaults to {@link DEFAULT_MAX_NUM_BATCHED_TOKENS} for the device.
   * The context's batch (llama.cpp's `n_batch`) holds max(512, this) tokens.
   */
  stepBudget?: number;
  /** The K cache's type (`--cache-type-k`, llama-server's `-ctk`). Defaults to f16. */
  cacheTypeK?: KvCacheType;
  /** The V cache's type (`--cache-type-v`, `-ctv`); a quantized one needs flash attention. Defaults to f16. */
  cacheTypeV?: KvCacheType;
  /** Flash attention (`--flash-attn`, `-fa`). Defaults to auto (llama.cpp's choice for the device). */
  flashAttn?: FlashAttn;
  /**
   * The multimodal projector GGUF beside the model (llama-server's `--mmproj`): with it the model takes
   * images. Defaults to none.
   */
  mmproj?: string;
  /**
   * How `/v1/embeddings` pools a prompt's hidden states (`--pooling`). Defaults to the GGUF's
   * `<arch>.pooling_type` (mean, cls, last), else `mean`.
   */
  pooling?: Pooling;
  /**
   * What the model serves (`--task`): `auto` (the default) reads it from the GGUF: an encoder-only
   * model (BERT family) with rank pooling reranks, another encoder embeds, everything else generates.
   */
  task?: ModelTask | "auto";
};

/**
 * Architectures llama.cpp runs as encoder-only, without a KV cache (`llama_model::create_memory`
 * returns none for them): served through pooled `encode` steps (see EncoderScheduler).
 */
export const ENCODER_ARCHITECTURES: ReadonlySet<string> = new Set([
  "bert",
  "modern-bert",
  "nomic-bert",
  "nomic-bert-moe",
  "neo-bert",
  "jina-bert-v2",
  "jina-bert-v3",
  "eurobert",
  "gemma-embedding",
]);

/**
 * Decoder architectures whose rank pooling llama.cpp computes (the last token's hidden state through the
 * `cls.output` head, then a softmax over its labels: `llm_graph_context::build_pooling`), as
 * Qwen3-Reranker GGUFs are converted: served like encoders, whole inputs per pooled step, the KV cache
 * cleared after each.
 */
export const DECODER_RERANK_ARCHITECTURES: ReadonlySet<string> = new Set(["qwen3", "qwen3vl"]);

/** Raised when a model file is missing, unreadable or not a valid GGUF; its message is one line. */
export class ModelLoadError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ModelLoadError";
  }
}

/** Where a model runs: for the startup log and `/v1/models`. */
export type ModelPlacement = {
  /** "CPU", "CUDA" or "Vulkan". */
  backend: string;
  /** The GPU devices' descriptions (empty on the CPU). */
  devices: readonly string[];
  /** Layers offloaded to the GPU (0 on the CPU), of `layers` (+1 for the output layer). */
  offloadedLayers: number;
  layers: number;
  /** GPU backends tried and not used, with why (`--device auto` on a machine without that GPU). */
  skipped: readonly { backend: string; reason: string }[];
};

/** The context's KV cache as created: its types, flash attention, and its size. */
export type KvCacheInfo = {
  typeK: KvCacheType;
  typeV: KvCacheType;
  /** Whether attention runs as flash attention (`auto` resolved). */
  flashAttn: boolean;
  /** Bytes of the K cache (every layer, every cell of every slot). */
  kBytes: number;
  /** Bytes of the V cache. */
  vBytes: number;
};

/**
 * One loaded model and its context, over the native engine: the model's weights and tokenizer, and one
 * llama.cpp context whose `sequences` sequences of `contextSize` tokens are the scheduler's slots.
 */
export class ModelHost {
  /** The served names; `names[0]` is the model id. */
  readonly names: readonly string[];
  readonly modelPath: string;
  readonly model: NativeModel;
  readonly context: NativeContext;
  readonly info: NativeModelInfo;
  /** The GGUF's Jinja chat template (`tokenizer.chat_template`), or null when the file has none. */
  readonly chatTemplate: string | null;
  /**
   * The GGUF's rerank prompt (`tokenizer.chat_template.rerank`, e.g. Qwen3-Reranker's), with `{query}`
   * and `{document}` to replace, or null when the file has none.
   */
  readonly rerankPrompt: string | null;
  /** Unix seconds at which the model finished loading (OpenAI's `created` of the model object). */
  readonly created: number;
  /** Token bytes and text, for logprobs. */
  readonly vocabulary: TokenVocabulary;
  /** Tokens of context per sequence: prompt plus completion must fit in it. */
  readonly contextSize: number;
  /** Number of sequences (slots). */
  readonly sequences: number;
  /** Most tokens one step may hold (llama.cpp's `n_batch`): max(512, {@link stepBudget}), at most the context. */
  readonly batchSize: number;
  /** Tokens the scheduler puts in one step at most (`--max-num-batched-tokens`, else the device's default). */
  readonly stepBudget: number;
  /**
   * Whether every sequence's KV cells share one buffer (llama.cpp's `kv_unified`). When not, llama.cpp
   * evaluates a step in one physical batch per run of consecutive sequence ids, so the scheduler keeps
   * the running slots' ids consecutive.
   */
  readonly kvUnified: boolean;
  readonly placement: ModelPlacement;
  /** The KV cache's types and bytes, flash attention. */
  readonly kvCache: KvCacheInfo;
  /** How `/v1/embeddings` pools a prompt (`--pooling`, else the GGUF's, else mean). */
  readonly pooling: Pooling;
  /** What the model serves: `generate`, `embed` or `rerank` (`--task`, else from the GGUF). */
  readonly task: ModelTask;
  /** Whether the model is encoder-only (no KV cache; whole inputs of at most `batchSize` tokens per step). */
  readonly encoder: boolean;
  /** The multimodal projector (`--mmproj`), or null: then the model takes no images. */
  readonly projector: NativeProjector | null;
  /** The text that stands for an image in a prompt (mtmd's marker) when the model takes images, else null. */
  readonly imageMarker: string | null;
  private readonly endOfGeneration: number[];

  private constructor(init: {
    names: readonly string[];
    modelPath: string;
    model: NativeModel;
    context: NativeContext;
    chatTemplate: string | null;
    rerankPrompt: string | null;
    vocabulary: TokenVocabulary;
    contextSize: number;
    sequences: number;
    batchSize: number;
    stepBudget: number;
    kvUnified: boolean;
    placement: ModelPlacement;
    projector: NativeProjector | null;
    pooling: Pooling;
    task: ModelTask;
    encoder: boolean;
  }) {
    this.task = init.task;
    this.encoder = init.encoder;
    this.projector = init.projector;
    const projectorInfo = init.projector?.info();
    this.imageMarker = projectorInfo?.vision ? projectorInfo.marker : null;
    this.pooling = init.pooling;
    this.names = init.names;
    this.modelPath = init.modelPath;
    this.model = init.model;
    this.context = init.context;
    this.info = init.model.info();
    this.chatTemplate = init.chatTemplate;
    this.rerankPrompt = init.rerankPrompt;
    this.vocabulary = init.vocabulary;
    this.contextSize = init.contextSize;
    this.sequences = init.sequences;
    this.batchSize = init.batchSize;
    this.stepBudget = init.stepBudget;
    this.kvUnified = init.kvUnified;
    this.placement = init.placement;
    const contextInfo = init.context.info();
    this.kvCache = {
      typeK: contextInfo.cacheTypeK,
      typeV: contextInfo.cacheTypeV,
      flashAttn: contextInfo.flashAttn,
      kBytes: contextInfo.kBytes,
      vBytes: contextInfo.vBytes,
    };
    this.created = Math.floor(Date.now() / 1000);
    const { eos, eot } = this.info;
    this.endOfGeneration = [...new Set([eos, eot].filter((token) => token >= 0))];
  }

  /**
   * Loads a GGUF model and creates its context.
   * @throws ModelLoadError when the file is missing, unreadable or not a valid GGUF model, or the
   *   context cannot be created (also a KV cache type the model or the flash-attention setting refuses:
   *   a quantized V cache with `flashAttn: "off"`, a block type that does not divide the head size);
   *   DeviceUnavailableError when `--device cuda|vulkan` finds no such GPU.
   */
  static async load(options: ModelHostOptions): Promise<ModelHost> {
    const { modelPath } = options;
    try {
      const info = await stat(modelPath);
      if (!info.isFile()) throw new ModelLoadError(`Model path is not a file: ${modelPath}`);
    } catch (error) {
      if (error instanceof ModelLoadError) throw error;
      throw new ModelLoadError(
        `Cannot read model file ${modelPath}: ${(error as NodeJS.ErrnoException).code ?? error}`,
      );
    }
    let tokenizer: { tokens: string[]; token_type?: number[]; model?: string };
    let metadataTemplate: unknown;
    let metadataRerankPrompt: unknown;
    let metadataPooling: unknown;
    let architecture: string | undefined;
    try {
      const fileInfo = await readGgufFileInfo(modelPath, { readTensorInfo: false });
      const metadata = fileInfo.metadata as unknown as {
        tokenizer?: {
          chat_template?: unknown;
          ggml?: { tokens: string[]; token_type?: number[]; model?: string };
        };
      };
      metadataTemplate = metadata.tokenizer?.chat_template;
      metadataRerankPrompt = (metadata.tokenizer as Record<string, unknown> | undefined)?.[
        "chat_template.rerank"
      ];
      architecture = (metadata as { general?: { architecture?: string } }).general?.architecture;
      if (architecture !== undefined) {
        metadataPooling = (metadata as Record<string, { pooling_type?: unknown } | undefined>)[architecture]
          ?.pooling_type;
      }
      if (!metadata.tokenizer?.ggml?.tokens) throw new Error("the file has no tokenizer.ggml.tokens");
      tokenizer = metadata.tokenizer.ggml;
    } catch (error) {
      throw new ModelLoadError(`Not a valid GGUF model file: ${modelPath} (${firstLine(error)})`, {
        cause: error,
      });
    }
    const engine = nativeAddon();
    const plan: DevicePlan = planDevices(options.device ?? "auto");
    const onGpu = plan.gpus.length > 0;
    const nGpuLayers = onGpu ? (options.nGpuLayers ?? -1) : 0;
    let model: NativeModel;
    try {
      model = await engine.loadModel(modelPath, {
        nGpuLayers,
        devices: plan.gpus.map((device) => device.name),
        cpuOnly: !onGpu,
      });
    } catch (error) {
      throw new ModelLoadError(`Failed to load model ${modelPath}: ${firstLine(error)}`, { cause: error });
    }
    const info = model.info();
    if (options.maxModelLen !== undefined && options.maxModelLen > info.nCtxTrain) {
      model.dispose();
      // As vLLM: a context longer than the model was trained on is refused, not silently accepted.
      throw new ModelLoadError(
        `--max-model-len ${options.maxModelLen} is greater than the model's training context (${info.nCtxTrain} tokens).`,
      );
    }
    const pooling = options.pooling ?? poolingFromGguf(metadataPooling);
    // A decoder reranker (Qwen3-Reranker) runs pooled steps as an encoder does, unless told to generate.
    const decoderReranker =
      architecture !== undefined &&
      DECODER_RERANK_ARCHITECTURES.has(architecture) &&
      pooling === "rank" &&
      options.task !== "generate" &&
      options.task !== "embed";
    const encoder =
      (architecture !== undefined && ENCODER_ARCHITECTURES.has(architecture)) || decoderReranker;
    const task = taskOf(options.task ?? "auto", encoder, pooling);
    if (task === "rerank" && !(encoder && pooling === "rank")) {
      model.dispose();
      throw new ModelLoadError(
        `--task rerank needs a reranker (an encoder-only model, or a Qwen3 reranker, with rank pooling); ${basename(modelPath)} is a ${architecture ?? "unknown"} model with ${pooling} pooling.`,
      );
    }
    const contextSize = options.maxModelLen ?? Math.min(info.nCtxTrain, 8192);
    const cells = contextSize * options.sequences;
    // An encoder's step is one non-causal ubatch whose attention spans all its tokens, so by default it
    // holds one window (at least 512 tokens), not the decoders' budget.
    const budget =
      options.stepBudget ??
      (encoder ? 512 : onGpu ? DEFAULT_MAX_NUM_BATCHED_TOKENS.gpu : DEFAULT_MAX_NUM_BATCHED_TOKENS.cpu);
    // The batch keeps llama.cpp's usual 512 below a smaller budget (one image's tokens go in one batch);
    // an encoder sees a whole input in one ubatch, so its batch holds at least one full window.
    const batchSize = encoder ? Math.max(contextSize, 512, budget) : Math.min(Math.max(512, budget), cells);
    const stepBudget = Math.min(budget, batchSize);
    const sequences = encoder ? Math.min(256, Math.max(options.sequences, 64)) : options.sequences;
    const kvUnified = encoder || (options.kvUnified ?? false);
    let context: NativeContext;
    try {
      context = new engine.Context(model, {
        nCtx: encoder ? batchSize : contextSize * options.sequences,
        nSeqMax: sequences,
        nBatch: batchSize,
        // llama.cpp splits a larger step into physical batches of at most 512 (its default n_ubatch), which
        // bounds the compute buffers whatever --max-num-batched-tokens is.
        nUbatch: encoder ? batchSize : Math.min(batchSize, 512),
        threads: options.threads,
        kvUnified,
        ...(options.cacheTypeK !== undefined ? { cacheTypeK: options.cacheTypeK } : {}),
        ...(options.cacheTypeV !== undefined ? { cacheTypeV: options.cacheTypeV } : {}),
        ...(options.flashAttn !== undefined ? { flashAttn: options.flashAttn } : {}),
        ...(encoder ? { pooling: LLAMA_POOLING[pooling] } : {}),
      });
    } catch (error) {
      model.dispose();
      const reason = firstLine(error);
      // The engine's refusals of a cache setting name their flag and are the whole message.
      if (/^--(cache-type-[kv]|flash-attn) /.test(reason)) throw new ModelLoadError(reason, { cause: error });
      throw new ModelLoadError(`Failed to create a context of ${contextSize} tokens: ${reason}`, {
        cause: error,
      });
    }
    let projector: NativeProjector | null = null;
    if (options.mmproj !== undefined) {
      try {
        projector = await engine.loadProjector(options.mmproj, model, {
          threads: options.threads,
          useGpu: onGpu,
        });
      } catch (error) {
        context.dispose();
        model.dispose();
        throw new ModelLoadError(`Failed to load the projector ${options.mmproj}: ${firstLine(error)}`, {
          cause: error,
        });
      }
    }
    const names =
      options.servedModelNames && options.servedModelNames.length > 0
        ? options.servedModelNames
        : [basename(modelPath).replace(/\.gguf$/i, "")];
    const layers = info.nLayer;
    const host = new ModelHost({
      names,
      modelPath,
      model,
      context,
      chatTemplate: typeof metadataTemplate === "string" ? metadataTemplate : null,
      rerankPrompt: typeof metadataRerankPrompt === "string" ? metadataRerankPrompt : null,
      vocabulary: new TokenVocabulary(
        tokenizer.tokens,
        tokenizer.token_type ?? [],
        tokenizer.model ?? "llama",
      ),
      contextSize,
      sequences,
      batchSize,
      stepBudget,
      kvUnified,
      placement: {
        backend: plan.backend,
        devices: plan.gpus.map((device) => device.description || device.name),
        offloadedLayers: onGpu ? Math.min(nGpuLayers < 0 ? layers + 1 : nGpuLayers, layers + 1) : 0,
        layers,
        skipped: plan.skipped,
      },
      projector,
      pooling,
      task,
      encoder,
    });
    return host;
  }

  /** The model id (the first served name). */
  get id(): string {
    return this.names[0] as string;
  }

  /** Number of tokens in the vocabulary (valid token ids are 0..vocabularySize-1). */
  get vocabularySize(): number {
    return this.info.nVocab;
  }

  /** The end-of-generation token ids (EOS, EOT), for `ignore_eos` and `min_tokens`. */
  get endOfGenerationTokens(): number[] {
    return this.endOfGeneration;
  }

  /**
   * Fill-in-the-middle tokens `[prefix, suffix, middle]`, or null when the model has none
   * (then `suffix` cannot be served).
   */
  get infillTokens(): [number, number, number] | null {
    const { fimPre, fimSuf, fimMid } = this.info;
    return fimPre >= 0 && fimSuf >= 0 && fimMid >= 0 ? [fimPre, fimSuf, fimMid] : null;
  }

  /** The BOS token's text, or "" when the model has none. */
  get bosText(): string {
    return this.info.bos >= 0 ? this.vocabulary.piece(this.info.bos) : "";
  }

  /** The EOS token's text, or "" when the model has none. */
  get eosText(): string {
    return this.info.eos >= 0 ? this.vocabulary.piece(this.info.eos) : "";
  }

  /**
   * Tokenizes text; special-token text (e.g. `<|im_start|>`) is parsed as special tokens, as Hugging
   * Face tokenizers do.
   * @param addSpecialTokens prepend BOS when the model asks for it (HF's `add_special_tokens`).
   */
  tokenize(text: string, addSpecialTokens: boolean): number[] {
    return this.withBos(Array.from(this.model.tokenize(text, false, true)), addSpecialTokens);
  }

  /**
   * `tokens` with BOS in front when `addSpecialTokens` and the model asks for it
   * (`tokenizer.ggml.add_bos_token`), never doubled. Returns `tokens` itself when nothing is added.
   */
  withBos(tokens: number[], addSpecialTokens: boolean): number[] {
    const { bos, addBos } = this.info;
    if (addSpecialTokens && bos >= 0 && addBos && tokens[0] !== bos) return [bos, ...tokens];
    return tokens;
  }

  /**
   * Detokenizes tokens, with `lastTokens` as preceding context.
   * @param renderSpecial render special tokens' text (as Hugging Face's `decode`). Defaults to false.
   */
  detokenize(tokens: readonly number[], lastTokens: readonly number[] = [], renderSpecial = false): string {
    return this.model.detokenize(tokens, lastTokens, renderSpecial);
  }

  /** True for end-of-generation tokens (EOS, EOT, ...). */
  isEndOfGeneration(token: number): boolean {
    return this.model.isEog(token);
  }

  /** Whether the model takes images (it has a projector with a vision encoder). */
  get acceptsImages(): boolean {
    return this.imageMarker !== null;
  }

  /** Frees the context and the model. Call only when no step is running. */
  /**
   * Loads a LoRA adapter GGUF for this model (llama.cpp's `llama_adapter_lora_init`, off the JS thread).
   * @throws ModelLoadError with llama.cpp's reason when the file is missing, not a LoRA adapter, or made
   *   for another base model (architecture or tensor shapes differ).
   */
  async loadLora(path: string): Promise<NativeLora> {
    try {
      return await nativeAddon().loadLora(path, this.model);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ModelLoadError(`The LoRA adapter ${path} could not be loaded: ${reason}`, { cause: error });
    }
  }

  async dispose(): Promise<void> {
    this.projector?.dispose();
    this.context.dispose();
    this.model.dispose();
  }
}

/** llama.cpp's `pooling_type` numbers (1 mean, 2 cls, 3 last, 4 rank) as ours; none or another: mean. */
function poolingFromGguf(value: unknown): Pooling {
  return value === 2 ? "cls" : value === 3 ? "last" : value === 4 ? "rank" : "mean";
}

/** Ours as llama.cpp's `llama_pooling_type` numbers. */
const LLAMA_POOLING: Readonly<Record<Pooling, number>> = { mean: 1, cls: 2, last: 3, rank: 4 };

/** The task `--task` names, or for `auto`: rerank (encoder, rank pooling), embed (encoder), else generate. */
function taskOf(task: ModelTask | "auto", encoder: boolean, pooling: Pooling): ModelTask {
  if (task !== "auto") return task;
  if (!encoder) return "generate";
  return pooling === "rank" ? "rerank" : "embed";
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0] ?? message;
}

import { stat } from "node:fs/promises";
import { basename } from "node:path";
import {
  getLlama,
  type Llama,
  type LlamaContext,
  LlamaLogLevel,
  type LlamaModel,
  readGgufFileInfo,
  type Token,
} from "node-llama-cpp";
import { BatchGate } from "./BatchGate.ts";
import { TokenVocabulary } from "./TokenVocabulary.ts";

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
  /** Chat template overriding the GGUF's `tokenizer.chat_template`. */
  chatTemplate?: string;
  /** Tool-call parser name (`--tool-call-parser`); defaults to none: the chat serving detects one from the template. */
  toolCallParser?: string;
  /** Reasoning parser name (`--reasoning-parser`); defaults to none: the chat serving detects one from the template. */
  reasoningParser?: string;
  /**
   * Honour a request's own `chat_template` (vLLM's `--trust-request-chat-template`): a Jinja template
   * runs arbitrary loops, so by default only the model's and the server's templates are used.
   */
  trustRequestChatTemplate?: boolean;
  /** Longest wait for every running sequence to join a decode batch, in ms (see BatchGate). Defaults to 40. */
  batchWaitMs?: number;
  /** Called with the load progress, 0..1. */
  onProgress?: (fraction: number) => void;
};

/** Output parser names configured for a model; an absent one is detected from the chat template per request. */
export type ChatParserNames = { readonly toolCallParser?: string; readonly reasoningParser?: string };

/** Raised when a model file is missing, unreadable or not a valid GGUF; its message is one line. */
export class ModelLoadError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ModelLoadError";
  }
}

let llamaPromise: Promise<Llama> | undefined;

/** The process-wide llama.cpp binding (CPU build, llama.cpp's own logs at warning level and above). */
export function getSharedLlama(): Promise<Llama> {
  llamaPromise ??= getLlama({ gpu: false, logLevel: LlamaLogLevel.error, build: "never" });
  return llamaPromise;
}

/**
 * One loaded model and its context: owns the node-llama-cpp objects and the tokenizer.
 * The context holds `sequences` sequences of `contextSize` tokens each; the scheduler hands them out.
 */
export class ModelHost {
  /** The served names; `names[0]` is the model id. */
  readonly names: readonly string[];
  readonly modelPath: string;
  readonly model: LlamaModel;
  readonly context: LlamaContext;
  /** The Jinja chat template in use (flag override, else GGUF metadata), or null when the model has none. */
  readonly chatTemplate: string | null;
  /** The configured output parser names (`--tool-call-parser`, `--reasoning-parser`); absent ones are detected per request. */
  readonly chatParsers: ChatParserNames;
  /** Whether a request's own `chat_template` is honoured (`--trust-request-chat-template`). */
  trustRequestChatTemplate = false;
  /** Unix seconds at which the model finished loading (OpenAI's `created` of the model object). */
  readonly created: number;
  /** Token bytes and text, for logprobs. */
  readonly vocabulary: TokenVocabulary;
  /** Lines up the running sequences' decode steps into one batch each and orders them (see BatchGate). */
  readonly batchGate: BatchGate;

  private constructor(
    names: readonly string[],
    modelPath: string,
    model: LlamaModel,
    context: LlamaContext,
    chatTemplate: string | null,
    batchGate: BatchGate,
    chatParsers: ChatParserNames,
  ) {
    this.chatParsers = chatParsers;
    this.batchGate = batchGate;
    this.names = names;
    this.modelPath = modelPath;
    this.model = model;
    this.context = context;
    this.chatTemplate = chatTemplate;
    this.created = Math.floor(Date.now() / 1000);
    const tokenizer = model.fileInfo.metadata.tokenizer.ggml as {
      tokens: string[];
      token_type?: number[];
      model?: string;
    };
    this.vocabulary = new TokenVocabulary(
      tokenizer.tokens,
      tokenizer.token_type ?? [],
      tokenizer.model ?? "llama",
    );
  }

  /**
   * Loads a GGUF model and creates its context.
   * @throws ModelLoadError when the file is missing, unreadable or not a valid GGUF model.
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
    let template: string | null;
    try {
      const fileInfo = await readGgufFileInfo(modelPath, { readTensorInfo: false });
      const metadataTemplate = (fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer
        ?.chat_template;
      template = typeof metadataTemplate === "string" ? metadataTemplate : null;
    } catch (error) {
      throw new ModelLoadError(`Not a valid GGUF model file: ${modelPath} (${firstLine(error)})`, {
        cause: error,
      });
    }
    const llama = await getSharedLlama();
    let model: LlamaModel;
    try {
      model = await llama.loadModel({
        modelPath,
        ...(options.onProgress ? { onLoadProgress: options.onProgress } : {}),
      });
    } catch (error) {
      throw new ModelLoadError(`Failed to load model ${modelPath}: ${firstLine(error)}`, { cause: error });
    }
    const trainContextSize = model.trainContextSize;
    if (options.maxModelLen !== undefined && options.maxModelLen > trainContextSize) {
      await model.dispose();
      // As vLLM: a context longer than the model was trained on is refused, not silently accepted.
      throw new ModelLoadError(
        `--max-model-len ${options.maxModelLen} is greater than the model's training context (${trainContextSize} tokens).`,
      );
    }
    const contextSize = options.maxModelLen ?? Math.min(model.trainContextSize, 8192);
    const batchGate = new BatchGate(options.batchWaitMs);
    let context: LlamaContext;
    try {
      context = await model.createContext({
        sequences: options.sequences,
        contextSize,
        threads: options.threads,
        batchSize: Math.min(512, contextSize),
        batching: { dispatchSchedule: batchGate.schedule, itemPrioritizationStrategy: batchGate.prioritize },
      });
      batchGate.attach(context);
    } catch (error) {
      await model.dispose();
      throw new ModelLoadError(`Failed to create a context of ${contextSize} tokens: ${firstLine(error)}`, {
        cause: error,
      });
    }
    const names =
      options.servedModelNames && options.servedModelNames.length > 0
        ? options.servedModelNames
        : [basename(modelPath).replace(/\.gguf$/i, "")];
    const { toolCallParser, reasoningParser } = options;
    const chatParsers: ChatParserNames = {
      ...(toolCallParser !== undefined ? { toolCallParser } : {}),
      ...(reasoningParser !== undefined ? { reasoningParser } : {}),
    };
    const host = new ModelHost(
      names,
      modelPath,
      model,
      context,
      options.chatTemplate ?? template,
      batchGate,
      chatParsers,
    );
    host.trustRequestChatTemplate = options.trustRequestChatTemplate ?? false;
    return host;
  }

  /** The model id (the first served name). */
  get id(): string {
    return this.names[0] as string;
  }

  /** Tokens of context per sequence: prompt plus completion must fit in it. */
  get contextSize(): number {
    return this.context.contextSize;
  }

  /** Number of tokens in the vocabulary (valid token ids are 0..vocabularySize-1). */
  get vocabularySize(): number {
    return this.vocabulary.size;
  }

  /** The end-of-generation token ids (EOS, EOT), for `ignore_eos` and `min_tokens`. */
  get endOfGenerationTokens(): number[] {
    const { eos, eot } = this.model.tokens;
    return [eos, eot].filter((token): token is Token => token !== null);
  }

  /**
   * Fill-in-the-middle tokens `[prefix, suffix, middle]`, or null when the model has none
   * (then `suffix` cannot be served).
   */
  get infillTokens(): [number, number, number] | null {
    const { prefix, suffix, middle } = this.model.tokens.infill;
    return prefix !== null && suffix !== null && middle !== null ? [prefix, suffix, middle] : null;
  }

  /** The BOS token's text, or "" when the model has none. */
  get bosText(): string {
    return this.model.tokens.bosString ?? "";
  }

  /** The EOS token's text, or "" when the model has none. */
  get eosText(): string {
    return this.model.tokens.eosString ?? "";
  }

  /**
   * Tokenizes text; special-token text (e.g. `<|im_start|>`) is parsed as special tokens, as Hugging
   * Face tokenizers do.
   * @param addSpecialTokens prepend BOS when the model asks for it (HF's `add_special_tokens`).
   */
  tokenize(text: string, addSpecialTokens: boolean): number[] {
    const tokens = this.model.tokenize(text, true);
    const bos = this.model.tokens.bos;
    if (addSpecialTokens && bos !== null && this.model.tokens.shouldPrependBosToken && tokens[0] !== bos) {
      return [bos, ...tokens];
    }
    return tokens;
  }

  /** Detokenizes tokens, with `lastTokens` as preceding context; special tokens are not rendered. */
  detokenize(tokens: readonly number[], lastTokens: readonly number[] = []): string {
    return this.model.detokenize(tokens as readonly Token[], false, lastTokens as readonly Token[]);
  }

  /** True for end-of-generation tokens (EOS, EOT, ...). */
  isEndOfGeneration(token: number): boolean {
    return this.model.isEogToken(token as Token);
  }

  /** Frees the context and the model. */
  async dispose(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0] ?? message;
}

/**
 * The server's configuration: CLI flags and environment variables parsed by zod into one frozen object.
 * No other module reads `process.env`.
 */
import { readFileSync, statSync } from "node:fs";
import os from "node:os";
import { resolve as resolvePath } from "node:path";
import { z } from "zod";
import {
  isReasoningParserName,
  REASONING_PARSER_NAMES,
  resolveToolParserName,
  TOOL_PARSER_NAMES,
} from "../chat/index.ts";
import { type FlashAttn, KV_CACHE_TYPES, type KvCacheType } from "../engine/kvCacheTypes.ts";
import { defaultDownloadDir } from "../models/defaultDownloadDir.ts";
import { DEFAULT_MAX_IMAGE_BYTES } from "../serving/images/imageSource.ts";
import { ConfigError } from "./ConfigError.ts";
import { type ModelFileEntry, mergeFileFlags, readConfigFile } from "./file.ts";
import { type LoraModule, LoraModuleSchema, loraModules } from "./loraModules.ts";
import { OperationsConfigSchema, type OperationsFlags, operationsSettings } from "./operations.ts";
import { parseByteSize, parseSeconds } from "./values.ts";

export { ConfigError } from "./ConfigError.ts";

/** One model to serve. */
export type ModelConfig = {
  /** Where the model comes from: a local .gguf path, an `hf:` URI or an http(s) URL (resolved to a local file before loading). */
  source: string;
  /** Names it is served under (vLLM's `--served-model-name`); the first is its id. */
  servedModelNames: string[];
  /** This model's own `max-model-len` (a config file's `models` entry); absent: the server-wide value. */
  maxModelLen?: number;
  /** This model's own `max-num-seqs` (slots); absent: the server-wide value. */
  maxNumSeqs?: number;
  /** This model's own chat template text; absent: the server-wide `--chat-template`, else the GGUF's. */
  chatTemplate?: string;
  /** Absolute path of this model's own multimodal projector (a config file's `mmproj`); absent: `--mmproj`. */
  mmproj?: string;
  /** This model's own `cache-type-k`; absent: the server-wide value. */
  cacheTypeK?: KvCacheType;
  /** This model's own `cache-type-v`; absent: the server-wide value. */
  cacheTypeV?: KvCacheType;
  /** This model's own `flash-attn`; absent: the server-wide value. */
  flashAttn?: FlashAttn;
  /** This model's own `max-num-batched-tokens`; absent: the server-wide value. */
  maxNumBatchedTokens?: number;
  /** This model's own `matryoshka-dimensions`; absent: the server-wide value. */
  matryoshkaDimensions?: number[];
  /**
   * The LoRA adapters this model serves (a config file entry's `lora`, else `--lora` for the first
   * model); absent: none.
   */
  loras?: LoraModule[];
};

const KvCacheTypeSchema = z.enum(KV_CACHE_TYPES);
const FlashAttnSchema = z.enum(["auto", "on", "off"]);

const ServeConfigSchema = z.object({
  models: z.array(
    z.object({
      source: z.string().min(1),
      servedModelNames: z.array(z.string().min(1)),
      maxModelLen: z.number().int().min(16).optional(),
      maxNumSeqs: z.number().int().min(1).max(256).optional(),
      chatTemplate: z.string().optional(),
      mmproj: z.string().min(1).optional(),
      cacheTypeK: KvCacheTypeSchema.optional(),
      cacheTypeV: KvCacheTypeSchema.optional(),
      flashAttn: FlashAttnSchema.optional(),
      maxNumBatchedTokens: z.number().int().min(1).max(1_048_576).optional(),
      matryoshkaDimensions: z.array(z.number().int().min(1)).min(1).optional(),
      loras: z.array(LoraModuleSchema).optional(),
    }),
  ),
  /**
   * `--max-loras` (vLLM's): the most LoRA adapters with generations running at once per model (the
   * gateway's `max_lora`); absent: the model's slots.
   */
  maxLoras: z.number().int().min(1).optional(),
  /**
   * `--enable-lora` (vLLM's), also on with any `--lora`: adapters may be loaded at run time and
   * `vllm:lora_requests_info` is exported.
   */
  enableLora: z.boolean(),
  /** `--models-dir`: absolute folder whose GGUFs (and the download cache's) are served on demand; absent: none. */
  modelsDir: z.string().min(1).optional(),
  /** `--models-autoload` / `--no-models-autoload`: a request naming an unloaded model loads it. Defaults to on with `--models-dir`, else off. */
  modelsAutoload: z.boolean(),
  /** `--models-max`: the most models loaded at once (LRU eviction of idle ones); absent: no limit. */
  modelsMax: z.number().int().min(1).optional(),
  /** `--memory-budget`: the most bytes loaded models hold (weights + KV cache + projector); absent: no limit. */
  memoryBudget: z.number().int().min(1).optional(),
  /** `--idle-unload`: seconds idle before a model unloads (requests' `keep_alive` overrides); absent: never. */
  idleUnload: z.number().positive().optional(),
  host: z.string().min(1),
  port: z.number().int().min(0).max(65535),
  maxModelLen: z.number().int().min(16).optional(),
  maxNumSeqs: z.number().int().min(1).max(256),
  threads: z.number().int().min(1).max(1024).optional(),
  seed: z.number().int().optional(),
  chatTemplate: z.string().optional(),
  /** `--mmproj`: absolute path of the multimodal projector GGUF of the models without their own; absent: text only. */
  mmproj: z.string().min(1).optional(),
  /** `--max-image-bytes`: the largest image a request may send or name, in bytes. Defaults to 20,000,000. */
  maxImageBytes: z.number().int().min(1),
  /** `--allow-private-image-urls`: fetch `image_url`s from loopback and private addresses too. Defaults to false. */
  allowPrivateImageUrls: z.boolean(),
  /** `--tool-call-parser` (a canonical name of `chat/toolParsers`); absent: detected from the chat template. */
  toolCallParser: z.string().optional(),
  /** `--reasoning-parser` (a name of `REASONING_PARSER_NAMES` or an alias); absent: detected from the chat template. */
  reasoningParser: z.string().optional(),
  maxWaiting: z.number().int().min(0).optional(),
  requestTimeout: z.number().positive().optional(),
  prefixCaching: z.boolean(),
  /**
   * `--prefix-cache-scope`: requests without a `cache_salt` reuse cached prompt prefixes only under
   * their own API key (`key`) or across every request (`global`). Defaults to `key`.
   */
  prefixCacheScope: z.enum(["key", "global"]),
  batchInvariantSeeds: z.boolean(),
  /** `--device`: where the models run. */
  device: z.enum(["auto", "cpu", "cuda", "vulkan"]),
  /** `--n-gpu-layers` / `-ngl`: layers offloaded to a GPU; absent: all. */
  nGpuLayers: z.number().int().min(-1).optional(),
  /**
   * One KV buffer shared by every slot (llama.cpp's `kv_unified`, `--kv-unified`) instead of one per slot.
   * Defaults to false (one per slot, as llama-server with an explicit `-np`): see docs/ARCHITECTURE.md.
   */
  kvUnified: z.boolean(),
  /** `--cache-type-k` (llama-server's `-ctk`): the K cache's type. Defaults to f16. */
  cacheTypeK: KvCacheTypeSchema,
  /** `--cache-type-v` (`-ctv`): the V cache's type; a quantized one needs flash attention. Defaults to f16. */
  cacheTypeV: KvCacheTypeSchema,
  /** `--flash-attn` (`-fa`): auto (llama.cpp's choice for the device), on or off. Defaults to auto. */
  flashAttn: FlashAttnSchema,
  /**
   * `--max-num-batched-tokens` (vLLM's): tokens one engine step evaluates at most, decodes and prompt
   * chunks together; at least `max-num-seqs`. Absent: the device's default,
   * {@link DEFAULT_MAX_NUM_BATCHED_TOKENS} (engine/stepPlan.ts).
   */
  maxNumBatchedTokens: z.number().int().min(1).max(1_048_576).optional(),
  /** `--jump-forward`: append the text a grammar forces without sampling it (guided decoding). */
  jumpForward: z.boolean(),
  /** `--pooling`: how `/v1/embeddings` pools a prompt; absent: the GGUF's, else mean. */
  pooling: z.enum(["mean", "cls", "last", "rank"]).optional(),
  /** `--task`: what the models serve; absent or `auto`: from each GGUF. */
  task: z.enum(["auto", "generate", "embed", "rerank"]).optional(),
  /**
   * `--matryoshka-dimensions`: the shorter widths an embedding model was trained to give (Matryoshka
   * representation learning, vLLM's `matryoshka_dimensions`), ascending; `/v1/embeddings` `dimensions`
   * may then name one of them. Absent: only the model's full width (GGUF files carry no such key).
   * Each is at most the model's width: a wider one fails the model's load (startServer, ConfigError).
   */
  matryoshkaDimensions: z.array(z.number().int().min(1)).min(1).optional(),
  trustRequestChatTemplate: z.boolean(),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]),
  /** `--log-format` (`LMSERVE_LOG_FORMAT`); absent: pretty when stdout is a terminal, else JSON lines. */
  logFormat: z.enum(["json", "pretty"]).optional(),
  /** Serve the web UI (playground, dashboard) at `/`; `--no-ui` turns it off. */
  ui: z.boolean(),
  /** Cache folder of downloaded models (`--download-dir`); see {@link loadModelSourceSettings}. */
  downloadDir: z.string().min(1),
  /** Hugging Face endpoint (`HF_ENDPOINT`); absent: node-llama-cpp's default. */
  hfEndpoint: z.string().min(1).optional(),
  /** Hugging Face token (`HF_TOKEN`); absent: node-llama-cpp's default. */
  hfToken: z.string().min(1).optional(),
  /**
   * The most a chat or Responses request without `max_tokens` generates when no `--max-tokens-cap` is
   * set; `lmserve serve` without a model sets {@link EMBEDDED_MODEL_OUTPUT_CAP} (the embedded
   * stories260K never ends a chat on its own). Absent: until the context ends.
   */
  defaultMaxTokens: z.number().int().min(1).optional(),
  /** Authentication, limits, CORS, request logging, graceful shutdown: see `operations.ts`. */
  ...OperationsConfigSchema.shape,
});

/**
 * Tokens a chat or Responses request without `max_tokens` generates when `lmserve serve` serves the
 * embedded default model and no `--max-tokens-cap` is set: stories260K under the fallback chat template
 * never emits its end token, so such a request would otherwise run to the end of its 2048-token context.
 */
export const EMBEDDED_MODEL_OUTPUT_CAP = 256;

/** The validated, frozen configuration of `lmserve serve`. */
export type ServeConfig = Readonly<z.infer<typeof ServeConfigSchema>>;

/** The raw option values of `lmserve serve` as the CLI parser hands them over (strings from flags). */
export type ServeFlags = {
  /** `--model` / `-m`: one more model, as a MODEL argument (vLLM, llama-server). */
  model?: string;
  /** `--enable-auto-tool-choice` (vLLM): accepted, no effect (auto tool choice is always on). */
  enableAutoToolChoice?: boolean;
  host?: string;
  port?: string;
  servedModelName?: string[];
  maxModelLen?: string;
  maxNumSeqs?: string;
  threads?: string;
  seed?: string;
  chatTemplate?: string;
  mmproj?: string;
  maxImageBytes?: string;
  allowPrivateImageUrls?: boolean;
  toolCallParser?: string;
  reasoningParser?: string;
  maxWaiting?: string;
  requestTimeout?: string;
  prefixCaching?: boolean;
  prefixCacheScope?: string;
  batchInvariantSeeds?: boolean;
  device?: string;
  nGpuLayers?: string;
  kvUnified?: boolean;
  cacheTypeK?: string;
  cacheTypeV?: string;
  flashAttn?: string;
  maxNumBatchedTokens?: string;
  jumpForward?: boolean;
  pooling?: string;
  task?: string;
  matryoshkaDimensions?: string;
  trustRequestChatTemplate?: boolean;
  logLevel?: string;
  logFormat?: string;
  downloadDir?: string;
  ui?: boolean;
  modelsDir?: string;
  modelsAutoload?: boolean;
  modelsMax?: string;
  memoryBudget?: string;
  idleUnload?: string;
  /** `--lora NAME=PATH[:SCALE]`, repeatable: adapters of the first model. */
  lora?: string[];
  maxLoras?: string;
  enableLora?: boolean;
  /** `--config FILE`: a YAML file of flags and models (see `file.ts`); command-line flags win. */
  config?: string;
} & OperationsFlags;

/** How the CLI parser describes its flags to {@link loadServeConfig}, for merging a config file. */
export type ServeFlagsInfo = {
  /** Every option attribute of `lmserve serve` (`maxNumSeqs`); another key in a config file is an error. */
  knownFlags?: ReadonlySet<string>;
  /** Attributes holding the parser's default rather than a command-line value: the file's value wins. */
  defaultedFlags?: ReadonlySet<string>;
};

/** Where models named by `hf:` URIs and URLs are downloaded, and how Hugging Face is reached. */
export type ModelSourceSettings = {
  /** Absolute cache folder: `--download-dir`, else `$XDG_CACHE_HOME/lmserve/models` or `~/.cache/lmserve/models`. */
  downloadDir: string;
  /** `HF_ENDPOINT` (e.g. a mirror); absent: node-llama-cpp's own lookup (`MODEL_ENDPOINT`, `HF_ENDPOINT`, huggingface.co). */
  hfEndpoint?: string;
  /** `HF_TOKEN`; absent: node-llama-cpp's own lookup (`~/.cache/huggingface/token`). */
  hfToken?: string;
};

/**
 * The model-source settings of `lmserve serve|pull|list` from `--download-dir` and the environment
 * (`XDG_CACHE_HOME`, `HF_ENDPOINT`, `HF_TOKEN`; empty values count as unset).
 * @param flags `downloadDir`: the `--download-dir` flag, resolved against the working directory.
 */
export function loadModelSourceSettings(
  flags: { downloadDir?: string },
  env: NodeJS.ProcessEnv,
): ModelSourceSettings {
  const hfEndpoint = env.HF_ENDPOINT?.trim();
  const hfToken = env.HF_TOKEN?.trim();
  return {
    downloadDir: resolvePath(flags.downloadDir ?? defaultDownloadDir(env, os.homedir())),
    ...(hfEndpoint ? { hfEndpoint } : {}),
    ...(hfToken ? { hfToken } : {}),
  };
}

/**
 * Builds the configuration from the model arguments, the flags and the environment
 * (`LMSERVE_LOG_LEVEL`; model sources: see {@link loadModelSourceSettings}). `--chat-template` names a
 * file, read here; `--mmproj` names a file, checked here and kept as an absolute path.
 * @throws ConfigError on an invalid value, an unreadable chat template file or a missing projector file.
 */
export function loadServeConfig(
  models: string[],
  cliFlags: ServeFlags,
  env: NodeJS.ProcessEnv,
  info: ServeFlagsInfo = {},
): ServeConfig {
  // A config file's flags sit under the command line's; its `models` apply when no MODEL is given.
  const file = cliFlags.config === undefined ? undefined : readConfigFile(cliFlags.config, info.knownFlags);
  const flags = file ? mergeFileFlags(cliFlags, file.flags, info.defaultedFlags ?? new Set()) : cliFlags;
  const sources = flags.model === undefined ? models : [...models, flags.model];
  const entries: ModelFileEntry[] =
    sources.length > 0 ? sources.map((source) => ({ source })) : (file?.models ?? []);
  if (entries.length === 0 && flags.modelsDir === undefined) {
    throw new ConfigError(
      `No model given: pass MODEL, --models-dir DIR, or list 'models' in the config file ${cliFlags.config}.`,
    );
  }
  if (flags.lora !== undefined && entries.length === 0) {
    throw new ConfigError(
      "--lora needs a MODEL to serve the adapters on (or per-model 'lora' in the config file).",
    );
  }
  const chatTemplate = flags.chatTemplate === undefined ? undefined : readTemplateFile(flags.chatTemplate);
  const names = flags.servedModelName ?? [];
  refuseLeftoverNames(names, entries);
  const raw = {
    models: entries.map((entry, index) => ({
      source: entry.source,
      // With one model every name is an alias of it; with several, the i-th name is the i-th model's.
      servedModelNames:
        entry.servedModelNames ??
        (entries.length === 1 ? names : names[index] !== undefined ? [names[index]] : []),
      maxModelLen: optionalInteger(entry.maxModelLen, `models[${index}].max-model-len`),
      maxNumSeqs: optionalInteger(entry.maxNumSeqs, `models[${index}].max-num-seqs`),
      chatTemplate: entry.chatTemplate === undefined ? undefined : readTemplateFile(entry.chatTemplate),
      mmproj: entry.mmproj === undefined ? undefined : projectorPath(entry.mmproj, `models[${index}].mmproj`),
      cacheTypeK: cacheType(entry.cacheTypeK, `models[${index}].cache-type-k`),
      cacheTypeV: cacheType(entry.cacheTypeV, `models[${index}].cache-type-v`),
      flashAttn: flashAttn(entry.flashAttn, `models[${index}].flash-attn`),
      maxNumBatchedTokens: optionalInteger(
        entry.maxNumBatchedTokens,
        `models[${index}].max-num-batched-tokens`,
      ),
      matryoshkaDimensions: widthList(entry.matryoshkaDimensions, `models[${index}].matryoshka-dimensions`),
      loras:
        entry.lora !== undefined
          ? loraModules(entry.lora, `models[${index}].lora`)
          : index === 0
            ? loraModules(flags.lora, "--lora")
            : undefined,
    })),
    maxLoras: optionalInteger(flags.maxLoras, "--max-loras"),
    enableLora:
      (flags.enableLora ?? false) || flags.lora !== undefined || entries.some((entry) => entry.lora),
    modelsDir: flags.modelsDir === undefined ? undefined : modelsDirPath(flags.modelsDir),
    modelsAutoload: flags.modelsAutoload ?? flags.modelsDir !== undefined,
    modelsMax: optionalInteger(flags.modelsMax, "--models-max"),
    memoryBudget:
      flags.memoryBudget === undefined ? undefined : parseByteSize(flags.memoryBudget, "--memory-budget"),
    idleUnload: flags.idleUnload === undefined ? undefined : parseSeconds(flags.idleUnload, "--idle-unload"),
    host: flags.host ?? "127.0.0.1",
    port: toInteger(flags.port ?? "8000", "--port"),
    maxModelLen: optionalInteger(flags.maxModelLen, "--max-model-len"),
    maxNumSeqs: toInteger(flags.maxNumSeqs ?? "4", "--max-num-seqs"),
    threads: optionalInteger(flags.threads, "--threads"),
    seed: optionalInteger(flags.seed, "--seed"),
    chatTemplate,
    mmproj: flags.mmproj === undefined ? undefined : projectorPath(flags.mmproj, "--mmproj"),
    maxImageBytes:
      flags.maxImageBytes === undefined
        ? DEFAULT_MAX_IMAGE_BYTES
        : parseByteSize(flags.maxImageBytes, "--max-image-bytes"),
    allowPrivateImageUrls: flags.allowPrivateImageUrls ?? false,
    toolCallParser: toolCallParserName(flags.toolCallParser),
    reasoningParser: reasoningParserName(flags.reasoningParser),
    maxWaiting: optionalInteger(flags.maxWaiting, "--max-waiting"),
    requestTimeout:
      flags.requestTimeout === undefined
        ? undefined
        : parseSeconds(flags.requestTimeout, "--request-timeout"),
    prefixCaching: flags.prefixCaching ?? true,
    prefixCacheScope: prefixCacheScope(flags.prefixCacheScope),
    batchInvariantSeeds: flags.batchInvariantSeeds ?? false,
    device: flags.device ?? "auto",
    nGpuLayers: optionalInteger(flags.nGpuLayers, "--n-gpu-layers"),
    kvUnified: flags.kvUnified ?? false,
    cacheTypeK: cacheType(flags.cacheTypeK, "--cache-type-k") ?? "f16",
    cacheTypeV: cacheType(flags.cacheTypeV, "--cache-type-v") ?? "f16",
    flashAttn: flashAttn(flags.flashAttn, "--flash-attn") ?? "auto",
    maxNumBatchedTokens: optionalInteger(flags.maxNumBatchedTokens, "--max-num-batched-tokens"),
    jumpForward: flags.jumpForward ?? false,
    pooling: flags.pooling,
    task: flags.task,
    matryoshkaDimensions: widthList(flags.matryoshkaDimensions, "--matryoshka-dimensions"),
    trustRequestChatTemplate: flags.trustRequestChatTemplate ?? false,
    logLevel: flags.logLevel ?? env.LMSERVE_LOG_LEVEL ?? "info",
    logFormat: flags.logFormat ?? env.LMSERVE_LOG_FORMAT,
    ui: flags.ui ?? true,
    ...loadModelSourceSettings(flags, env),
    ...operationsSettings(flags, env.LMSERVE_API_KEY),
  };
  const result = ServeConfigSchema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new ConfigError(`Invalid configuration: ${flagPath(issue?.path ?? [])}: ${issue?.message}`);
  }
  refuseSmallStepBudget(result.data);
  return Object.freeze(result.data);
}

/**
 * Refuses `--served-model-name` values that no model would take: with several models the i-th name
 * names the i-th model, so names past the last model are left over; a model with its own names (a
 * config file entry's `served-model-name`) takes none from the flag.
 * @throws ConfigError naming the leftover values.
 */
function refuseLeftoverNames(names: readonly string[], entries: readonly ModelFileEntry[]): void {
  const leftover =
    entries.length === 1
      ? entries[0]?.servedModelNames !== undefined
        ? [...names]
        : []
      : names.filter(
          (_, index) => entries[index] === undefined || entries[index].servedModelNames !== undefined,
        );
  if (leftover.length === 0) return;
  throw new ConfigError(
    `--served-model-name ${leftover.map((name) => `'${name}'`).join(", ")} names no model: ${names.length} name(s) for ${entries.length} model(s)${entries.some((entry) => entry.servedModelNames !== undefined) ? " (models with their own served-model-name in the config file take none)" : ""}.`,
  );
}

export { DEFAULT_MAX_NUM_BATCHED_TOKENS } from "../engine/stepPlan.ts";

/**
 * Refuses a step budget below a model's slots, as vLLM refuses `max_num_batched_tokens` <
 * `max_num_seqs`: every decoding slot puts a token in each step, and a prompt needs room beside them.
 * @throws ConfigError naming the flag (or the config file's model entry) and both values.
 */
function refuseSmallStepBudget(config: z.infer<typeof ServeConfigSchema>): void {
  config.models.forEach((model, index) => {
    const budget = model.maxNumBatchedTokens ?? config.maxNumBatchedTokens;
    const slots = model.maxNumSeqs ?? config.maxNumSeqs;
    // The devices' defaults (256, 2048) are never below the most slots (256).
    if (budget === undefined || budget >= slots) return;
    const where =
      model.maxNumBatchedTokens !== undefined
        ? `models[${index}].max-num-batched-tokens`
        : "--max-num-batched-tokens";
    throw new ConfigError(
      `${where} (${budget}) must be at least max-num-seqs (${slots}): every slot decodes a token per step.`,
    );
  });
}

/**
 * A KV cache type (`--cache-type-k`, `--cache-type-v`, or a config file entry's), or undefined when not given.
 * @throws ConfigError for a name outside {@link KV_CACHE_TYPES}, listing them (as llama-server).
 */
function cacheType(value: string | undefined, flag: string): KvCacheType | undefined {
  if (value === undefined) return undefined;
  const known = KV_CACHE_TYPES.find((type) => type === value.toLowerCase());
  if (known) return known;
  throw new ConfigError(`${flag} '${value}' is not a KV cache type; allowed: ${KV_CACHE_TYPES.join(", ")}.`);
}

/**
 * `--flash-attn` (or a config entry's `flash-attn`): `auto`, `on` or `off` (also llama-server's
 * spellings `true`/`1`/`enabled`, `false`/`0`/`disabled`), or undefined when not given.
 * @throws ConfigError for any other value.
 */
/**
 * A list of embedding widths: comma-separated positive integers (`64,128,256`;
 * a single YAML number too), sorted ascending without repeats; undefined when absent.
 * @throws ConfigError naming `flag` for an entry that is not a positive integer.
 */
function widthList(value: string | undefined, flag: string): number[] | undefined {
  if (value === undefined) return undefined;
  const widths = value.split(",").map((item) => {
    const width = Number(item.trim());
    if (!Number.isInteger(width) || width < 1)
      throw new ConfigError(
        `${flag} must be positive integers separated by commas (got "${String(value)}").`,
      );
    return width;
  });
  return [...new Set(widths)].sort((a, b) => a - b);
}

function flashAttn(value: string | boolean | undefined, flag: string): FlashAttn | undefined {
  if (value === undefined) return undefined;
  const text = String(value).toLowerCase();
  if (["on", "true", "1", "enabled", "yes"].includes(text)) return "on";
  if (["off", "false", "0", "disabled", "no"].includes(text)) return "off";
  if (text === "auto") return "auto";
  throw new ConfigError(`${flag} must be auto, on or off, got '${value}'.`);
}

/**
 * CPU threads for a model: the `--threads` flag, else one per available core, except for tiny models.
 * Measured here on stories260K (1 MB): 100 tokens took 85 ms with 1 thread and 1,450 ms with 2, since
 * thread synchronisation costs more than such a model's whole matmul; models under 64 MB get 1 thread.
 */
export function threadsFor(config: ServeConfig, modelBytes: number): number {
  if (config.threads !== undefined) return config.threads;
  if (modelBytes < 64 * 1024 * 1024) return 1;
  return os.availableParallelism();
}

function toInteger(value: string, flag: string): number {
  const number = Number(value);
  if (!Number.isInteger(number)) throw new ConfigError(`${flag} must be an integer, got '${value}'.`);
  return number;
}

/** Reads a Jinja chat template file (`--chat-template`, or a config file's per-model `chat-template`). */
function readTemplateFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError(
      `Cannot read the chat template file ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`,
    );
  }
}

/**
 * The absolute path of `--models-dir`.
 * @throws ConfigError when it is not an existing folder.
 */
function modelsDirPath(path: string): string {
  const absolute = resolvePath(path);
  let isDirectory = false;
  try {
    isDirectory = statSync(absolute).isDirectory();
  } catch (error) {
    throw new ConfigError(
      `--models-dir: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`,
    );
  }
  if (!isDirectory) throw new ConfigError(`--models-dir: ${path} is not a folder.`);
  return absolute;
}

/**
 * The absolute path of a projector file (`--mmproj`, or a config file's per-model `mmproj`).
 * @throws ConfigError when it is not an existing file.
 */
function projectorPath(path: string, flag: string): string {
  const absolute = resolvePath(path);
  let isFile = false;
  try {
    isFile = statSync(absolute).isFile();
  } catch (error) {
    throw new ConfigError(
      `${flag}: cannot read the projector file ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`,
    );
  }
  if (!isFile)
    throw new ConfigError(`${flag}: ${path} is not a file (expected a projector GGUF, an mmproj).`);
  return absolute;
}

/**
 * The canonical name of `--tool-call-parser` (vLLM's names, e.g. `hermes`, `llama3_json`, `mistral`,
 * plus aliases such as `qwen`), or undefined when not given.
 * @throws ConfigError for an unknown name, listing the known ones.
 */
function toolCallParserName(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const resolved = resolveToolParserName(name);
  if (!resolved) {
    throw new ConfigError(`Unknown --tool-call-parser '${name}'; known: ${TOOL_PARSER_NAMES.join(", ")}.`);
  }
  return resolved;
}

/**
 * `--reasoning-parser` as given (vLLM's names: `deepseek_r1`, `qwen3`, `openai_gptoss`, …, or an alias), or undefined when not given.
 * @throws ConfigError for an unknown name, listing the known ones.
 */
function reasoningParserName(name: string | undefined): string | undefined {
  if (name === undefined || isReasoningParserName(name)) return name;
  throw new ConfigError(`Unknown --reasoning-parser '${name}'; known: ${REASONING_PARSER_NAMES.join(", ")}.`);
}

function optionalInteger(value: string | undefined, flag: string): number | undefined {
  return value === undefined ? undefined : toInteger(value, flag);
}

/**
 * `--prefix-cache-scope`: `key` (the default) or `global`.
 * @throws ConfigError naming the flag for any other value.
 */
function prefixCacheScope(value: string | undefined): "key" | "global" {
  if (value === undefined || value === "key" || value === "global") return value ?? "key";
  throw new ConfigError(`--prefix-cache-scope must be 'key' or 'global', got '${value}'.`);
}

/** Settings whose flag is not their name in kebab case. */
const FLAG_NAMES: Record<string, string> = { apiKeys: "api-key" };

/**
 * A `ServeConfig` path as the flags and config keys spell it: `maxModelLen` is `--max-model-len (config
 * key 'max-model-len')`, `models.0.maxModelLen` is `models[0].max-model-len` (a config file's entry).
 */
function flagPath(path: readonly PropertyKey[]): string {
  const kebab = (key: string): string =>
    FLAG_NAMES[key] ?? key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`);
  const [head, ...rest] = path;
  if (head === "models" && typeof rest[0] === "number") {
    return `models[${rest[0]}]${rest
      .slice(1)
      .map((key) => `.${kebab(String(key))}`)
      .join("")}`;
  }
  if (typeof head !== "string") return path.map(String).join(".");
  const name = kebab(head);
  const inner = rest.map((key) => `.${String(key)}`).join("");
  return `--${name}${inner} (config key '${name}')`;
}

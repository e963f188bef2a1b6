/**
 * The `lmserve` command line: `lmserve serve [MODEL...] [flags]`, `lmserve pull MODEL`, `lmserve list`.
 * Flag names follow `vllm serve` where it has one, llama-server's otherwise.
 */
import { Command, CommanderError, Option } from "commander";
import { TOOL_PARSER_NAMES } from "../chat/index.ts";
import {
  ConfigError,
  DEFAULT_MAX_NUM_BATCHED_TOKENS,
  EMBEDDED_MODEL_OUTPUT_CAP,
  loadServeConfig,
  type ServeFlags,
} from "../config/serveConfig.ts";
import { DeviceUnavailableError } from "../engine/devices.ts";
import { KV_CACHE_TYPES } from "../engine/kvCacheTypes.ts";
import { ModelLoadError } from "../engine/ModelHost.ts";
import { NativeBuildError } from "../engine/native.ts";
import { ModelSourceError } from "../models/index.ts";
import { defaultModelAvailable, defaultModelPath } from "../paths.ts";
import { startServer } from "../startServer.ts";
import { serverVersion } from "../version.ts";
import { downloadDirFlag, downloadDirHelp, registerModelCommands } from "./modelCommands.ts";
import { addOperationsOptions, serveFlagsInfo } from "./operationsOptions.ts";

// A usage error is one line (commander's "Did you mean" suggestion folded in) and exit status 2, not the
// whole usage: `exitOverride` makes commander throw, and the catch at the end exits.
const program = new Command("lmserve")
  .description("OpenAI-compatible inference server for GGUF models")
  .version(serverVersion, "-V, --version", "print the version and exit")
  .exitOverride()
  .configureOutput({ outputError: (text, write) => write(`lmserve: ${oneLine(text)}\n`) });

program
  .command("serve")
  .description("serve one or more GGUF models over the OpenAI API")
  .argument(
    "[models...]",
    "GGUF file path(s), hf:owner/repo/file.gguf, hf:owner/repo:QUANT or https:// URL(s); default: ../shared/models/stories260K.gguf when present",
  )
  .option("-m, --model <model>", "the model to serve, as MODEL (vLLM's and llama-server's spelling)")
  .option("--host <host>", "address to listen on", "127.0.0.1")
  .option("--port <port>", "port to listen on (0 picks a free one)", "8000")
  .option(
    "--served-model-name <name...>",
    "name(s) the model is served under (first is its id); with several models, one per model",
  )
  .option(
    "--max-model-len <tokens>",
    "context tokens per sequence, also --ctx-size / -c (default: min(training context, 8192))",
  )
  .option("--max-num-seqs <n>", "concurrent sequences (slots) per model, also --parallel / -np", "4")
  .option("--max-waiting <n>", "requests allowed to wait for a slot; beyond it 503 (default: unbounded)")
  .option(
    "--request-timeout <seconds>",
    "longest a request may take from arrival to end; beyond it 504 (default: none)",
  )
  .option("--threads <n>", "CPU threads (default: all cores; 1 for models under 64 MB)")
  .option("--seed <n>", "seed for requests that give none (default: random per request)")
  .option("--chat-template <file>", "Jinja chat template file overriding the model's")
  .option("--mmproj <file>", "multimodal projector GGUF: the model takes images (image_url content parts)")
  .option(
    "--lora <NAME=PATH[:SCALE]>",
    "LoRA adapter GGUF served as model NAME on the (first) model, at SCALE (default 1); repeatable",
    (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
  )
  .option(
    "--max-loras <n>",
    "LoRA adapters with requests running at once per model (default: --max-num-seqs)",
  )
  .option("--enable-lora", "allow /v1/load_lora_adapter and export vllm:lora_requests_info (on with --lora)")
  .option(
    "--max-image-bytes <size>",
    "largest image a request may send or name, e.g. 20000000 or 16mb (default: 20000000)",
  )
  .option(
    "--allow-private-image-urls",
    "fetch image_url URLs from loopback and private addresses too (default: public addresses only)",
  )
  .option(
    "--tool-call-parser <name>",
    `tool-call parser for tool_choice auto: ${TOOL_PARSER_NAMES.join(", ")} (default: detected from the chat template)`,
  )
  .option(
    "--reasoning-parser <name>",
    "reasoning parser: deepseek_r1, qwen3, seed_oss, mistral, command_a, minimax_m3, hy_v3, gemma4, openai_gptoss, or a vLLM alias (default: detected from the chat template)",
  )
  .option(
    "--enable-auto-tool-choice",
    "accepted for vLLM compatibility; tool_choice auto is always on when a request has tools",
  )
  .option("--no-prefix-caching", "do not reuse cached prompt prefixes across requests")
  .addOption(
    new Option(
      "--prefix-cache-scope <scope>",
      "who shares cached prompt prefixes when a request gives no cache_salt: requests of the same API key (key, the default) or all (global)",
    ).choices(["key", "global"]),
  )
  .option("--trust-request-chat-template", "honour a request's own chat_template (it runs arbitrary Jinja)")
  .option(
    "--batch-invariant-seeds",
    "run requests that give a seed alone, so the same seed gives the same text under any load (costs throughput)",
  )
  .option("--no-batch-invariant-seeds", "let requests that give a seed share batches (the default)")
  .addOption(
    new Option(
      "--device <device>",
      "compute device: the first GPU backend found, else the CPU (auto)",
    ).choices(["auto", "cpu", "cuda", "vulkan"]),
  )
  .option(
    "--n-gpu-layers <n>",
    "layers to offload to the GPU, also -ngl (default: all; 0 keeps the weights on the CPU)",
  )
  .addOption(
    new Option(
      "--pooling <pooling>",
      "how /v1/embeddings pools a prompt (default: the GGUF's pooling_type, else mean); rank: a reranker's score",
    ).choices(["mean", "cls", "last", "rank"]),
  )
  .addOption(
    new Option(
      "--task <task>",
      "what the model serves (default auto: from the GGUF; an encoder with rank pooling reranks, another encoder embeds, else generate)",
    ).choices(["auto", "generate", "embed", "rerank"]),
  )
  .option(
    "--matryoshka-dimensions <widths>",
    "comma-separated shorter widths an embedding model was trained to give (Matryoshka, vLLM's matryoshka_dimensions); /v1/embeddings `dimensions` may name one; each at most the model's width (default: none, only the full width)",
  )
  .option(
    "--jump-forward",
    "guided decoding: append the text a grammar allows as its only continuation (a key name, a closing brace) without sampling it, as SGLang's jump-forward; changes token boundaries",
  )
  .addOption(
    new Option(
      "--cache-type-k <type>",
      "KV cache type of K, also -ctk; the q* and iq4_nl types need a head size that is a multiple of 32 (default: f16)",
    ).choices(KV_CACHE_TYPES),
  )
  .addOption(
    new Option(
      "--cache-type-v <type>",
      "KV cache type of V, also -ctv; a quantized V cache needs flash attention (default: f16)",
    ).choices(KV_CACHE_TYPES),
  )
  .option(
    "--flash-attn <mode>",
    "flash attention: auto, on or off, also -fa (default: auto, llama.cpp's choice for the device)",
  )
  .option(
    "--max-num-batched-tokens <n>",
    `tokens one engine step evaluates at most, decodes first then prompt chunks; at least --max-num-seqs (default: ${DEFAULT_MAX_NUM_BATCHED_TOKENS.cpu === DEFAULT_MAX_NUM_BATCHED_TOKENS.gpu ? DEFAULT_MAX_NUM_BATCHED_TOKENS.cpu : `${DEFAULT_MAX_NUM_BATCHED_TOKENS.cpu} on the CPU, ${DEFAULT_MAX_NUM_BATCHED_TOKENS.gpu} on a GPU`})`,
  )
  .option(
    "--kv-unified",
    "one KV buffer shared by every slot instead of one buffer per slot (llama.cpp's kv_unified, llama-server's -kvu; default: off)",
  )
  .option("--no-kv-unified", "one KV buffer per slot (the default; llama-server's -no-kvu)")
  .option("--no-ui", "do not serve the web UI (playground, dashboard) at /")
  .option(
    "--models-dir <dir>",
    "serve every GGUF of this folder (and of the download cache) on demand, loaded when first asked for (llama-server's router)",
  )
  .option(
    "--models-autoload",
    "load an unloaded model when a request names it (default: on with --models-dir)",
  )
  .option(
    "--no-models-autoload",
    "answer 503 model_not_loaded for an unloaded model; POST /models/load loads it",
  )
  .option(
    "--models-max <n>",
    "most models loaded at once; the least recently used idle one is unloaded (default: no limit)",
  )
  .option(
    "--memory-budget <size>",
    "most memory loaded models hold (weights + KV cache + projector, e.g. 8gb); idle ones are unloaded to fit (default: no limit)",
  )
  .option(
    "--idle-unload <seconds>",
    "unload a model idle this long; a request's keep_alive overrides (default: never)",
  )
  .option(downloadDirFlag, downloadDirHelp)
  .addOption(
    new Option("--log-level <level>", "log level").choices([
      "fatal",
      "error",
      "warn",
      "info",
      "debug",
      "trace",
      "silent",
    ]),
  )
  .addOption(
    new Option(
      "--log-format <format>",
      "log lines as JSON or readable text (default: pretty on a terminal, json otherwise)",
    ).choices(["json", "pretty"]),
  )
  .action(async (models: string[], flags: ServeFlags, serve: Command) => {
    try {
      const given =
        models.length > 0 ||
        flags.model !== undefined ||
        flags.config !== undefined ||
        flags.modelsDir !== undefined;
      const sources = given ? models : [defaultModel()];
      const loaded = loadServeConfig(sources, flags, process.env, serveFlagsInfo(serve, flags));
      // The embedded default model never ends a chat on its own: without --max-tokens-cap, a request that
      // omits max_tokens stops at EMBEDDED_MODEL_OUTPUT_CAP tokens instead of at the end of the context.
      const config =
        given || loaded.maxTokensCap !== undefined
          ? loaded
          : { ...loaded, defaultMaxTokens: EMBEDDED_MODEL_OUTPUT_CAP };
      await startServer(config);
    } catch (error) {
      fail(error);
    }
  });

addOperationsOptions(program.commands.find((command) => command.name() === "serve") as Command);
registerModelCommands(program, fail);

function defaultModel(): string {
  if (defaultModelAvailable()) return defaultModelPath;
  throw new ConfigError(
    `No model given and the default model ${defaultModelPath} is not present. Pass one: lmserve serve path/to/model.gguf`,
  );
}

/** Prints a one-line error and exits with status 2 for user errors, 1 for anything else. */
function fail(error: unknown): never {
  if (
    error instanceof ConfigError ||
    error instanceof ModelLoadError ||
    error instanceof ModelSourceError ||
    error instanceof DeviceUnavailableError ||
    error instanceof NativeBuildError
  ) {
    process.stderr.write(`lmserve: error: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(
    `lmserve: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
  );
  process.exit(1);
}

/**
 * llama-server's spellings that commander cannot declare (multi-letter short flags) and aliases of
 * flags with the same meaning, rewritten to our long flags before parsing (`--ctx-size=4096` too).
 */
const FLAG_ALIASES: Record<string, string> = {
  "-ngl": "--n-gpu-layers",
  "--ctx-size": "--max-model-len",
  "-c": "--max-model-len",
  "-np": "--max-num-seqs",
  "--parallel": "--max-num-seqs",
  "-ctk": "--cache-type-k",
  "-ctv": "--cache-type-v",
  "-fa": "--flash-attn",
};

/** An argument with its flag alias replaced (`-c 4096`, `--ctx-size=4096`). */
function unalias(arg: string): string {
  const equals = arg.indexOf("=");
  const flag = equals < 0 ? arg : arg.slice(0, equals);
  const target = arg.startsWith("-") ? FLAG_ALIASES[flag] : undefined;
  return target === undefined ? arg : target + (equals < 0 ? "" : arg.slice(equals));
}

/** Commander's error text as one line: "error: unknown option '--prot' (did you mean --port?)". */
function oneLine(text: string): string {
  return text
    .trim()
    .replace(/\s*\n\(Did you mean (.+)\?\)/, " (did you mean $1?)")
    .replace(/\s*\n\s*/g, " ");
}

try {
  await program.parseAsync(process.argv.map(unalias));
} catch (error) {
  // Help and --version exit 0; any usage error (already printed as one line) exits 2.
  if (!(error instanceof CommanderError)) fail(error);
  process.exit(error.exitCode === 0 ? 0 : 2);
}

/**
 * The `lmserve` command line: `lmserve serve [MODEL...] [flags]`, `lmserve pull MODEL`, `lmserve list`.
 * Flag names follow `vllm serve` where it has one, llama-server's otherwise.
 */
import { Command, Option } from "commander";
import { downloadDirFlag, downloadDirHelp, registerModelCommands } from "./cliModelCommands.ts";
import { addOperationsOptions, serveFlagsInfo } from "./cliOperationsOptions.ts";
import { ConfigError, loadServeConfig, type ServeFlags } from "./config.ts";
import { DeviceUnavailableError } from "./engine/devices.ts";
import { ModelLoadError } from "./engine/ModelHost.ts";
import { NativeBuildError } from "./engine/native.ts";
import { ModelSourceError } from "./models/index.ts";
import { defaultModelAvailable, defaultModelPath } from "./paths.ts";
import { startServer } from "./startServer.ts";

const program = new Command("lmserve")
  .description("OpenAI-compatible inference server for GGUF models")
  .showHelpAfterError()
  .configureOutput({ outputError: (text, write) => write(`lmserve: ${text}`) });

program
  .command("serve")
  .description("serve one or more GGUF models over the OpenAI API")
  .argument(
    "[models...]",
    "GGUF file path(s), hf:owner/repo/file.gguf, hf:owner/repo:QUANT or https:// URL(s); default: ../shared/models/stories260K.gguf when present",
  )
  .option("--host <host>", "address to listen on", "127.0.0.1")
  .option("--port <port>", "port to listen on (0 picks a free one)", "8000")
  .option(
    "--served-model-name <name...>",
    "name(s) the model is served under (first is its id); with several models, one per model",
  )
  .option("--max-model-len <tokens>", "context tokens per sequence (default: min(training context, 8192))")
  .option("--max-num-seqs <n>", "concurrent sequences (slots) per model", "4")
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
    "--max-image-bytes <size>",
    "largest image a request may send or name, e.g. 20000000 or 16mb (default: 20000000)",
  )
  .option(
    "--allow-private-image-urls",
    "fetch image_url URLs from loopback and private addresses too (default: public addresses only)",
  )
  .option(
    "--tool-call-parser <name>",
    "tool-call parser for tool_choice auto: hermes, llama3_json, mistral, generic (default: detected from the chat template)",
  )
  .option(
    "--reasoning-parser <name>",
    "reasoning parser for <think> output: deepseek_r1, qwen3 (default: detected from the chat template)",
  )
  .option("--no-prefix-caching", "do not reuse cached prompt prefixes across requests")
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
  .option(
    "--no-kv-unified",
    "give each slot its own KV buffer instead of one shared buffer (llama.cpp's kv_unified)",
  )
  .option("--no-ui", "do not serve the web UI (playground, dashboard) at /")
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
  .action(async (models: string[], flags: ServeFlags, serve: Command) => {
    try {
      const sources = models.length > 0 || flags.config !== undefined ? models : [defaultModel()];
      const config = loadServeConfig(sources, flags, process.env, serveFlagsInfo(serve, flags));
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

/** llama-server's spellings that commander cannot declare (multi-letter short flags), as our long flags. */
const LLAMA_SERVER_ALIASES: Record<string, string> = { "-ngl": "--n-gpu-layers" };

await program.parseAsync(process.argv.map((arg) => LLAMA_SERVER_ALIASES[arg] ?? arg));

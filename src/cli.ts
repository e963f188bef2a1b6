/**
 * The `lmserve` command line: `lmserve serve [MODEL...] [flags]`. Flag names follow `vllm serve`
 * where it has one, llama-server's otherwise.
 */
import { Command, Option } from "commander";
import { ConfigError, loadServeConfig, type ServeFlags } from "./config.ts";
import { ModelLoadError } from "./engine/ModelHost.ts";
import { defaultModelAvailable, defaultModelPath } from "./paths.ts";
import { startServer } from "./startServer.ts";

const program = new Command("lmserve")
  .description("OpenAI-compatible inference server for GGUF models")
  .showHelpAfterError()
  .configureOutput({ outputError: (text, write) => write(`lmserve: ${text}`) });

program
  .command("serve")
  .description("serve one or more GGUF models over the OpenAI API")
  .argument("[models...]", "GGUF model file(s); default: ../shared/models/stories260K.gguf when present")
  .option("--host <host>", "address to listen on", "127.0.0.1")
  .option("--port <port>", "port to listen on (0 picks a free one)", "8000")
  .option(
    "--served-model-name <name...>",
    "name(s) the model is served under (first is its id); with several models, one per model",
  )
  .option("--max-model-len <tokens>", "context tokens per sequence (default: min(training context, 8192))")
  .option("--max-num-seqs <n>", "concurrent sequences (slots) per model", "4")
  .option("--max-waiting <n>", "requests allowed to wait for a slot; beyond it 503 (default: unbounded)")
  .option("--threads <n>", "CPU threads (default: all cores; 1 for models under 64 MB)")
  .option("--seed <n>", "seed for requests that give none (default: random per request)")
  .option("--chat-template <file>", "Jinja chat template file overriding the model's")
  .option("--no-prefix-caching", "do not reuse cached prompt prefixes across requests")
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
  .action(async (models: string[], flags: ServeFlags) => {
    try {
      const sources = models.length > 0 ? models : [defaultModel()];
      const config = loadServeConfig(sources, flags, process.env);
      await startServer(config);
    } catch (error) {
      fail(error);
    }
  });

function defaultModel(): string {
  if (defaultModelAvailable()) return defaultModelPath;
  throw new ConfigError(
    `No model given and the default model ${defaultModelPath} is not present. Pass one: lmserve serve path/to/model.gguf`,
  );
}

/** Prints a one-line error and exits with status 2 for user errors, 1 for anything else. */
function fail(error: unknown): never {
  if (error instanceof ConfigError || error instanceof ModelLoadError) {
    process.stderr.write(`lmserve: error: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(
    `lmserve: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
  );
  process.exit(1);
}

await program.parseAsync(process.argv);

/**
 * Runs `lmserve` with its decode batches counted, without touching `src/`:
 * `node --import tsx bench/lib/serverProbe.ts serve MODEL [flags]` takes the same arguments as
 * `bin/lmserve.js`. Every context the server creates gets a {@link BatchRecorder} as its
 * `batching.itemPrioritizationStrategy` wrapper (the server's own strategy still decides) and a timer
 * around `decodeBatch`, and sequences' KV-cache erasures are timed. On SIGUSR2 the process prints the statistics since the previous SIGUSR2 as
 * one line on stderr, prefixed with `PROBE_LINE_PREFIX` (`engineProtocol.ts`).
 *
 * An entry script rather than an `--import` preload: node-llama-cpp forks a binary-test process with
 * the parent's `execArgv`, and a preload that imports node-llama-cpp breaks that test.
 */
import { type LlamaContextOptions, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { BatchRecorder } from "./batchProbe.ts";
import { PROBE_LINE_PREFIX } from "./engineProtocol.ts";

const recorder = new BatchRecorder();
recorder.instrumentErasure(LlamaContextSequence);
const createContext = LlamaModel.prototype.createContext;

LlamaModel.prototype.createContext = async function probedCreateContext(
  this: LlamaModel,
  options: LlamaContextOptions = {},
) {
  const context = await createContext.call(this, {
    ...options,
    batching: {
      ...options.batching,
      // The server's own strategy decides; the recorder only watches (node-llama-cpp's default if none).
      itemPrioritizationStrategy:
        typeof options.batching?.itemPrioritizationStrategy === "function"
          ? recorder.around(options.batching.itemPrioritizationStrategy)
          : recorder.strategy,
    },
  });
  recorder.attach(context);
  return context;
};

process.on("SIGUSR2", () => {
  process.stderr.write(`${PROBE_LINE_PREFIX}${JSON.stringify(recorder.take())}\n`);
});

// What bin/lmserve.js runs once tsx is registered (here by `--import tsx`).
await import("../../src/cli/main.ts");

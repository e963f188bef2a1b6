/**
 * The benchmark's "bare engine": the same workload as the server's, straight through node-llama-cpp
 * without HTTP, in its own process so it does not share the driver's event loop. One model, one context
 * of `--sequences` sequences and `--threads` threads (the server's `ModelHost` settings: CPU build,
 * `batchSize` min(512, context)); one sequence per worker, each request a `sequence.evaluate` loop
 * counting `outputTokens` tokens whatever they are (EOS included, `yieldEogToken: true`).
 *
 * Usage (normally spawned by `bench/serve.ts`):
 *   npx tsx bench/lib/bareEngine.ts --model FILE [--context 1024] [--sequences 8] [--threads 2] [--no-probe]
 *     [--defer-reloop] [--yield-per-token]
 * Both flags are experiments, not the baseline: `--defer-reloop` see `deferReloop.ts`;
 * `--yield-per-token` waits one macrotask (`setImmediate`) after each token before asking for the
 * next, so the context's batch loop finds its queue empty, ends, and lets waiting KV-cache erasures
 * (a new request's `clearHistory`) take the context lock between batches.
 * Then one JSON command per line on stdin, one reply per line on stdout (see `engineProtocol.ts`);
 * the process exits when stdin ends. Exit code 1 when the model cannot be loaded.
 */
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { getLlama, LlamaContextSequence, LlamaLogLevel, type Token } from "node-llama-cpp";
import { BatchRecorder } from "./batchProbe.ts";
import { deferReloop } from "./deferReloop.ts";
import {
  ENGINE_LINE_PREFIX,
  type EngineCommand,
  type EngineReply,
  type PrefixRaw,
} from "./engineProtocol.ts";
import { ArrivalRecorder, closedLoop, type RequestTiming } from "./stats.ts";
import type { Sampling } from "./workload.ts";

function send(reply: EngineReply): void {
  process.stdout.write(`${ENGINE_LINE_PREFIX}${JSON.stringify(reply)}\n`);
}

/**
 * One request on one sequence: clears it, evaluates the prompt and samples `outputTokens` tokens,
 * timing each token's arrival from before the clear (the server's TTFT includes its clear too).
 */
async function generate(
  sequence: LlamaContextSequence,
  prompt: readonly number[],
  outputTokens: number,
  sampling: Sampling,
  yieldPerToken: boolean,
): Promise<RequestTiming> {
  const recorder = new ArrivalRecorder();
  await sequence.clearHistory();
  const tokens = sequence.evaluate(prompt as Token[], { ...sampling, yieldEogToken: true });
  try {
    for await (const _token of tokens) {
      recorder.arrive(1);
      if (recorder.count >= outputTokens) break;
      if (yieldPerToken) await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    await tokens.return(undefined);
  }
  return recorder.finish(performance.now());
}

/** Evaluates `rest` on `sequence` up to its first sampled token; returns that token's arrival time. */
async function firstTokenAt(
  sequence: LlamaContextSequence,
  rest: readonly number[],
  sampling: Sampling,
): Promise<number> {
  const tokens = sequence.evaluate(rest as Token[], { ...sampling, yieldEogToken: true });
  try {
    await tokens.next();
    return performance.now();
  } finally {
    await tokens.return(undefined);
  }
}

/**
 * The prefix-cache scenario on one sequence: prefix + suffix A from scratch, then prefix + suffix B
 * reusing the prefix (erase what follows it, evaluate the suffix only), as the server's slots do.
 * TTFTs include the clear / erase, as the server's do.
 */
async function prefixScenario(
  sequence: LlamaContextSequence,
  prefix: readonly number[],
  suffixes: readonly [readonly number[], readonly number[]],
  sampling: Sampling,
): Promise<PrefixRaw> {
  const start = performance.now();
  await sequence.clearHistory();
  const uncachedTtftMs = (await firstTokenAt(sequence, [...prefix, ...suffixes[0]], sampling)) - start;
  const secondStart = performance.now();
  await sequence.eraseContextTokenRanges([{ start: prefix.length, end: sequence.nextTokenIndex }]);
  const cachedTtftMs = (await firstTokenAt(sequence, suffixes[1], sampling)) - secondStart;
  return { uncachedTtftMs, cachedTtftMs, cachedTokens: prefix.length };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      context: { type: "string", default: "1024" },
      sequences: { type: "string", default: "8" },
      threads: { type: "string", default: "2" },
      "no-probe": { type: "boolean", default: false },
      "defer-reloop": { type: "boolean", default: false },
      "yield-per-token": { type: "boolean", default: false },
    },
  });
  if (!values.model) throw new Error("--model FILE is required");
  const contextSize = Number(values.context);
  const sequenceCount = Number(values.sequences);
  const threads = Number(values.threads);
  const recorder = values["no-probe"] ? null : new BatchRecorder();
  recorder?.instrumentErasure(LlamaContextSequence);

  const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error, build: "never" });
  const model = await llama.loadModel({ modelPath: values.model });
  const batchSize = Math.min(512, contextSize);
  const context = await model.createContext({
    sequences: sequenceCount,
    contextSize,
    threads,
    batchSize,
    ...(recorder ? { batching: { itemPrioritizationStrategy: recorder.strategy } } : {}),
  });
  const timed = recorder?.attach(context) ?? false;
  const sequences: LlamaContextSequence[] = [];
  while (context.sequencesLeft > 0) sequences.push(context.getSequence());
  const deferred = values["defer-reloop"] && sequences.every((sequence) => deferReloop(sequence));
  const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens as unknown[];
  send({
    ready: true,
    info: {
      vocabSize: vocab.length,
      trainContextSize: model.trainContextSize,
      contextSize: context.contextSize,
      sequences: sequences.length,
      threads,
      batchSize,
      probe: recorder !== null && timed,
      deferReloop: deferred,
      yieldPerToken: values["yield-per-token"] ?? false,
    },
  });

  const handle = async (command: EngineCommand): Promise<EngineReply> => {
    switch (command.cmd) {
      case "tokenize":
        return { id: command.id, ok: true, tokens: model.tokenize(command.text, false) as number[] };
      case "run": {
        if (command.prompts.length > sequences.length) {
          throw new Error(`concurrency ${command.prompts.length} > ${sequences.length} sequences`);
        }
        recorder?.take();
        const level = await closedLoop(command.prompts, (worker, prompt) =>
          generate(
            sequences[worker] as LlamaContextSequence,
            prompt,
            command.outputTokens,
            command.sampling,
            values["yield-per-token"] ?? false,
          ),
        );
        return { id: command.id, ok: true, level, batch: recorder?.take() ?? null };
      }
      case "prefix": {
        const sequence = sequences[0] as LlamaContextSequence;
        const prefix = await prefixScenario(sequence, command.prefix, command.suffixes, command.sampling);
        return { id: command.id, ok: true, prefix };
      }
    }
  };

  // Commands run one at a time, in order.
  let queue = Promise.resolve();
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    if (line.trim() === "") return;
    const command = JSON.parse(line) as EngineCommand;
    queue = queue.then(async () => {
      try {
        send(await handle(command));
      } catch (error) {
        send({ id: command.id, ok: false, error: error instanceof Error ? error.message : String(error) });
      }
    });
  });
  await new Promise<void>((resolve) => lines.once("close", resolve));
  await queue;
  await context.dispose();
  await model.dispose();
}

main().catch((error: unknown) => {
  process.stderr.write(`bareEngine: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

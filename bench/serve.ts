/**
 * The serving benchmark of issue 4 (`npm run bench`): the real `lmserve` server over HTTP against the
 * same workload run straight through node-llama-cpp ("bare engine", in a child process), interleaved
 * per concurrency level so both see the same machine load.
 *
 * Workload: closed loop at concurrency 1, 2, 4, 8; 32-token prompts (token ids, so both sides evaluate
 * the same tokens), 64 completion tokens (`ignore_eos`), temperature 0.7, top_k 40, top_p 0.95,
 * min_p 0.05, no seed; max(4, ceil(8 / concurrency)) requests per worker after one warm-up request per
 * side, run as two closed-loop blocks per side in ABBA order (`lib/runLevel.ts`). Then the prefix-cache scenario: a 1,000-token shared prefix with two different 16-token
 * suffixes, TTFT of the first (uncached) and of the second (cached) request, three times.
 *
 * Usage:
 *   npm run bench -- [--model FILE] [--quick] [--concurrency 1,2,4,8] [--requests N] [--no-probe]
 *     [--defer-reloop] [--quiet-wait SECONDS] [--out DIR] [--help]
 *
 * Without `--model` it uses `bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf`, generating it first
 * (`bench/make-model.ts`'s `main`) when missing. Writes `DIR/latest.md` and `DIR/latest.svg` (DIR
 * defaults to `bench/results`) and prints the tables. Before each level and each prefix trial it waits
 * (up to `--quiet-wait` seconds, default 300; 0 = never) until other processes use less than 15% of
 * the machine, and it reports how much CPU they took during each level. Exit code 0 on success, 1 on a failure.
 */
import { mkdirSync, statSync } from "node:fs";
import { loadavg } from "node:os";
import { basename, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { projectRoot } from "../src/paths.ts";
import { cpuWindow, waitForQuiet } from "./lib/cpuMonitor.ts";
import { EngineClient } from "./lib/engineClient.ts";
import {
  type BenchReport,
  batchTable,
  type LevelPair,
  type PrefixTrial,
  prefixTable,
  renderMarkdown,
  renderSvg,
  resultsTable,
  targetsTable,
} from "./lib/report.ts";
import {
  cpuFacts,
  DEFAULT_MODEL,
  ensureModel,
  gitRevision,
  loadFacts,
  packageVersion,
  writeAtomic,
} from "./lib/runInfo.ts";
import { measureLevel } from "./lib/runLevel.ts";
import { ServerTarget } from "./lib/serverTarget.ts";
import {
  exactLength,
  FULL_WORKLOAD,
  QUICK_WORKLOAD,
  SAMPLING,
  syntheticText,
  type Workload,
} from "./lib/workload.ts";

const MAX_NUM_SEQS = 8;
const THREADS = 2;
const MAX_MODEL_LEN = 1024;
/** Aggregate tok/s of llama-server at concurrency 8 on this machine (issue 4). */
const LLAMA_SERVER_AT_8 = 67;
/** First words of the prefix-cache scenario's prefixes, one per trial. */
const PREFIX_LEADS = ["Reference", "Archive", "Manual", "Chronicle", "Ledger"];
/** Other processes' CPU share (percent of the machine) under which it counts as quiet. */
const QUIET_THRESHOLD = 15;

const USAGE = `Usage: npm run bench -- [options]
  --model FILE        GGUF to serve (default bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf, made if missing)
  --quick             concurrency 1 and 4 only, one request per worker, one prefix trial
  --concurrency LIST  comma-separated levels (default 1,2,4,8; at most ${MAX_NUM_SEQS})
  --requests N        requests per worker (default max(4, ceil(8 / concurrency)))
  --no-probe          do not count decode batches (server run plainly, without bench/lib/serverProbe.ts)
  --defer-reloop      also run a second bare engine with the batch-filling experiment (bench/lib/deferReloop.ts)
  --quiet-wait S      wait up to S seconds (default 300, 0 = never) before each level for other
                      processes to use < ${QUIET_THRESHOLD}% of the CPU
  --out DIR           where latest.md and latest.svg go (default bench/results)
`;

const log = (line: string) => process.stderr.write(`${line}\n`);

function parseCli(argv: string[]): {
  workload: Workload;
  modelPath: string;
  probe: boolean;
  deferred: boolean;
  quietWaitMs: number;
  outDir: string;
} | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: "string" },
      quick: { type: "boolean", default: false },
      concurrency: { type: "string" },
      requests: { type: "string" },
      "no-probe": { type: "boolean", default: false },
      "defer-reloop": { type: "boolean", default: false },
      "quiet-wait": { type: "string", default: "300" },
      out: { type: "string" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) return null;
  let workload: Workload = values.quick ? QUICK_WORKLOAD : FULL_WORKLOAD;
  if (values.concurrency) {
    const levels = values.concurrency.split(",").map(Number);
    if (levels.some((level) => !Number.isInteger(level) || level < 1 || level > MAX_NUM_SEQS)) {
      throw new Error(`--concurrency: integers 1..${MAX_NUM_SEQS}, comma-separated`);
    }
    workload = { ...workload, concurrencies: levels };
  }
  if (values.requests) {
    const count = Number(values.requests);
    if (!Number.isInteger(count) || count < 1) throw new Error("--requests: a positive integer");
    workload = { ...workload, requestsPerWorker: () => count };
  }
  return {
    workload,
    modelPath: values.model ? resolve(values.model) : DEFAULT_MODEL,
    probe: !values["no-probe"],
    deferred: values["defer-reloop"],
    quietWaitMs: parseSeconds(values["quiet-wait"]),
    outDir: resolve(values.out ?? resolve(projectRoot, "bench/results")),
  };
}

function parseSeconds(text: string): number {
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 0) throw new Error("--quiet-wait: a number of seconds >= 0");
  return seconds * 1000;
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  if (!cli) {
    process.stdout.write(USAGE);
    return;
  }
  const { workload, modelPath, probe, deferred, quietWaitMs, outDir } = cli;
  await ensureModel(modelPath, log);
  const loadAtStart = loadavg();
  const flags = [
    "--max-num-seqs",
    String(MAX_NUM_SEQS),
    "--threads",
    String(THREADS),
    "--max-model-len",
    String(MAX_MODEL_LEN),
  ];
  log(`starting the server and the bare engine on ${relative(projectRoot, modelPath)} ...`);
  const engineOptions = {
    modelPath,
    contextSize: MAX_MODEL_LEN,
    sequences: MAX_NUM_SEQS,
    threads: THREADS,
    probe,
  };
  const started = await Promise.allSettled([
    ServerTarget.start({ modelPath, flags, probe }),
    EngineClient.start(engineOptions),
    deferred ? EngineClient.start({ ...engineOptions, deferReloop: true }) : Promise.resolve(null),
  ] as const);
  const stopAll = () =>
    Promise.all(started.map((start) => (start.status === "fulfilled" ? start.value?.stop() : undefined)));
  const [serverStart, engineStart, deferredStart] = started;
  if (
    serverStart.status === "rejected" ||
    engineStart.status === "rejected" ||
    deferredStart.status === "rejected"
  ) {
    await stopAll();
    throw started.find((start): start is PromiseRejectedResult => start.status === "rejected")?.reason;
  }
  const server = serverStart.value;
  const engine = engineStart.value;
  const deferredEngine = deferredStart.value;
  try {
    const metricsRoute = (await server.metrics()) !== null;
    const ourPids = [process.pid, server.pid, engine.pid, ...(deferredEngine ? [deferredEngine.pid] : [])];
    const waitQuiet = async () => {
      if (quietWaitMs <= 0) return;
      const others = await waitForQuiet(ourPids, quietWaitMs, QUIET_THRESHOLD, (busy) =>
        log(`  waiting: other processes use ${busy.toFixed(0)}% of the CPU`),
      );
      if (others !== null && others >= QUIET_THRESHOLD)
        log(`  still busy (${others.toFixed(0)}%): measuring anyway`);
    };
    let seed = 1;
    const prompt = async (length: number, lead: string, words: number) =>
      exactLength(await engine.tokenize(syntheticText(seed++, words, lead)), length, `${lead} prompt`);
    const levelPrompts = async (concurrency: number) => {
      const perWorker = workload.requestsPerWorker(concurrency);
      const prompts: number[][][] = [];
      for (let worker = 0; worker < concurrency; worker++) {
        const queue: number[][] = [];
        for (let i = 0; i < perWorker; i++) queue.push(await prompt(workload.promptTokens, "Story", 48));
        prompts.push(queue);
      }
      return prompts;
    };

    log("warm-up: one request on each side");
    await server.complete(await prompt(workload.promptTokens, "Story", 48), workload.outputTokens, SAMPLING);
    await engine.run([[await prompt(workload.promptTokens, "Story", 48)]], workload.outputTokens, SAMPLING);
    await deferredEngine?.run(
      [[await prompt(workload.promptTokens, "Story", 48)]],
      workload.outputTokens,
      SAMPLING,
    );

    const levels: LevelPair[] = [];
    for (const [index, concurrency] of workload.concurrencies.entries()) {
      const prompts = await levelPrompts(concurrency);
      await waitQuiet();
      const load = loadavg()[0] ?? Number.NaN;
      const endWindow = cpuWindow(ourPids);
      const serverFirst = index % 2 === 0;
      log(
        `concurrency ${concurrency}: ${concurrency * (prompts[0]?.length ?? 0)} requests per side, load ${load.toFixed(2)}`,
      );
      const level = await measureLevel(
        {
          server: async (block) => {
            await server.takeBatchStats();
            const raw = await server.run(block, workload.outputTokens, SAMPLING);
            return { level: raw, batch: await server.takeBatchStats() };
          },
          engine: (block) => engine.run(block, workload.outputTokens, SAMPLING),
          ...(deferredEngine
            ? {
                deferred: (block: number[][][]) => deferredEngine.run(block, workload.outputTokens, SAMPLING),
              }
            : {}),
        },
        prompts,
        serverFirst,
        load,
      );
      const share = endWindow();
      level.othersCpu = share ? share.others : null;
      levels.push(level);
      const serverSummary = level.server;
      const engineSummary = level.engine;
      log(
        `  server ${serverSummary.aggTokPerS.toFixed(1)} tok/s, engine ${engineSummary.aggTokPerS.toFixed(1)} tok/s, ` +
          `ratio ${(serverSummary.aggTokPerS / engineSummary.aggTokPerS).toFixed(2)}` +
          (level.deferred
            ? `; engine with deferred re-loop ${level.deferred.aggTokPerS.toFixed(1)} tok/s`
            : ""),
      );
    }

    const trials: PrefixTrial[] = [];
    for (let trial = 0; trial < workload.prefixTrials; trial++) {
      await waitQuiet();
      log(`prefix cache trial ${trial + 1}/${workload.prefixTrials}`);
      // A different first word per trial, so no slot holds the start of the new prefix.
      const lead = PREFIX_LEADS[trial % PREFIX_LEADS.length] as string;
      const prefix = await prompt(workload.prefixTokens, lead, Math.ceil(workload.prefixTokens * 1.1));
      const suffixA = await prompt(workload.suffixTokens, "\nQuestion", workload.suffixTokens * 2);
      const suffixB = await prompt(workload.suffixTokens, "\nTask", workload.suffixTokens * 2);
      const runServer = async () => {
        const first = await server.complete([...prefix, ...suffixA], 4, SAMPLING);
        const second = await server.complete([...prefix, ...suffixB], 4, SAMPLING);
        return {
          raw: {
            uncachedTtftMs: first.ttftMs,
            cachedTtftMs: second.ttftMs,
            cachedTokens: second.cachedTokens,
          },
          firstCached: first.cachedTokens,
        };
      };
      const runEngine = () => engine.prefix(prefix, [suffixA, suffixB], SAMPLING);
      const serverFirst = trial % 2 === 0;
      const serverResult = serverFirst ? await runServer() : undefined;
      const engineResult = await runEngine();
      const serverFinal = serverResult ?? (await runServer());
      if (serverFinal.firstCached > 0)
        log(`  note: the uncached request reused ${serverFinal.firstCached} tokens`);
      trials.push({
        server: serverFinal.raw,
        engine: engineResult,
        serverCachedTokens: serverFinal.raw.cachedTokens,
      });
    }

    const report: BenchReport = {
      date: new Date().toISOString(),
      machine: [
        cpuFacts(),
        `Load average (1/5/15 min) at start: ${loadFacts(loadAtStart)}; at end: ${loadFacts()} (the machine is shared with other test runs)`,
        `Node ${process.version}, node-llama-cpp ${packageVersion("node-llama-cpp")}, lmserve revision ${gitRevision()}`,
      ],
      setup: [
        `Model: \`${basename(modelPath)}\` (${(statSync(modelPath).size / 2 ** 20).toFixed(0)} MiB)`,
        `Server: \`lmserve serve MODEL ${flags.join(" ")} --port 0\`${probe ? " run through `bench/lib/serverProbe.ts` (counts decode batches)" : ""}; /metrics ${metricsRoute ? "present" : "absent"}`,
        `Bare engine: one context, ${engine.info.sequences} sequences x ${engine.info.contextSize} tokens, ${engine.info.threads} threads, batchSize ${engine.info.batchSize}, CPU build; one sequence per worker, \`sequence.evaluate\` loop`,
        `Workload: closed loop, ${workload.promptTokens}-token prompts (token ids, same on both sides), ${workload.outputTokens} tokens out (\`ignore_eos\`), temperature ${SAMPLING.temperature}, top_k ${SAMPLING.topK}, top_p ${SAMPLING.topP}, min_p ${SAMPLING.minP}, no seed; requests per worker: ${workload.concurrencies.map((c) => `${workload.requestsPerWorker(c)} at ${c}`).join(", ")}; with 2+ per worker each side runs two closed-loop blocks in ABBA order (\`bench/lib/runLevel.ts\`); one warm-up request per side first`,
        `Server requests: streamed \`/v1/completions\` with \`stream_options.continuous_usage_stats\`; TTFT = request sent to first token chunk received; ITL = gap between token arrivals (a chunk carrying k tokens counts as k gaps of 1/k its wait)`,
        `Prefix cache: ${workload.prefixTokens}-token shared prefix + ${workload.suffixTokens}-token suffix, 4 tokens out; the second request has another suffix; ${workload.prefixTrials} trial(s), each with its own prefix`,
      ],
      levels,
      prefix: trials,
      llamaServerAt8: LLAMA_SERVER_AT_8,
      workloadLabel: `concurrency (closed loop, ${workload.promptTokens}-token prompts, ${workload.outputTokens} tokens out)`,
      notes: [
        "agg tok/s = completion tokens of the level / wall time from the first request's start to the last one's end (the tail, where fewer workers remain, is included on both sides).",
        "p99 of a few requests is close to their maximum.",
        "Decode batches: one row per decodeBatch call of the context; a generation step is a batch of single-token items (one per sequence); `decodeBatch share of wall` = time inside llama.cpp's decodeBatch / the level's wall time; KV erasures = each request's `clearHistory` / `eraseContextTokenRanges` before its prompt, timed (they wait for the context lock, which node-llama-cpp's batch loop holds while any sequence has a decode queued).",
        "The server samples with its EOS ban (`ignore_eos` -> tokenBias) and a per-request seed; the bare engine samples with neither and counts EOS like any token.",
      ],
    };
    const markdown = renderMarkdown(report);
    mkdirSync(outDir, { recursive: true });
    writeAtomic(resolve(outDir, "latest.md"), markdown);
    writeAtomic(resolve(outDir, "latest.svg"), renderSvg(report));
    process.stdout.write(
      `\n${resultsTable(levels)}\n\n${prefixTable(trials)}\n\n${batchTable(levels)}\n\n${targetsTable(report)}\n\n` +
        `wrote ${relative(projectRoot, resolve(outDir, "latest.md"))} and latest.svg\n`,
    );
  } finally {
    await stopAll();
  }
}

main().catch((error: unknown) => {
  log(`bench: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});

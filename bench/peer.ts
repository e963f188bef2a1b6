/**
 * `npm run bench:peer` (issue 13): lmserve against llama.cpp's own `llama-server`, built from the
 * exact llama.cpp source node-llama-cpp ships (`lib/peerBuild.ts`, cached in `bench/.peer/`), on the
 * same synthetic model and identical HTTP workloads. The servers run alternately, one at a time (two
 * llama.cpp processes on 2 cores would fight), in ABBA order over rounds.
 *
 * Workloads (`lib/peerWorkloads.ts`): 64-token streams, temperature 0.7 / top_k 40 / top_p 0.95 /
 * min_p 0.05, one shared `logit_bias` banning special and partial-UTF-8 tokens (`lib/tokenBans.ts`):
 * plain completions at concurrency 1, 4, 8; plain chat at 1, 4; `logprobs: 5` at 1, 4; a `seed` per
 * request at 4; guided JSON (chat, `response_format` json_schema) at 1, 4; `prompt_logprobs: 1` on a
 * 500-token prompt against the same without, non-streamed (`prompt_logprobs` does not stream; lmserve
 * only); a 1,000-token shared prefix, cached against uncached TTFT; the `vllm bench serve` workload
 * (`serve`: random 1,024-token prompts, 128 tokens out, concurrency 1, 4, 8, all queued at once; TTFT,
 * TPOT, ITL, E2EL, req/s, tok/s as vLLM defines them, `lib/serveBench.ts`) and the same with shared
 * prefixes (`shared-prefix`: 2 prefixes of 768 tokens, 256 own tokens each). Also RSS after warm-up and
 * one `llama-batched-bench` run.
 *
 * Usage:
 *   npm run bench:peer -- [--rounds N] [--quick] [--only GROUPS] [--model FILE] [--peer-dir DIR]
 *     [--lmserve-args="..."] [--llama-server-args="..."] [--quiet-wait S] [--out FILE] [--help]
 *
 * Writes `bench/results/peer.md` (or `--out`) and prints the tables. Exit code 0 on success, 1 on a
 * failure.
 */
import { mkdirSync, statSync } from "node:fs";
import { loadavg } from "node:os";
import { basename, dirname, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { projectRoot } from "../src/paths.ts";
import { cpuWindow, waitForQuiet } from "./lib/cpuMonitor.ts";
import { ensurePeerBinaries, type PeerBinaries } from "./lib/peerBuild.ts";
import { completeRequest, streamRequest } from "./lib/peerClient.ts";
import {
  consoleTables,
  type LevelResult,
  type PairResult,
  type PeerReport,
  renderMarkdown,
  type ServeResult,
} from "./lib/peerReport.ts";
import {
  type PeerName,
  type PeerServer,
  residentMiB,
  runBatchedBench,
  startLlamaServer,
  startLmserve,
} from "./lib/peerServer.ts";
import {
  allWorkloads,
  baseFields,
  GROUPS,
  OUTPUT_TOKENS,
  type PeerWorkload,
  PREFIX_TOKENS,
  PROMPT_LOGPROBS_TOKENS,
  PROMPT_TOKENS,
  requestsPerWorker,
  SERVE_INPUT_TOKENS,
  SERVE_OUTPUT_TOKENS,
  SHARED_PREFIX_TOKENS,
  SHARED_PREFIXES,
  SUFFIX_TOKENS,
  serveRequests,
  type ThroughputWorkload,
} from "./lib/peerWorkloads.ts";
import {
  cpuFacts,
  DEFAULT_MODEL,
  ensureModel,
  gitRevision,
  loadFacts,
  packageVersion,
  writeAtomic,
} from "./lib/runInfo.ts";
import { queuedAtOnce, summariseServe } from "./lib/serveBench.ts";
import { closedLoop, summarise } from "./lib/stats.ts";
import { banBias, bannedTokens } from "./lib/tokenBans.ts";
import { exactLength, syntheticText } from "./lib/workload.ts";

const SLOTS = 8;
/** Tokens per slot: a `serve` request's 1,024 prompt tokens and 128 output tokens fit. */
const SLOT_CONTEXT = 1280;
const THREADS = 2;
/** Other processes' CPU share (percent of the machine) under which it counts as quiet. */
const QUIET_THRESHOLD = 15;
/** `--only` name of the llama-batched-bench run. */
const BATCHED = "batched";

const USAGE = `Usage: npm run bench:peer -- [options]
  --rounds N               rounds; each runs both servers, one after the other (default 2)
  --quick                  one request per worker, one trial per TTFT scenario (a smoke run)
  --only LIST              comma-separated: ${[...GROUPS, BATCHED].join(", ")} (default all)
  --model FILE             GGUF (default bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf, made if missing)
  --peer-dir DIR           where llama-server is built (default bench/.peer here, else the main
                           git worktree's bench/.peer when built there; built here if neither is)
  --lmserve-args="..."     extra flags for lmserve serve (with "=": e.g. --lmserve-args="--batch-invariant-seeds")
  --llama-server-args="..." extra flags for llama-server
  --quiet-wait S           before each workload wait up to S seconds (default 60, 0 = never) for other
                           processes to use < ${QUIET_THRESHOLD}% of the CPU
  --out FILE               Markdown report (default bench/results/peer.md)
`;

const log = (line: string) => process.stderr.write(`${line}\n`);

type Cli = {
  rounds: number;
  quick: boolean;
  only: Set<string>;
  modelPath: string;
  lmserveArgs: string[];
  llamaServerArgs: string[];
  quietWaitMs: number;
  out: string;
  peerDir: string | undefined;
};

const splitArgs = (text: string | undefined) => (text ?? "").split(/\s+/).filter(Boolean);

function parseCli(argv: string[]): Cli | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: "string", default: "2" },
      quick: { type: "boolean", default: false },
      only: { type: "string" },
      model: { type: "string" },
      "lmserve-args": { type: "string" },
      "llama-server-args": { type: "string" },
      "quiet-wait": { type: "string", default: "60" },
      out: { type: "string" },
      "peer-dir": { type: "string" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) return null;
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds: a positive integer");
  const known: string[] = [...GROUPS, BATCHED];
  const only = new Set(values.only ? values.only.split(",").map((name) => name.trim()) : known);
  const unknown = [...only].filter((name) => !known.includes(name));
  if (unknown.length > 0)
    throw new Error(`--only: unknown ${unknown.join(", ")} (known: ${known.join(", ")})`);
  const quietWait = Number(values["quiet-wait"]);
  if (!Number.isFinite(quietWait) || quietWait < 0) throw new Error("--quiet-wait: seconds >= 0");
  return {
    rounds,
    quick: values.quick,
    only,
    modelPath: values.model ? resolve(values.model) : DEFAULT_MODEL,
    lmserveArgs: splitArgs(values["lmserve-args"]),
    llamaServerArgs: splitArgs(values["llama-server-args"]),
    quietWaitMs: quietWait * 1000,
    out: resolve(values.out ?? resolve(projectRoot, "bench/results/peer.md")),
    peerDir: values["peer-dir"] ? resolve(values["peer-dir"]) : undefined,
  };
}

/** The prompts of one round, the same for both servers. */
type RoundPrompts = {
  /** Per throughput workload: worker -> that worker's requests (index within the level, prompt). */
  levels: Map<string, { index: number; input: number[] | string }[][]>;
  /** prompt-logprobs trials: the prompt with `prompt_logprobs`, the one without. */
  promptLogprobs: { withPrompt: number[]; withoutPrompt: number[] }[];
  /** prefix trials: the shared prefix and two suffixes. */
  prefix: { prefix: number[]; suffixA: number[]; suffixB: number[] }[];
  /** Per `serve` / `shared-prefix` level: its prompts, in send order. */
  serve: Map<string, number[][]>;
};

/** Builds every round's prompts with the model's own tokenizer (vocabulary only, then released). */
async function makePrompts(
  modelPath: string,
  workloads: readonly PeerWorkload[],
  rounds: number,
  quick: boolean,
): Promise<RoundPrompts[]> {
  const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error, build: "never" });
  const model = await llama.loadModel({ modelPath, vocabOnly: true });
  let seed = 1;
  const tokens = (length: number, lead: string, words: number) =>
    exactLength(model.tokenize(syntheticText(seed++, words, lead)), length, `${lead} prompt`);
  const trials = quick ? 1 : 3;
  const all: RoundPrompts[] = [];
  for (let round = 0; round < rounds; round++) {
    const levels = new Map<string, { index: number; input: number[] | string }[][]>();
    for (const workload of workloads) {
      if (workload.kind !== "throughput") continue;
      const perWorker = requestsPerWorker(workload.concurrency, quick);
      const queues: { index: number; input: number[] | string }[][] = [];
      for (let worker = 0; worker < workload.concurrency; worker++) {
        const queue: { index: number; input: number[] | string }[] = [];
        for (let i = 0; i < perWorker; i++) {
          const index = worker * perWorker + i;
          queue.push({
            index,
            input:
              workload.endpoint === "chat"
                ? syntheticText(seed++, 24, workload.group === "guided" ? "Order" : "Story")
                : tokens(PROMPT_TOKENS, "Story", 48),
          });
        }
        queues.push(queue);
      }
      levels.set(workload.name, queues);
    }
    const serve = new Map<string, number[][]>();
    for (const workload of workloads) {
      if (workload.kind !== "serve") continue;
      const count = serveRequests(workload.concurrency, quick);
      const words = (length: number) => Math.ceil(length * 1.1);
      if (workload.prompts === "random") {
        serve.set(
          workload.name,
          Array.from({ length: count }, () => tokens(SERVE_INPUT_TOKENS, "Story", words(SERVE_INPUT_TOKENS))),
        );
        continue;
      }
      const own = SERVE_INPUT_TOKENS - SHARED_PREFIX_TOKENS;
      const prefixes = Array.from({ length: SHARED_PREFIXES }, () =>
        tokens(SHARED_PREFIX_TOKENS, "Reference", words(SHARED_PREFIX_TOKENS)),
      );
      serve.set(
        workload.name,
        Array.from({ length: count }, (_, index) => [
          ...(prefixes[index % SHARED_PREFIXES] as number[]),
          ...tokens(own, "\nQuestion", own * 2),
        ]),
      );
    }
    const promptLogprobs = [];
    const prefix = [];
    for (let trial = 0; trial < trials; trial++) {
      const long = PROMPT_LOGPROBS_TOKENS;
      promptLogprobs.push({
        withPrompt: tokens(long, "Survey", Math.ceil(long * 1.1)),
        withoutPrompt: tokens(long, "Digest", Math.ceil(long * 1.1)),
      });
      prefix.push({
        prefix: tokens(PREFIX_TOKENS, "Reference", Math.ceil(PREFIX_TOKENS * 1.1)),
        suffixA: tokens(SUFFIX_TOKENS, "\nQuestion", SUFFIX_TOKENS * 2),
        suffixB: tokens(SUFFIX_TOKENS, "\nTask", SUFFIX_TOKENS * 2),
      });
    }
    all.push({ levels, promptLogprobs, prefix, serve });
  }
  await model.dispose();
  await llama.dispose();
  return all;
}

/** A command line for the report: paths inside the project relative to it, the rest as they are. */
function shownCommand(command: readonly string[]): string {
  return command
    .map((part) => (part.startsWith(`${projectRoot}/`) ? relative(projectRoot, part) : part))
    .join(" ");
}

/** The request body of one throughput request. */
function levelBody(
  workload: ThroughputWorkload,
  input: number[] | string,
  index: number,
  base: Record<string, unknown>,
): Record<string, unknown> {
  return {
    ...(typeof input === "string" ? { messages: [{ role: "user", content: input }] } : { prompt: input }),
    max_tokens: OUTPUT_TOKENS,
    ...(workload.ignoreEos ? { ignore_eos: true } : {}),
    ...base,
    ...workload.fields(index),
  };
}

/** What the rounds collected; a workload that failed is recorded and the run goes on. */
type Results = {
  levels: LevelResult[];
  pairs: PairResult[];
  serve: ServeResult[];
  failures: { workload: string; round: number; server: PeerName; message: string }[];
};

/**
 * Runs the selected workloads of one round on one started server. A failing workload (an HTTP error,
 * a stream error, a stalled stream that fetch gives up on after 300 s) is logged and recorded in
 * `results.failures`; the next one runs.
 */
async function runWorkloads(
  server: PeerServer,
  round: number,
  workloads: readonly PeerWorkload[],
  prompts: RoundPrompts,
  base: Record<string, unknown>,
  waitQuiet: (server: PeerServer) => Promise<void>,
  results: Results,
): Promise<void> {
  for (const workload of workloads) {
    if (workload.kind === "pair" && workload.lmserveOnly && server.name !== "lmserve") continue;
    await waitQuiet(server);
    try {
      await runWorkload(server, round, workload, prompts, base, results);
    } catch (error) {
      const message =
        error instanceof Error
          ? `${error.message}${error.cause ? ` (${String(error.cause)})` : ""}`
          : String(error);
      results.failures.push({ workload: workload.name, round, server: server.name, message });
      log(`  ${server.name} ${workload.name}: FAILED: ${message}`);
    }
  }
}

/** Runs one workload on one server and adds its results. @throws whatever a request throws. */
async function runWorkload(
  server: PeerServer,
  round: number,
  workload: PeerWorkload,
  prompts: RoundPrompts,
  base: Record<string, unknown>,
  results: Results,
): Promise<void> {
  const endWindow = cpuWindow([process.pid, server.pid]);
  if (workload.kind === "serve") {
    const requests = await queuedAtOnce(
      prompts.serve.get(workload.name) ?? [],
      workload.concurrency,
      async (prompt) => ({
        ...(await streamRequest(server, "completions", {
          prompt,
          max_tokens: SERVE_OUTPUT_TOKENS,
          ignore_eos: true,
          ...base,
        })),
        promptTokens: prompt.length,
      }),
    );
    const summary = summariseServe(workload.concurrency, requests);
    results.serve.push({
      workload: workload.name,
      round,
      server: server.name,
      summary,
      othersCpu: endWindow()?.others ?? null,
    });
    log(
      `  ${server.name} ${workload.name}: ${summary.requestsPerS.toFixed(2)} req/s, ${summary.totalTokPerS.toFixed(0)} total tok/s, TTFT median ${summary.ttft.median.toFixed(0)} ms, TPOT median ${summary.tpot.median.toFixed(1)} ms (${summary.requests} requests)`,
    );
    return;
  }
  if (workload.kind === "throughput") {
    const queues = prompts.levels.get(workload.name) ?? [];
    const raw = await closedLoop(queues, (_worker, { index, input }) =>
      streamRequest(server, workload.endpoint, levelBody(workload, input, index, base)),
    );
    const summary = summarise(raw);
    results.levels.push({
      workload: workload.name,
      round,
      server: server.name,
      summary,
      othersCpu: endWindow()?.others ?? null,
    });
    log(
      `  ${server.name} ${workload.name}: ${summary.aggTokPerS.toFixed(1)} tok/s, TTFT p50 ${summary.ttftP50.toFixed(0)} ms (${summary.requests} requests, ${summary.tokens} tokens)`,
    );
    return;
  }
  const ttft = async (prompt: number[], extra: Record<string, unknown> = {}) =>
    streamRequest(server, "completions", { prompt, max_tokens: 4, ignore_eos: true, ...base, ...extra });
  if (workload.group === "prompt-logprobs") {
    // prompt_logprobs does not stream (refused with a 400): both sides are non-streamed, timed to the
    // whole response of 4 tokens.
    const complete = (prompt: number[], extra: Record<string, unknown> = {}) =>
      completeRequest(server, { prompt, max_tokens: 4, ignore_eos: true, ...base, ...extra });
    for (const [trial, { withPrompt, withoutPrompt }] of prompts.promptLogprobs.entries()) {
      const withFirst = trial % 2 === 0;
      const first = withFirst
        ? await complete(withPrompt, { prompt_logprobs: 1 })
        : await complete(withoutPrompt);
      const second = withFirst
        ? await complete(withoutPrompt)
        : await complete(withPrompt, { prompt_logprobs: 1 });
      const [withRun, withoutRun] = withFirst ? [first, second] : [second, first];
      results.pairs.push({
        workload: "prompt-logprobs",
        round,
        server: server.name,
        withMs: withRun.latencyMs,
        withoutMs: withoutRun.latencyMs,
        cachedTokens: withoutRun.cachedTokens,
      });
      log(
        `  ${server.name} prompt_logprobs: latency ${withRun.latencyMs.toFixed(0)} ms with, ${withoutRun.latencyMs.toFixed(0)} ms without`,
      );
    }
  } else {
    for (const { prefix, suffixA, suffixB } of prompts.prefix) {
      const uncached = await ttft([...prefix, ...suffixA]);
      const cached = await ttft([...prefix, ...suffixB]);
      results.pairs.push({
        workload: "prefix",
        round,
        server: server.name,
        withMs: uncached.ttftMs,
        withoutMs: cached.ttftMs,
        cachedTokens: cached.cachedTokens,
      });
      log(
        `  ${server.name} prefix: TTFT ${uncached.ttftMs.toFixed(0)} ms uncached (${uncached.cachedTokens} cached tokens), ${cached.ttftMs.toFixed(0)} ms cached (${cached.cachedTokens} cached tokens)`,
      );
    }
  }
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  if (!cli) {
    process.stdout.write(USAGE);
    return;
  }
  const commandLine = `npm run bench:peer${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`;
  const loadAtStart = loadavg();
  await ensureModel(cli.modelPath, log);
  const peer: PeerBinaries = await ensurePeerBinaries(log, 2, cli.peerDir);
  log(
    `llama.cpp ${peer.commit}: ${relative(projectRoot, peer.server)}, ${relative(projectRoot, peer.batchedBench)} (${peer.buildSeconds === null ? `built before, in ${peer.stampedSeconds} s` : `built now, in ${peer.buildSeconds} s`})`,
  );
  const bans = await bannedTokens(cli.modelPath);
  const base = baseFields(banBias(bans.ids));
  log(
    `banning ${bans.ids.length} of ${bans.vocabSize} tokens (${bans.special} special, ${bans.partialUtf8} partial UTF-8)`,
  );
  const workloads = allWorkloads().filter((workload) => cli.only.has(workload.group));
  const prompts = await makePrompts(cli.modelPath, workloads, cli.rounds, cli.quick);

  const lmserveFlags = [
    "--max-num-seqs",
    String(SLOTS),
    "--max-model-len",
    String(SLOT_CONTEXT),
    "--threads",
    String(THREADS),
    ...cli.lmserveArgs,
  ];
  const llamaServerFlags = [
    "-np",
    String(SLOTS),
    "-c",
    String(SLOTS * SLOT_CONTEXT),
    "-t",
    String(THREADS),
    "--cont-batching",
    "--no-webui",
    ...cli.llamaServerArgs,
  ];
  const batchedArgs = [
    "-c",
    "4096",
    "-npp",
    "128",
    "-ntg",
    String(OUTPUT_TOKENS),
    "-npl",
    "1,4,8",
    "-t",
    String(THREADS),
  ];

  const waitQuiet = async (server?: PeerServer) => {
    if (cli.quietWaitMs <= 0) return;
    const others = await waitForQuiet(
      server ? [process.pid, server.pid] : [process.pid],
      cli.quietWaitMs,
      QUIET_THRESHOLD,
      (busy) => log(`  waiting: other processes use ${busy.toFixed(0)}% of the CPU`),
    );
    if (others !== null && others >= QUIET_THRESHOLD)
      log(`  still busy (${others.toFixed(0)}%): measuring anyway`);
  };
  let batchedGen: Map<number, number> | null = null;
  let batchedCommand = "";
  if (cli.only.has(BATCHED)) {
    await waitQuiet();
    log(`llama-batched-bench ${batchedArgs.join(" ")}`);
    const { rows, command } = await runBatchedBench(peer.batchedBench, cli.modelPath, batchedArgs);
    batchedGen = new Map(rows.map((row) => [row.pl, row.speed_tg]));
    batchedCommand = shownCommand(command);
    log(`  generation t/s: ${rows.map((row) => `${row.speed_tg.toFixed(1)} at ${row.pl}`).join(", ")}`);
  }

  const results: Results = { levels: [], pairs: [], serve: [], failures: [] };
  const rss: PeerReport["rss"] = [];
  const commands = new Map<PeerName, string[]>();
  for (let round = 1; round <= cli.rounds; round++) {
    const order: PeerName[] = round % 2 === 1 ? ["lmserve", "llama-server"] : ["llama-server", "lmserve"];
    for (const name of order) {
      log(`round ${round}/${cli.rounds}: ${name}`);
      const server =
        name === "lmserve"
          ? await startLmserve(cli.modelPath, lmserveFlags)
          : await startLlamaServer(peer.server, cli.modelPath, llamaServerFlags);
      commands.set(name, server.command);
      try {
        // Warm-up: one short completion and one short chat request.
        await streamRequest(server, "completions", { prompt: "Once upon a time", max_tokens: 8, ...base });
        await streamRequest(server, "chat", {
          messages: [{ role: "user", content: "Hello" }],
          max_tokens: 8,
          ...base,
        });
        const mib = residentMiB(server.pid);
        rss.push({ round, server: name, mib });
        log(`  ${name} pid ${server.pid}: RSS ${mib.toFixed(0)} MiB after warm-up`);
        await runWorkloads(
          server,
          round,
          workloads,
          prompts[round - 1] as RoundPrompts,
          base,
          waitQuiet,
          results,
        );
      } finally {
        await server.stop();
      }
    }
  }

  const report: PeerReport = {
    date: new Date().toISOString(),
    command: commandLine,
    machine: [
      cpuFacts(),
      `Load average (1/5/15 min) at start: ${loadFacts(loadAtStart)}; at end: ${loadFacts()} (the machine is shared)`,
      `Node ${process.version}, node-llama-cpp ${packageVersion("node-llama-cpp")}, lmserve revision ${gitRevision()}`,
      `llama.cpp ${peer.commit} (node-llama-cpp's bundle), built in ${relative(projectRoot, peer.dir) || "."} with ${peer.stampedSeconds} s of build time`,
    ],
    setup: [
      `Model: \`${basename(cli.modelPath)}\` (${(statSync(cli.modelPath).size / 2 ** 20).toFixed(0)} MiB)`,
      `lmserve: \`${shownCommand(commands.get("lmserve") ?? [])}\``,
      `llama-server: \`${shownCommand(commands.get("llama-server") ?? [])}\` (${SLOTS} slots x ${SLOT_CONTEXT} tokens)`,
      `llama-batched-bench: \`${batchedCommand || "not run"}\``,
      `Rounds: ${cli.rounds}; round r runs ${"`lmserve`, then `llama-server`"} when r is odd and the reverse when even, one server up at a time${cli.quick ? "; --quick: one request per worker, one trial per TTFT scenario" : "; max(2, ceil(8 / concurrency)) requests per worker, three trials per TTFT scenario"}`,
      `Requests: streamed, ${OUTPUT_TOKENS} tokens (\`ignore_eos\`, except guided JSON), temperature 0.7, top_k 40, top_p 0.95, min_p 0.05; completions get ${PROMPT_TOKENS}-token id prompts, chat a ~24-word user message; guided JSON = chat with \`response_format\` json_schema (test/fixtures/schemas/api-order.json)`,
      `logit_bias: one shared object banning ${bans.ids.length} of ${bans.vocabSize} tokens (${bans.special} control/user-defined, ${bans.partialUtf8} not valid UTF-8 on their own) at -100, on both servers`,
      `TTFT scenarios (4 tokens out): prompt_logprobs = ${PROMPT_LOGPROBS_TOKENS}-token prompt with \`prompt_logprobs: 1\` against another without, both non-streamed and timed to the whole response (lmserve only); prefix = ${PREFIX_TOKENS}-token prefix + ${SUFFIX_TOKENS}-token suffix, then the same prefix with another suffix`,
      `vllm bench serve workload: ${SERVE_INPUT_TOKENS}-token prompts (serve: each its own synthetic text; shared-prefix: one of ${SHARED_PREFIXES} ${SHARED_PREFIX_TOKENS}-token prefixes + ${SERVE_INPUT_TOKENS - SHARED_PREFIX_TOKENS} own tokens), ${SERVE_OUTPUT_TOKENS} tokens out (\`ignore_eos\`), the same sampling and bans, streamed; ${cli.quick ? "--quick: one request per slot of the level" : "max(8, 2 x concurrency) requests"} queued at once, at most concurrency in flight; TPOT = (E2EL - TTFT) / (tokens - 1) per request, ITL = every gap between tokens, E2EL = sent to last token; total tok/s counts prompt and output tokens`,
      `Token counts: lmserve's \`continuous_usage_stats\`, llama-server's \`timings_per_token\` (predicted_n); TTFT = request sent to first token received`,
    ],
    levels: results.levels,
    pairs: results.pairs,
    serve: results.serve,
    rss,
    batchedGen,
    notes: [
      "ratio = lmserve / llama-server (above 1: lmserve faster, or for TTFT and RSS: lmserve larger).",
      "Feature ratios: logprobs, seeded and guided are tok/s against the same level without the feature (guided against plain chat); prompt_logprobs is TTFT with / without; cached / uncached is TTFT cached / uncached (below 1: the cache helps).",
      "llama-server's /v1/completions answers `logprobs: N` (its alias of `n_probs`) in the chat shape `{content: [...]}` rather than OpenAI's `{tokens, token_logprobs, top_logprobs}`; the cost is measured all the same.",
      "RSS = VmRSS of the server process itself (lmserve's node process, llama-server's binary) after the warm-up requests.",
      "others' CPU % = share of the machine other processes used during a level (the machine is shared).",
      ...results.failures.map(
        (failure) =>
          `FAILED: ${failure.workload} on ${failure.server} in round ${failure.round}: ${failure.message}`,
      ),
    ],
  };
  mkdirSync(dirname(cli.out), { recursive: true });
  writeAtomic(cli.out, renderMarkdown(report));
  process.stdout.write(`\n${consoleTables(report)}\n\nwrote ${relative(projectRoot, cli.out)}\n`);
}

main().catch((error: unknown) => {
  log(`bench:peer: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});

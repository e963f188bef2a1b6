/**
 * Renders `bench/peer.ts`'s results: per workload per round, lmserve against llama-server; each
 * server's own feature-cost ratios; the headline comparisons (plain@8 against `llama-batched-bench`,
 * RSS, TTFT p50 at concurrency 1); as console tables and as the Markdown page `bench/results/peer.md`.
 */
import type { PeerName } from "./peerServer.ts";
import { f1, f2, machineAndSetup, table } from "./report.ts";
import type { ServeSummary } from "./serveBench.ts";
import { type LevelSummary, quantile } from "./stats.ts";

/** One throughput level of one server in one round. */
export type LevelResult = {
  workload: string;
  round: number;
  server: PeerName;
  summary: LevelSummary;
  /** Percent of the machine's CPU other processes used during the level (null off Linux). */
  othersCpu: number | null;
};

/** One trial of a paired-TTFT scenario: `withMs` = the feature (or uncached), `withoutMs` = baseline. */
export type PairResult = {
  workload: "prompt-logprobs" | "prefix";
  round: number;
  server: PeerName;
  /** prompt-logprobs: TTFT with `prompt_logprobs: 1`; prefix: TTFT of the uncached request. */
  withMs: number;
  /** prompt-logprobs: TTFT without it; prefix: TTFT of the cached request. */
  withoutMs: number;
  /** Cached prompt tokens the server reported for the second (cached) request. */
  cachedTokens: number;
};

/** One `serve` / `shared-prefix` level of one server in one round. */
export type ServeResult = {
  workload: string;
  round: number;
  server: PeerName;
  summary: ServeSummary;
  /** Percent of the machine's CPU other processes used during the level (null off Linux). */
  othersCpu: number | null;
};

/** Everything the report shows. */
export type PeerReport = {
  date: string;
  command: string;
  machine: string[];
  setup: string[];
  levels: LevelResult[];
  pairs: PairResult[];
  /** The `vllm bench serve`-style levels. */
  serve: ServeResult[];
  /** Resident MiB of each server after warm-up, per round. */
  rss: { round: number; server: PeerName; mib: number }[];
  /** `llama-batched-bench` generation t/s by parallel sequences (null when not run). */
  batchedGen: Map<number, number> | null;
  notes: string[];
};

const NAMES: readonly PeerName[] = ["lmserve", "llama-server"];
const median = (values: readonly number[]) => quantile(values, 0.5);

function levelsOf(report: PeerReport, workload: string, server: PeerName): LevelResult[] {
  return report.levels.filter((level) => level.workload === workload && level.server === server);
}

/** Median over rounds of a level's aggregate tok/s (NaN when not run). */
function tokPerS(report: PeerReport, workload: string, server: PeerName): number {
  return median(levelsOf(report, workload, server).map((level) => level.summary.aggTokPerS));
}

/** Median over rounds of a level's TTFT p50, ms. */
function ttftP50(report: PeerReport, workload: string, server: PeerName): number {
  return median(levelsOf(report, workload, server).map((level) => level.summary.ttftP50));
}

/** Median TTFT of a pair scenario's two sides, ms. */
function pairMedians(report: PeerReport, workload: PairResult["workload"], server: PeerName) {
  const trials = report.pairs.filter((pair) => pair.workload === workload && pair.server === server);
  return {
    withMs: median(trials.map((pair) => pair.withMs)),
    withoutMs: median(trials.map((pair) => pair.withoutMs)),
    cachedTokens: median(trials.map((pair) => pair.cachedTokens)),
    trials: trials.length,
  };
}

/** Per workload per round: both servers' tok/s and TTFT p50, and lmserve / llama-server. */
export function levelsTable(report: PeerReport): string {
  const keys = [...new Set(report.levels.map((level) => `${level.workload}#${level.round}`))];
  const rows = keys.map((key) => {
    const [workload = "", round = ""] = key.split("#");
    const find = (server: PeerName) =>
      report.levels.find(
        (level) => level.workload === workload && level.round === Number(round) && level.server === server,
      );
    const ours = find("lmserve");
    const peer = find("llama-server");
    const others = [ours?.othersCpu, peer?.othersCpu].filter((value) => typeof value === "number");
    return [
      workload,
      round,
      f1(ours?.summary.aggTokPerS ?? Number.NaN),
      f1(peer?.summary.aggTokPerS ?? Number.NaN),
      f2((ours?.summary.aggTokPerS ?? Number.NaN) / (peer?.summary.aggTokPerS ?? Number.NaN)),
      f1(ours?.summary.ttftP50 ?? Number.NaN),
      f1(peer?.summary.ttftP50 ?? Number.NaN),
      `${ours?.summary.requests ?? 0} / ${peer?.summary.requests ?? 0}`,
      others.length > 0 ? others.map((value) => value.toFixed(0)).join(" / ") : "–",
    ];
  });
  return table(
    [
      "workload",
      "round",
      "lmserve tok/s",
      "llama-server tok/s",
      "ratio",
      "lmserve TTFT p50 ms",
      "llama-server TTFT p50 ms",
      "requests",
      "others' CPU % (lmserve / llama-server)",
    ],
    rows,
  );
}

/** Each server's feature-cost ratios (medians over rounds); lmserve's are the ones issue 13 tracks. */
export function ratiosTable(report: PeerReport): string {
  const level = (a: string, b: string) => (server: PeerName) =>
    tokPerS(report, a, server) / tokPerS(report, b, server);
  const pair = (workload: PairResult["workload"]) => (server: PeerName) => {
    const { withMs, withoutMs } = pairMedians(report, workload, server);
    return workload === "prefix" ? withoutMs / withMs : withMs / withoutMs;
  };
  const rows: [string, (server: PeerName) => number][] = [
    ["logprobs / plain tok/s @1", level("logprobs@1", "plain@1")],
    ["logprobs / plain tok/s @4", level("logprobs@4", "plain@4")],
    ["seeded / unseeded tok/s @4", level("seed@4", "plain@4")],
    ["guided JSON / plain chat tok/s @1", level("guided@1", "chat@1")],
    ["guided JSON / plain chat tok/s @4", level("guided@4", "chat@4")],
    ["prompt_logprobs / plain TTFT (500-token prompt)", pair("prompt-logprobs")],
    ["cached / uncached TTFT (1,000-token prefix)", pair("prefix")],
  ];
  return table(
    ["ratio", ...NAMES],
    rows.map(([label, ratio]) => [label, ...NAMES.map((server) => f2(ratio(server)))]),
  );
}

/** The paired-TTFT scenarios' medians. */
export function pairsTable(report: PeerReport): string {
  const rows: string[][] = [];
  for (const workload of ["prompt-logprobs", "prefix"] as const) {
    for (const server of NAMES) {
      const medians = pairMedians(report, workload, server);
      if (medians.trials === 0) continue;
      rows.push([
        workload === "prefix" ? "prefix: uncached / cached" : "prompt_logprobs: with / without",
        server,
        String(medians.trials),
        f1(medians.withMs),
        f1(medians.withoutMs),
        workload === "prefix" ? f1(medians.cachedTokens) : "–",
      ]);
    }
  }
  return table(["scenario", "server", "trials", "TTFT A ms", "TTFT B ms", "cached tokens (B)"], rows);
}

/** The `vllm bench serve`-style levels, one row per level, server and round (latencies in ms: mean / median / p99). */
export function serveTable(report: PeerReport): string {
  const stats = (value: { mean: number; median: number; p99: number }) =>
    `${f1(value.mean)} / ${f1(value.median)} / ${f1(value.p99)}`;
  const rows = report.serve.map(({ workload, round, server, summary, othersCpu }) => [
    workload,
    String(round),
    server,
    String(summary.requests),
    f2(summary.requestsPerS),
    f1(summary.outputTokPerS),
    f1(summary.totalTokPerS),
    stats(summary.ttft),
    stats(summary.tpot),
    `${f1(summary.itl.median)} / ${f1(summary.itl.p99)}`,
    stats(summary.e2el),
    othersCpu === null ? "–" : othersCpu.toFixed(0),
  ]);
  return table(
    [
      "level",
      "round",
      "server",
      "requests",
      "req/s",
      "output tok/s",
      "total tok/s",
      "TTFT mean / median / p99",
      "TPOT mean / median / p99",
      "ITL median / p99",
      "E2EL mean / median / p99",
      "others' CPU %",
    ],
    rows,
  );
}

/** plain@8 against llama-batched-bench, RSS and TTFT p50 at concurrency 1. */
export function headlineTable(report: PeerReport): string {
  const gen8 = report.batchedGen?.get(8) ?? Number.NaN;
  const rss = (server: PeerName) =>
    median(report.rss.filter((entry) => entry.server === server).map((entry) => entry.mib));
  const rows: string[][] = [
    [
      "plain@8 tok/s vs llama-batched-bench gen t/s @8",
      f1(tokPerS(report, "plain@8", "lmserve")),
      f1(tokPerS(report, "plain@8", "llama-server")),
      f2(tokPerS(report, "plain@8", "lmserve") / tokPerS(report, "plain@8", "llama-server")),
      `batched-bench ${f1(gen8)}; lmserve / it ${f2(tokPerS(report, "plain@8", "lmserve") / gen8)}, llama-server / it ${f2(tokPerS(report, "plain@8", "llama-server") / gen8)}`,
    ],
    [
      "RSS after warm-up, MiB",
      f1(rss("lmserve")),
      f1(rss("llama-server")),
      f2(rss("lmserve") / rss("llama-server")),
      "",
    ],
    [
      "TTFT p50 @1, ms (plain)",
      f1(ttftP50(report, "plain@1", "lmserve")),
      f1(ttftP50(report, "plain@1", "llama-server")),
      f2(ttftP50(report, "plain@1", "lmserve") / ttftP50(report, "plain@1", "llama-server")),
      "",
    ],
  ];
  return table(["measure", "lmserve", "llama-server", "lmserve / llama-server", "note"], rows);
}

/** The batched-bench rows (generation t/s by parallel sequences). */
function batchedLine(report: PeerReport): string {
  if (!report.batchedGen) return "llama-batched-bench: not run.";
  return `llama-batched-bench generation t/s: ${[...report.batchedGen.entries()]
    .map(([parallel, speed]) => `${f1(speed)} at ${parallel}`)
    .join(", ")}.`;
}

/** All tables, for the console. */
export function consoleTables(report: PeerReport): string {
  return [
    levelsTable(report),
    ratiosTable(report),
    pairsTable(report),
    ...(report.serve.length > 0 ? [serveTable(report)] : []),
    headlineTable(report),
    batchedLine(report),
  ].join("\n\n");
}

/** The Markdown results page. */
export function renderMarkdown(report: PeerReport): string {
  return [
    "# lmserve vs llama-server (`npm run bench:peer`)",
    "",
    `Run ${report.date}: \`${report.command}\``,
    "",
    ...machineAndSetup(report.machine, report.setup),
    "## Headline",
    "",
    headlineTable(report),
    "",
    batchedLine(report),
    "",
    "## Feature-cost ratios (median over rounds)",
    "",
    ratiosTable(report),
    "",
    pairsTable(report),
    "",
    ...(report.serve.length > 0
      ? [
          "## vllm bench serve workload (latencies in ms)",
          "",
          "As `vllm bench serve --max-concurrency C --request-rate inf`: every request queued at once.",
          "",
          serveTable(report),
          "",
        ]
      : []),
    "## Per workload per round (ratio = lmserve / llama-server)",
    "",
    levelsTable(report),
    "",
    "## Notes",
    "",
    ...report.notes.map((line) => `- ${line}`),
    "",
  ].join("\n");
}

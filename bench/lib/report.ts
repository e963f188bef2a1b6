/**
 * Renders a benchmark run: the Markdown results page (`bench/results/latest.md`), the console table,
 * and a grouped bar chart of aggregate tok/s as plain SVG text (`bench/results/latest.svg`).
 */
import type { PrefixRaw } from "./engineProtocol.ts";
import { type BatchStats, type LevelSummary, quantile } from "./stats.ts";

/** One concurrency level measured on both targets. */
export type LevelPair = {
  server: LevelSummary;
  engine: LevelSummary;
  /** The order the targets ran in at this level (blocks, see `runLevel.ts`). */
  order: string;
  /** 1-minute load average just before the level. */
  load: number;
  /** Percent of the machine's CPU that other processes used during the level (null off Linux). */
  othersCpu: number | null;
  /** The bare engine with the `--defer-reloop` experiment (run after the other two), when asked for. */
  deferred?: LevelSummary;
};

/** One trial of the prefix-cache scenario; `serverCachedTokens` is the server's reported count. */
export type PrefixTrial = { server: PrefixRaw; engine: PrefixRaw; serverCachedTokens: number };

/** Everything the report shows. */
export type BenchReport = {
  date: string;
  machine: string[];
  setup: string[];
  levels: LevelPair[];
  prefix: PrefixTrial[];
  /** Aggregate tok/s that llama-server reached at concurrency 8 on this machine (issue 4). */
  llamaServerAt8: number;
  /** The chart's x-axis caption, e.g. "concurrency (closed loop, 32-token prompts, 64 tokens out)". */
  workloadLabel: string;
  notes: string[];
};

const f0 = (value: number) => (Number.isFinite(value) ? value.toFixed(0) : "–");
/** One decimal, "–" for NaN or infinities. */
export const f1 = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : "–");
/** Two decimals, "–" for NaN or infinities. */
export const f2 = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : "–");
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

/** A Markdown table. */
export function table(header: string[], rows: string[][]): string {
  const lines = [`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`];
  for (const row of rows) lines.push(`| ${row.join(" | ")} |`);
  return lines.join("\n");
}

/** The main results table (one row per concurrency). */
export function resultsTable(levels: readonly LevelPair[]): string {
  return table(
    [
      "concurrency",
      "server agg tok/s",
      "engine agg tok/s",
      "server/engine",
      "server TTFT p50/p99 (ms)",
      "server ITL p50/p99 (ms)",
      "engine TTFT p50/p99 (ms)",
      "engine ITL p50/p99 (ms)",
    ],
    levels.map(({ server, engine }) => [
      String(server.concurrency),
      f1(server.aggTokPerS),
      f1(engine.aggTokPerS),
      f2(server.aggTokPerS / engine.aggTokPerS),
      `${f0(server.ttftP50)} / ${f0(server.ttftP99)}`,
      `${f1(server.itlP50)} / ${f1(server.itlP99)}`,
      `${f0(engine.ttftP50)} / ${f0(engine.ttftP99)}`,
      `${f1(engine.itlP50)} / ${f1(engine.itlP99)}`,
    ]),
  );
}

/** The prefix-cache table, one row per trial plus the median. */
export function prefixTable(trials: readonly PrefixTrial[]): string {
  const row = (label: string, s1: number, s2: number, cached: string, e1: number, e2: number) => [
    label,
    f0(s1),
    f0(s2),
    f2(s2 / s1),
    cached,
    f0(e1),
    f0(e2),
    f2(e2 / e1),
  ];
  const rows = trials.map((trial, index) =>
    row(
      String(index + 1),
      trial.server.uncachedTtftMs,
      trial.server.cachedTtftMs,
      String(trial.serverCachedTokens),
      trial.engine.uncachedTtftMs,
      trial.engine.cachedTtftMs,
    ),
  );
  if (trials.length > 1) {
    rows.push(
      row(
        "median",
        median(trials.map((trial) => trial.server.uncachedTtftMs)),
        median(trials.map((trial) => trial.server.cachedTtftMs)),
        "",
        median(trials.map((trial) => trial.engine.uncachedTtftMs)),
        median(trials.map((trial) => trial.engine.cachedTtftMs)),
      ),
    );
  }
  return table(
    [
      "trial",
      "server uncached TTFT (ms)",
      "server cached TTFT (ms)",
      "cached/uncached",
      "server cached_tokens",
      "engine uncached TTFT (ms)",
      "engine cached TTFT (ms)",
      "cached/uncached",
    ],
    rows,
  );
}

function batchRow(label: string, summary: LevelSummary, batch: BatchStats | undefined): string[] {
  if (!batch) return [label, String(summary.concurrency), "–", "–", "–", "–", "–", "–", "–"];
  const share = batch.decodeMs === null ? Number.NaN : batch.decodeMs / summary.wallMs;
  const perStep = batch.decodeMs === null ? Number.NaN : batch.decodeMs / Math.max(1, batch.batches);
  return [
    label,
    String(summary.concurrency),
    String(batch.batches),
    String(batch.decodeBatches),
    f2(batch.meanSequencesPerStep),
    batch.stepHistogram
      .map((count, size) => {
        if (count === 0) return "";
        const ms = batch.stepMsBySize[size];
        return ms === null || ms === undefined ? `${size}: ${count}` : `${size}: ${count} (${f0(ms)})`;
      })
      .filter(Boolean)
      .join(", "),
    Number.isFinite(share) ? `${(share * 100).toFixed(0)}%` : "–",
    f1(perStep),
    batch.eraseMs.length > 0
      ? `${batch.eraseMs.length} x, ${f0(quantile(batch.eraseMs, 0.5))} / ${f0(Math.max(...batch.eraseMs))}`
      : "–",
  ];
}

/** Decode batch statistics of both targets per level (from the probes). */
export function batchTable(levels: readonly LevelPair[]): string {
  const rows = levels.flatMap(({ server, engine }) => [
    batchRow("server", server, server.batch),
    batchRow("engine", engine, engine.batch),
  ]);
  return table(
    [
      "target",
      "concurrency",
      "decode batches",
      "generation steps",
      "mean seqs/step",
      "steps by sequences in them: count (mean decodeBatch ms)",
      "decodeBatch share of wall",
      "mean ms per decodeBatch",
      "KV erasures: count, p50 / max ms",
    ],
    rows,
  );
}

/** The `--defer-reloop` experiment against the plain bare engine and the server, per level. */
export function experimentTable(levels: readonly LevelPair[]): string {
  return table(
    [
      "concurrency",
      "server agg tok/s",
      "engine agg tok/s",
      "engine + deferred re-loop agg tok/s",
      "deferred / engine",
      "mean seqs/step (engine -> deferred)",
      "deferred TTFT p50 (ms)",
      "deferred ITL p50/p99 (ms)",
    ],
    levels.flatMap(({ server, engine, deferred }) =>
      deferred
        ? [
            [
              String(server.concurrency),
              f1(server.aggTokPerS),
              f1(engine.aggTokPerS),
              f1(deferred.aggTokPerS),
              f2(deferred.aggTokPerS / engine.aggTokPerS),
              `${f2(engine.batch?.meanSequencesPerStep ?? Number.NaN)} -> ${f2(deferred.batch?.meanSequencesPerStep ?? Number.NaN)}`,
              f0(deferred.ttftP50),
              `${f1(deferred.itlP50)} / ${f1(deferred.itlP99)}`,
            ],
          ]
        : [],
    ),
  );
}

/** The targets with the measured values and whether they are met. */
export function targetsTable(report: BenchReport): string {
  const { levels, prefix, llamaServerAt8 } = report;
  const at = (concurrency: number) => levels.find((level) => level.server.concurrency === concurrency);
  const rows: string[][] = [];
  const at8 = at(8);
  if (at8) {
    const value = at8.server.aggTokPerS;
    rows.push([
      `agg tok/s at concurrency 8 >= ~${llamaServerAt8}`,
      f1(value),
      value >= llamaServerAt8 ? "yes" : "no",
    ]);
  }
  const ratios = levels.map((level) => level.server.aggTokPerS / level.engine.aggTokPerS);
  if (ratios.length > 0) {
    const worst = Math.min(...ratios);
    rows.push([
      "server/engine >= 0.95 at every concurrency",
      `min ${f2(worst)}`,
      worst >= 0.95 ? "yes" : "no",
    ]);
  }
  const c1 = at(1);
  const c4 = at(4);
  if (c1 && c4) {
    const scale = c4.server.aggTokPerS / c1.server.aggTokPerS;
    rows.push(["agg at concurrency 4 >= 2x concurrency 1", `${f2(scale)}x`, scale >= 2 ? "yes" : "no"]);
  }
  if (prefix.length > 0) {
    const ratio =
      median(prefix.map((trial) => trial.server.cachedTtftMs)) /
      median(prefix.map((trial) => trial.server.uncachedTtftMs));
    rows.push(["prefix-cached TTFT <= 1/5 of uncached", `${f2(ratio)}`, ratio <= 0.2 ? "yes" : "no"]);
  }
  return table(["target (issue 4)", "measured (server)", "met"], rows);
}

/** The "Machine" and "Setup" sections of a results page, as lines (each section ends with a blank line). */
export function machineAndSetup(machine: readonly string[], setup: readonly string[]): string[] {
  return [
    "## Machine",
    "",
    ...machine.map((line) => `- ${line}`),
    "",
    "## Setup",
    "",
    ...setup.map((line) => `- ${line}`),
    "",
  ];
}

/** The whole Markdown results page. */
export function renderMarkdown(report: BenchReport): string {
  const parts = [
    "# lmserve benchmark results",
    "",
    `Generated by \`npm run bench\` (\`bench/serve.ts\`) on ${report.date}. Chart: [latest.svg](latest.svg).`,
    "",
    ...machineAndSetup(report.machine, report.setup),
    "## Throughput and latency",
    "",
    resultsTable(report.levels),
    "",
    table(
      [
        "concurrency",
        "order",
        "load before",
        "others' CPU during level",
        "server requests / tokens / wall s",
        "engine requests / tokens / wall s",
      ],
      report.levels.map((level) => [
        String(level.server.concurrency),
        level.order,
        f2(level.load),
        level.othersCpu === null ? "–" : `${f0(level.othersCpu)}%`,
        `${level.server.requests} / ${level.server.tokens} / ${f1(level.server.wallMs / 1000)}`,
        `${level.engine.requests} / ${level.engine.tokens} / ${f1(level.engine.wallMs / 1000)}`,
      ]),
    ),
    "",
    "## Prefix cache",
    "",
    prefixTable(report.prefix),
    "",
    "## Decode batches",
    "",
    batchTable(report.levels),
    "",
    ...(report.levels.some((level) => level.deferred)
      ? [
          "## Experiment: bare engine with the batch loop deferred by one macrotask",
          "",
          "See `bench/lib/deferReloop.ts`: node-llama-cpp decodes the next batch before the sequence whose sampling finished last has queued its token. Not the baseline; run last at each level.",
          "",
          experimentTable(report.levels),
          "",
        ]
      : []),
    "## Targets",
    "",
    targetsTable(report),
    "",
    "## Notes",
    "",
    ...report.notes.map((line) => `- ${line}`),
    "",
  ];
  return parts.join("\n");
}

const escapeXml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A grouped bar chart (server vs engine agg tok/s per concurrency) as SVG text. */
export function renderSvg(report: BenchReport): string {
  const width = 640;
  const height = 360;
  const margin = { top: 68, right: 20, bottom: 48, left: 56 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const values = report.levels.flatMap((level) => [level.server.aggTokPerS, level.engine.aggTokPerS]);
  const rawMax = Math.max(report.llamaServerAt8, ...values.filter(Number.isFinite)) * 1.15;
  const step = rawMax > 100 ? 20 : 10;
  const yMax = Math.ceil(rawMax / step) * step;
  const y = (value: number) => margin.top + plotH - (value / yMax) * plotH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">Aggregate tok/s: lmserve (HTTP) vs bare node-llama-cpp</text>`,
    `<text x="${width / 2}" y="36" text-anchor="middle" fill="#555">${escapeXml(report.date)}</text>`,
  ];
  for (let tick = 0; tick <= yMax; tick += step) {
    out.push(
      `<line x1="${margin.left}" x2="${width - margin.right}" y1="${y(tick)}" y2="${y(tick)}" stroke="#e0e0e0"/>`,
      `<text x="${margin.left - 6}" y="${y(tick) + 4}" text-anchor="end" fill="#333">${tick}</text>`,
    );
  }
  const groupW = plotW / Math.max(1, report.levels.length);
  const barW = Math.min(48, groupW / 3);
  report.levels.forEach((level, index) => {
    const center = margin.left + groupW * (index + 0.5);
    const bars: [number, string][] = [
      [level.server.aggTokPerS, "#4e79a7"],
      [level.engine.aggTokPerS, "#f28e2b"],
    ];
    bars.forEach(([value, color], bar) => {
      const x = center - barW + bar * barW;
      const top = Number.isFinite(value) ? y(value) : y(0);
      out.push(
        `<rect x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(y(0) - top).toFixed(1)}" fill="${color}"/>`,
        `<text x="${(x + (barW - 2) / 2).toFixed(1)}" y="${(top - 4).toFixed(1)}" text-anchor="middle" font-size="11">${f1(value)}</text>`,
      );
    });
    out.push(
      `<text x="${center.toFixed(1)}" y="${height - margin.bottom + 16}" text-anchor="middle">${level.server.concurrency}</text>`,
    );
  });
  const ref = y(report.llamaServerAt8);
  out.push(
    `<line x1="${margin.left}" x2="${width - margin.right}" y1="${ref}" y2="${ref}" stroke="#c0392b" stroke-dasharray="6 4"/>`,
    `<text x="${width - margin.right - 4}" y="${ref - 4}" text-anchor="end" fill="#c0392b" font-size="11">llama-server at concurrency 8 (~${report.llamaServerAt8})</text>`,
    `<line x1="${margin.left}" x2="${margin.left}" y1="${margin.top}" y2="${y(0)}" stroke="#333"/>`,
    `<line x1="${margin.left}" x2="${width - margin.right}" y1="${y(0)}" y2="${y(0)}" stroke="#333"/>`,
    `<text x="${margin.left + plotW / 2}" y="${height - 12}" text-anchor="middle">${escapeXml(report.workloadLabel)}</text>`,
    `<text transform="translate(16 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle">tok/s</text>`,
    `<rect x="${width / 2 - 120}" y="44" width="12" height="12" fill="#4e79a7"/>`,
    `<text x="${width / 2 - 102}" y="54">lmserve server (HTTP)</text>`,
    `<rect x="${width / 2 + 30}" y="44" width="12" height="12" fill="#f28e2b"/>`,
    `<text x="${width / 2 + 48}" y="54">bare engine</text>`,
    "</svg>",
    "",
  );
  return out.join("\n");
}

/**
 * JSON Schema coverage benchmark of issue 19 (`npm run bench:schemas -- DATA_DIR`).
 *
 * Runs the JSON Schema → GBNF compiler (`jsonSchemaToGbnf`, no cache; the per-pattern automaton cache is
 * cleared before every compilation; the formats' automata are built first, as the server does at start) over a folder of JSONSchemaBench
 * schemas (repository `guidance-ai/jsonschemabench`, folder `data/`: one sub-folder per dataset, one schema
 * per `*.json` file; a folder of `*.json` files alone counts as one dataset) and prints, per dataset and in
 * total: how many schemas compiled, how many were refused (400) with the most frequent reasons, how many
 * crashed (any other exception: a bug), and compile time p50/p99 over all schemas (with `--runs N`, each
 * schema's time is the median of N compilations, which damps a busy machine's noise; with `--warmup N`, every
 * schema of the dataset is first compiled N times untimed, so that the times are a running server's, not
 * those of code the JIT compiler has not optimised yet: the first schemas of a cold process take up to five
 * times longer). Reasons are the error
 * messages with JSON pointers, quoted values and numbers generalised, so equal causes count together.
 *
 * With `--sample N --model PATH` it then generates under N compiled schemas per dataset with the real engine
 * and validates every output that stopped (see `bench/schemaSample.ts`); options `--max-tokens 512`,
 * `--threads 1`, `--sequences 4`.
 *
 * With `--slowest N` it lists each dataset's N slowest schemas with their times.
 *
 * Usage: npm run bench:schemas -- DATA_DIR [--top 5] [--dataset NAME] [--show-crashes] [--runs 1] [--warmup 0]
 *          [--slowest 0] [--sample N --model PATH [--max-tokens 512] [--threads 1] [--sequences 4]]
 * Prints Markdown tables and the reasons; exit code 0 unless a schema crashed the compiler or a sampled
 * output that stopped is invalid.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { ApiError } from "../src/errors.ts";
import { warmFormatAutomata } from "../src/structured/jsonSchema/formats.ts";
import { jsonSchemaToGbnf } from "../src/structured/jsonSchemaToGbnf.ts";
import { clearPatternCache } from "../src/structured/regexToGbnf.ts";
import { runSample, type SampleCandidate, sampleReport } from "./schemaSample.ts";

type DatasetResult = {
  name: string;
  total: number;
  compiled: number;
  refused: number;
  crashed: string[];
  reasons: Map<string, number>;
  timesMs: number[];
  /** Each schema's time with its file name, for `--slowest`. */
  timed: { file: string; ms: number }[];
  /** The compiled schemas with their grammars (kept only when sampling). */
  candidates: SampleCandidate[];
};

/** The error message with the request-specific parts generalised (pointers, quoted names, numbers). */
export function reasonKey(message: string): string {
  return message
    .replace(/#[^\s:,)'"]*/g, "#…")
    .replace(/'[^']*'/g, (m) => (m.length > 40 ? "'…'" : m))
    .replace(/"(?:[^"\\]|\\.)*"/g, '"…"')
    .replace(/-?\d+(\.\d+)?(e[+-]?\d+)?/gi, "N")
    .slice(0, 140);
}

/** The `p` quantile (0..1) of `sorted` ascending values; 0 for none. */
function quantile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

/** A result with nothing counted yet. */
function emptyResult(name: string): DatasetResult {
  return {
    name,
    total: 0,
    compiled: 0,
    refused: 0,
    crashed: [],
    reasons: new Map(),
    timesMs: [],
    timed: [],
    candidates: [],
  };
}

/**
 * Compiles every `*.json` schema in `dir` (`warmup` times untimed, then `runs` times timed) and tallies the
 * outcomes (keeping the grammars if `keep`).
 */
function runDataset(name: string, dir: string, keep: boolean, runs: number, warmup: number): DatasetResult {
  const result = emptyResult(name);
  const schemas: [string, unknown][] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()) {
    try {
      schemas.push([file, JSON.parse(readFileSync(join(dir, file), "utf8"))]);
    } catch {
      // not JSON (e.g. a Git LFS pointer): not a schema of the benchmark
    }
  }
  for (let i = 0; i < warmup; i++)
    for (const [, schema] of schemas) {
      clearPatternCache();
      try {
        jsonSchemaToGbnf(schema);
      } catch {}
    }
  for (const [file, schema] of schemas) {
    result.total++;
    clearPatternCache();
    const start = process.hrtime.bigint();
    try {
      const gbnf = jsonSchemaToGbnf(schema);
      result.compiled++;
      if (keep) result.candidates.push({ file, schema, gbnf });
    } catch (error) {
      if (error instanceof ApiError && error.status === 400) {
        result.refused++;
        const key = reasonKey(error.message);
        result.reasons.set(key, (result.reasons.get(key) ?? 0) + 1);
      } else {
        result.crashed.push(`${file}: ${error instanceof Error ? error.stack : String(error)}`);
      }
    }
    const times = [Number(process.hrtime.bigint() - start) / 1e6];
    for (let i = 1; i < runs; i++) {
      clearPatternCache();
      const again = process.hrtime.bigint();
      try {
        jsonSchemaToGbnf(schema);
      } catch {}
      times.push(Number(process.hrtime.bigint() - again) / 1e6);
    }
    const ms = times.sort((a, b) => a - b)[Math.floor((times.length - 1) / 2)]!;
    result.timesMs.push(ms);
    result.timed.push({ file, ms });
  }
  result.timesMs.sort((a, b) => a - b);
  return result;
}

const pct = (n: number, d: number): string => (d === 0 ? "–" : `${((100 * n) / d).toFixed(1)}%`);

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      top: { type: "string", default: "5" },
      dataset: { type: "string" },
      "show-crashes": { type: "boolean", default: false },
      runs: { type: "string", default: "1" },
      warmup: { type: "string", default: "0" },
      slowest: { type: "string", default: "0" },
      sample: { type: "string" },
      model: { type: "string" },
      "max-tokens": { type: "string", default: "512" },
      threads: { type: "string", default: "1" },
      sequences: { type: "string", default: "4" },
    },
  });
  const root = positionals[0];
  const sample = values.sample === undefined ? 0 : Number(values.sample);
  const runs = Math.max(1, Number(values.runs));
  const warmup = Math.max(0, Number(values.warmup));
  if (root === undefined || (sample > 0 && values.model === undefined)) {
    console.error(
      "usage: npm run bench:schemas -- DATA_DIR [--top 5] [--dataset NAME] [--show-crashes] [--runs 1] [--warmup 0] [--slowest 0] [--sample N --model PATH [--max-tokens 512] [--threads 1] [--sequences 4]]",
    );
    process.exit(2);
  }
  await warmFormatAutomata();
  const subdirs = readdirSync(root)
    .filter((d) => statSync(join(root, d)).isDirectory())
    .filter((d) => values.dataset === undefined || d === values.dataset)
    .sort();
  const datasets =
    subdirs.length > 0
      ? subdirs.map((d) => runDataset(d, join(root, d), sample > 0, runs, warmup))
      : [runDataset(basename(root), root, sample > 0, runs, warmup)];
  const all = emptyResult("**all**");
  for (const d of datasets) {
    all.total += d.total;
    all.compiled += d.compiled;
    all.refused += d.refused;
    all.crashed.push(...d.crashed);
    all.timesMs.push(...d.timesMs);
    for (const [k, n] of d.reasons) all.reasons.set(k, (all.reasons.get(k) ?? 0) + n);
  }
  all.timesMs.sort((a, b) => a - b);
  console.log("| dataset | schemas | compiled | refused | crashed | p50 ms | p99 ms |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const d of [...datasets, all]) {
    console.log(
      `| ${d.name} | ${d.total} | ${pct(d.compiled, d.total)} | ${pct(d.refused, d.total)} | ${d.crashed.length} | ${quantile(d.timesMs, 0.5).toFixed(2)} | ${quantile(d.timesMs, 0.99).toFixed(2)} |`,
    );
  }
  const top = Number(values.top);
  for (const d of [...datasets, all]) {
    const reasons = [...d.reasons].sort((a, b) => b[1] - a[1]).slice(0, top);
    if (reasons.length === 0) continue;
    console.log(`\n${d.name}: top refusals`);
    for (const [reason, n] of reasons) console.log(`  ${String(n).padStart(5)}  ${reason}`);
  }
  const slowest = Number(values.slowest);
  for (const d of slowest > 0 ? datasets : []) {
    console.log(`\n${d.name}: slowest compilations`);
    for (const { file, ms } of [...d.timed].sort((a, b) => b.ms - a.ms).slice(0, slowest))
      console.log(`  ${ms.toFixed(1).padStart(7)} ms  ${file}`);
  }
  if (all.crashed.length > 0) {
    console.log(`\n${all.crashed.length} crash(es)`);
    for (const c of values["show-crashes"] ? all.crashed : all.crashed.slice(0, 3))
      console.log(c.split("\n").slice(0, 4).join("\n"));
    process.exitCode = 1;
  }
  if (sample > 0) {
    const results = await runSample(
      datasets.map((d) => ({ name: d.name, candidates: d.candidates })),
      {
        modelPath: values.model!,
        perDataset: sample,
        maxTokens: Number(values["max-tokens"]),
        threads: Number(values.threads),
        sequences: Number(values.sequences),
      },
    );
    console.log(
      `\nValidity under ${values.model} (temperature 1, max_tokens ${values["max-tokens"]}, ${sample} per dataset):\n`,
    );
    console.log(sampleReport(results));
    if (results.some((r) => r.invalid.length > 0)) process.exitCode = 1;
  }
}

await main();

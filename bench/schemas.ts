/**
 * JSON Schema coverage benchmark of issue 19 (`npm run bench:schemas -- DATA_DIR`).
 *
 * Runs the JSON Schema → GBNF compiler (`jsonSchemaToGbnf`, no cache; the per-pattern automaton cache is
 * cleared before every compilation; the formats' automata are built first, as the server does at start; in
 * a worker thread with the server's compiler heap, see `schemaTimes.ts`) over a folder of JSONSchemaBench
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
import { readdirSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";
import { COMPILER_YOUNG_GENERATION_MB } from "../src/structured/worker/compileService.ts";
import { runSample, sampleReport } from "./schemaSample.ts";
import { type DatasetResult, emptyResult, type TimingJob } from "./schemaTimes.ts";

/** The `p` quantile (0..1) of `sorted` ascending values; 0 for none. */
function quantile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

const pct = (n: number, d: number): string => (d === 0 ? "–" : `${((100 * n) / d).toFixed(1)}%`);

/**
 * Runs `bench/schemaTimes.ts` in a worker thread with the young generation the server's compiler worker
 * has (`structured/worker/compileService.ts`), so that the times are the server's.
 */
function timeDatasets(job: TimingJob): Promise<DatasetResult[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL("../src/structured/worker/tsWorker.mjs", import.meta.url), {
      workerData: job,
      resourceLimits: { maxYoungGenerationSizeMb: COMPILER_YOUNG_GENERATION_MB },
      execArgv: [],
    });
    worker.once("message", (results: DatasetResult[]) => {
      resolve(results);
      void worker.terminate();
    });
    worker.once("error", reject);
  });
}

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
  const subdirs = readdirSync(root)
    .filter((d) => statSync(join(root, d)).isDirectory())
    .filter((d) => values.dataset === undefined || d === values.dataset)
    .sort();
  const datasets = await timeDatasets({
    module: new URL("./schemaTimes.ts", import.meta.url).href,
    datasets:
      subdirs.length > 0
        ? subdirs.map((d) => ({ name: d, dir: join(root, d) }))
        : [{ name: basename(root), dir: root }],
    keep: sample > 0,
    runs,
    warmup,
  });
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

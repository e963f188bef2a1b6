/**
 * The timed part of `bench/schemas.ts`, run in a worker thread with the constraint compiler's heap
 * (`COMPILER_YOUNG_GENERATION_MB`, as `structured/worker/compileService.ts` runs it for the server): compiles
 * each dataset's schemas and posts back one {@link DatasetResult} per dataset.
 *
 * workerData: {@link TimingJob}.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { ConstraintError } from "../src/structured/errors.ts";
import { jsonSchemaToGbnf } from "../src/structured/jsonSchema/compiler.ts";
import { warmFormatAutomata } from "../src/structured/jsonSchema/formats.ts";
import { clearPatternCache } from "../src/structured/regex/regexToGbnf.ts";
import type { SampleCandidate } from "./schemaSample.ts";

/** What `bench/schemas.ts` asks for: datasets (name and folder), whether to keep grammars, runs, warm-up passes. */
export type TimingJob = {
  module: string;
  datasets: { name: string; dir: string }[];
  keep: boolean;
  runs: number;
  warmup: number;
};

export type DatasetResult = {
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

/** A result with nothing counted yet. */
export function emptyResult(name: string): DatasetResult {
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
      if (error instanceof ConstraintError) {
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

// (Imported by `bench/schemas.ts` on the main thread for its types and helpers: the work runs in the worker.)
if (!isMainThread) {
  const job = workerData as TimingJob;
  await warmFormatAutomata();
  parentPort!.postMessage(
    job.datasets.map(({ name, dir }) => runDataset(name, dir, job.keep, job.runs, job.warmup)),
  );
}

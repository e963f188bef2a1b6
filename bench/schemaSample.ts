/**
 * Validity of real generations under compiled JSON Schemas (issue 19), used by `bench/schemas.ts --sample N`.
 *
 * For each dataset, a deterministic sample of the schemas that compile (ordered by a hash of the file name,
 * so the sample does not depend on the folder's order or on which other schemas compile) is generated under
 * the real engine in-process (node-llama-cpp through `ModelHost` and `Scheduler`, as
 * `test/e2e/structuredEngine.test.ts` does) at temperature 1, one seed per schema. Every output that finished
 * with `stop` (the grammar completed) is parsed and checked with ajv (`test/helpers/structuredAjv.ts`); an
 * invalid one is a compiler bug. Outputs cut by `max_tokens` are counted, not checked.
 */

import { createHash } from "node:crypto";
import { ModelHost } from "../src/engine/ModelHost.ts";
import { Scheduler } from "../src/engine/Scheduler.ts";
import { ajvValidator } from "../test/helpers/structuredAjv.ts";
import { type GrammarSample, sampleUnderGrammar } from "./lib/grammarSample.ts";

/** One compiled schema to generate under. */
export type SampleCandidate = { file: string; schema: unknown; gbnf: string };

/** What the sample run found for one dataset. */
export type SampleResult = {
  name: string;
  sampled: number;
  stopped: number;
  valid: number;
  /** Schemas ajv could not compile (not counted as sampled). */
  skipped: string[];
  invalid: { file: string; text: string; errors: string }[];
};

/** Options of {@link runSample}. */
export type SampleOptions = {
  modelPath: string;
  perDataset: number;
  maxTokens: number;
  threads: number;
  sequences: number;
};

/** The first `n` of `candidates` in the order of the SHA-1 of their file names (a stable pseudo-random pick). */
export function pickSample<T extends { file: string }>(candidates: T[], n: number): T[] {
  const key = (file: string): string => createHash("sha1").update(file).digest("hex");
  return [...candidates].sort((a, b) => (key(a.file) < key(b.file) ? -1 : 1)).slice(0, n);
}

/**
 * Generates one output per sampled schema of every dataset (temperature 1, seed = position in the sample)
 * and validates each stopped output with ajv. `datasets` maps a dataset name to its compiled candidates.
 */
export async function runSample(
  datasets: { name: string; candidates: SampleCandidate[] }[],
  options: SampleOptions,
): Promise<SampleResult[]> {
  const host = await ModelHost.load({
    modelPath: options.modelPath,
    sequences: options.sequences,
    maxModelLen: 1024,
    threads: options.threads,
    device: "cpu",
  });
  const scheduler = new Scheduler(host, { prefixCaching: false });
  const promptTokens = host.tokenize("Once upon a time", true);
  const generate = (gbnf: string, seed: number): Promise<GrammarSample> =>
    sampleUnderGrammar(scheduler, promptTokens, gbnf, seed, options.maxTokens);
  const results: SampleResult[] = [];
  try {
    for (const { name, candidates } of datasets) {
      const result: SampleResult = { name, sampled: 0, stopped: 0, valid: 0, skipped: [], invalid: [] };
      const jobs: { candidate: SampleCandidate; seed: number }[] = [];
      for (const candidate of pickSample(candidates, options.perDataset)) {
        try {
          ajvValidator(candidate.schema);
        } catch {
          result.skipped.push(candidate.file);
          continue;
        }
        jobs.push({ candidate, seed: jobs.length + 1 });
      }
      result.sampled = jobs.length;
      await Promise.all(
        Array.from({ length: options.sequences }, async () => {
          for (let job = jobs.shift(); job !== undefined; job = jobs.shift()) {
            const { text, stopped } = await generate(job.candidate.gbnf, job.seed);
            if (!stopped) continue;
            result.stopped++;
            const validate = ajvValidator(job.candidate.schema);
            let ok = false;
            try {
              ok = validate(JSON.parse(text)) === true;
            } catch {}
            if (ok) result.valid++;
            else
              result.invalid.push({
                file: job.candidate.file,
                text,
                errors: JSON.stringify(validate.errors ?? "not JSON").slice(0, 400),
              });
          }
        }),
      );
      results.push(result);
      console.error(`sampled ${name}: ${result.stopped}/${result.sampled} stopped, ${result.valid} valid`);
    }
  } finally {
    await scheduler.close();
  }
  return results;
}

/** The Markdown table of {@link runSample}'s results, then every invalid output with its schema file. */
export function sampleReport(results: SampleResult[]): string {
  const lines = [
    "| dataset | sampled | stopped | valid | invalid |",
    "|---|---:|---:|---:|---:|",
    ...results.map((r) => `| ${r.name} | ${r.sampled} | ${r.stopped} | ${r.valid} | ${r.invalid.length} |`),
  ];
  const sum = (f: (r: SampleResult) => number): number => results.reduce((n, r) => n + f(r), 0);
  lines.push(
    `| **all** | ${sum((r) => r.sampled)} | ${sum((r) => r.stopped)} | ${sum((r) => r.valid)} | ${sum((r) => r.invalid.length)} |`,
  );
  for (const r of results) {
    for (const file of r.skipped) lines.push(`\n${r.name}/${file}: skipped (ajv cannot compile the schema)`);
    for (const bad of r.invalid) {
      lines.push(
        `\nINVALID ${r.name}/${bad.file}: ${JSON.stringify(bad.text).slice(0, 600)}\n  ${bad.errors}`,
      );
    }
  }
  return lines.join("\n");
}

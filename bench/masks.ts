/**
 * The token-mask engine of guided decoding (issue 18), in-process (`npm run bench:masks`):
 *
 * 1. The vocabulary table, built once per model: the first grammar's setup.
 * 2. Per constraint (every accepting schema of `test/fixtures/schemas`, `json_object`, regexes, choices and
 *    the GBNF fixtures, compiled by `src/structured/`): the setup of a sequence's grammar from its GBNF text
 *    (llama.cpp's parse plus a cached first mask: the "compile" a request pays once the table exists).
 * 3. Per grammar state along a seeded random walk of `--steps` allowed tokens: the time of a mask computed
 *    by a pass over the vocabulary (a cache miss), and on a second walk over the same states, that no mask
 *    is computed again (every lookup a hit).
 *
 * Usage: npm run bench:masks -- [--model FILE] [--steps 48] [--threads 2] [--out FILE]
 * (`--threads`: the context's threads, which a mask computation shares its pass over the vocabulary with.)
 * Default model: bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf (made when missing). Prints Markdown and
 * writes it to `--out` (default bench/results/masks.md).
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { nativeAddon } from "../src/engine/native.ts";
import { projectRoot } from "../src/paths.ts";
import { type ConstraintKind, compileConstraint } from "../src/structured/index.ts";
import { seededRandom } from "../test/stress/fuzzCases.ts";
import { DEFAULT_MODEL, ensureModel } from "./lib/runInfo.ts";
import { corpusSchemas, percentile } from "./lib/structuredCompile.ts";

const log = (line: string) => process.stderr.write(`${line}\n`);

/** Every constraint of the corpus as (label, kind, spec). */
function constraints(): { label: string; kind: ConstraintKind; spec: unknown }[] {
  const fixtures = join(projectRoot, "test/fixtures");
  const regexes = (
    JSON.parse(readFileSync(join(fixtures, "regex.json"), "utf8")) as { patterns: { pattern: string }[] }
  ).patterns;
  const grammars = readdirSync(join(fixtures, "grammars")).filter((file) => !file.startsWith("malformed"));
  return [
    ...corpusSchemas().map(({ name, schema }) => ({
      label: name,
      kind: "json_schema" as const,
      spec: schema,
    })),
    { label: "json_object", kind: "json_object", spec: null },
    ...regexes.map(({ pattern }) => ({ label: `regex ${pattern}`, kind: "regex" as const, spec: pattern })),
    { label: "choice", kind: "choice", spec: ["positive", "negative", "neutral"] },
    ...grammars.map((file) => ({
      label: file,
      kind: "grammar" as const,
      spec: readFileSync(join(fixtures, "grammars", file), "utf8"),
    })),
  ];
}

const fmt = (ms: number) => (ms < 1 ? ms.toFixed(3) : ms.toFixed(1));

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      steps: { type: "string", default: "48" },
      threads: { type: "string", default: "2" },
      out: { type: "string" },
    },
  });
  const modelPath = values.model ? resolve(values.model) : DEFAULT_MODEL;
  const steps = Number(values.steps);
  const out = resolve(values.out ?? join(projectRoot, "bench/results/masks.md"));
  await ensureModel(modelPath, log);
  const addon = nativeAddon();
  const model = await addon.loadModel(modelPath, { nGpuLayers: 0, cpuOnly: true });
  const context = new addon.Context(model, {
    nCtx: 256,
    nSeqMax: 1,
    nBatch: 256,
    nUbatch: 256,
    threads: Number(values.threads),
    kvUnified: true,
    maskCacheBytes: 1024 * 1024 * 1024,
  });
  const nVocab = model.info().nVocab;
  let started = performance.now();
  context.grammarMask('root ::= "a"', "root", new Int32Array(), false);
  const tableMs = performance.now() - started;

  const setups: number[] = [];
  const misses: number[] = [];
  let states = 0;
  let replayMisses = 0;
  let skipped = 0;
  for (const { label, kind, spec } of constraints()) {
    let gbnf: string;
    try {
      gbnf = compileConstraint(kind, spec).gbnf;
    } catch {
      skipped++;
      continue;
    }
    // The setup a sequence pays once the table exists: parse, state key, and a cached first mask.
    context.grammarMask(gbnf, "root", new Int32Array(), false);
    started = performance.now();
    context.grammarMask(gbnf, "root", new Int32Array(), false);
    setups.push(performance.now() - started);
    const next = seededRandom(label.length * 7919 + 1);
    const walk: number[] = [];
    for (let step = 0; step < steps; step++) {
      const before = context.maskStats();
      const mask = context.grammarMask(gbnf, "root", Int32Array.from(walk), false);
      const after = context.maskStats();
      if (after.computed > before.computed) misses.push(after.computeMs - before.computeMs);
      states++;
      if (!mask) break;
      const allowed: number[] = [];
      mask.forEach((bit, id) => {
        if (bit && !model.isEog(id)) allowed.push(id);
      });
      // The walk ends on a state whose mask it has computed.
      if (allowed.length === 0 || step === steps - 1) break;
      walk.push(allowed[Math.floor(next() * allowed.length)] as number);
    }
    const before = context.maskStats();
    context.grammarMask(gbnf, "root", Int32Array.from(walk), false);
    replayMisses += context.maskStats().computed - before.computed;
    log(`${label}: ${walk.length} steps`);
  }
  const stats = context.maskStats();
  const row = (name: string, values: number[]) =>
    `| ${name} | ${values.length} | ${fmt(percentile(values, 50))} | ${fmt(percentile(values, 90))} | ${fmt(percentile(values, 99))} | ${fmt(Math.max(...values))} |`;
  const report = [
    `# Token-mask engine (${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC)`,
    "",
    `Command: \`npm run bench:masks -- ${process.argv.slice(2).join(" ")}\`. Model \`${relative(projectRoot, modelPath)}\` (${nVocab} tokens), ${values.threads} threads, load average ${loadavg()[0]?.toFixed(1)}.`,
    "",
    `Vocabulary table (once per model, with the first grammar): ${tableMs.toFixed(0)} ms. Constraints: ${setups.length} (${skipped} refused by the compiler). Walks: ${steps} random allowed tokens each, ${states} states; ${misses.length} masks computed (${(stats.bytes / 1024 / 1024).toFixed(1)} MiB cached, ${((nVocab + 63) >> 6) * 8} bytes per mask).`,
    "",
    "| ms | n | p50 | p90 | p99 | max |",
    "| --- | --- | --- | --- | --- | --- |",
    row("grammar setup per sequence (parse + cached first mask)", setups),
    row("mask computed on a miss (one pass over the vocabulary)", misses),
    "",
    `The same walks again: ${replayMisses} masks computed (every state answered from the cache).`,
  ].join("\n");
  process.stdout.write(`${report}\n`);
  writeFileSync(out, `${report}\n`);
  context.dispose();
  model.dispose();
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exit(1);
  },
);

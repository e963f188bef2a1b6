/**
 * Markdown tables of `bench/structured.ts`: compile times over the schema corpus, constrained vs
 * unconstrained throughput over HTTP (with the targets of issue 5: constrained >= 0.9x unconstrained,
 * compile p50 < 10 ms), and the per-step probe of where constrained decoding spends its time.
 */
import type { SchemaCompileTime } from "./structuredCompile.ts";
import { percentile } from "./structuredCompile.ts";
import type { ProbeMode, ProbeResult } from "./structuredProbe.ts";
import type { StreamTiming } from "./structuredServer.ts";

/** One unconstrained and one constrained request, run back to back. */
export type ThroughputPair = { free: StreamTiming; constrained: StreamTiming };

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(value < 1 ? 3 : 1) : "–");
const rate = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : "–");

function spread(values: readonly number[]): string {
  return `${ms(percentile(values, 50))} / ${ms(percentile(values, 90))} / ${ms(Math.max(...values))}`;
}

/** Compile times: ours alone (cache cleared) and ours plus llama.cpp's parse (`validateGbnf`). */
export function compileTable(pure: SchemaCompileTime[], native: SchemaCompileTime[]): string {
  const slowest = [...pure].sort((a, b) => b.compileMs - a.compileMs).slice(0, 3);
  const compileP50 = percentile(
    pure.map((r) => r.compileMs),
    50,
  );
  const nativeTimes = native.map((r) => r.nativeMs ?? Number.NaN);
  const bytes = pure.map((r) => r.gbnfBytes);
  return [
    `## Compile time (${pure.length} accepting corpus schemas, median per schema)`,
    "",
    "| what | p50 / p90 / max (ms) |",
    "| --- | --- |",
    `| \`compileConstraint\`, cache cleared | ${spread(pure.map((r) => r.compileMs))} |`,
    `| \`validateGbnf\` (our GBNF check + \`llama.createGrammar\`) | ${spread(nativeTimes)} |`,
    `| grammar size (bytes, p50 / p90 / max) | ${percentile(bytes, 50)} / ${percentile(bytes, 90)} / ${Math.max(...bytes)} |`,
    "",
    `Slowest compiles: ${slowest.map((r) => `\`${r.name}\` ${ms(r.compileMs)} ms`).join(", ")}.`,
    `Target compile p50 < 10 ms: **${compileP50 < 10 ? "met" : "missed"}** (${ms(compileP50)} ms).`,
  ].join("\n");
}

type SideStats = { decode: number[]; e2e: number[]; ttft: number[]; tokens: number[]; finish: string };

function side(timings: StreamTiming[]): SideStats {
  const finishes = new Map<string, number>();
  for (const t of timings) finishes.set(t.finishReason, (finishes.get(t.finishReason) ?? 0) + 1);
  return {
    decode: timings.map((t) => (t.decodeMs > 0 ? ((t.tokens - 1) * 1000) / t.decodeMs : Number.NaN)),
    e2e: timings.map((t) => (t.tokens * 1000) / t.totalMs),
    ttft: timings.map((t) => t.ttftMs),
    tokens: timings.map((t) => t.tokens),
    finish: [...finishes].map(([reason, count]) => `${count} ${reason}`).join(", "),
  };
}

/** Unconstrained vs constrained: per-side medians and the ratio the target is about. */
export function throughputTable(pairs: ThroughputPair[], maxTokens: number): string {
  const free = side(pairs.map((p) => p.free));
  const constrained = side(pairs.map((p) => p.constrained));
  const row = (name: string, s: SideStats) =>
    `| ${name} | ${pairs.length} | ${rate(percentile(s.tokens, 50))} | ${s.finish} | ${ms(percentile(s.ttft, 50))} | ${rate(percentile(s.decode, 50))} | ${rate(percentile(s.e2e, 50))} |`;
  const ratio = percentile(constrained.decode, 50) / percentile(free.decode, 50);
  const pairRatios = pairs.map(
    (_, i) => (constrained.decode[i] ?? Number.NaN) / (free.decode[i] ?? Number.NaN),
  );
  const e2eRatio = percentile(constrained.e2e, 50) / percentile(free.e2e, 50);
  const sample = pairs.at(-1)?.constrained.text ?? "";
  return [
    `## Throughput over HTTP (one request at a time, max_tokens ${maxTokens}, medians)`,
    "",
    "| side | requests | tokens | finish | TTFT (ms) | decode tok/s | end-to-end tok/s |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    row("unconstrained (`ignore_eos`)", free),
    row("`guided_json` api-order", constrained),
    "",
    `Constrained / unconstrained decode tok/s: **${ratio.toFixed(2)}x** (per-pair ratios p50 ${percentile(pairRatios, 50).toFixed(2)}, min ${Math.min(...pairRatios).toFixed(2)}); end-to-end ${e2eRatio.toFixed(2)}x.`,
    `Target >= 0.9x: **${ratio >= 0.9 ? "met" : "missed"}**.`,
    "",
    `Last constrained output: \`${JSON.stringify(sample.slice(0, 160))}\``,
  ].join("\n");
}

/** Per-step times of the probe modes, and what they say about the grammar's cost. */
export function probeTable(results: ProbeResult[], vocabularySize: number): string {
  const by = (mode: ProbeMode) => results.find((r) => r.mode === mode);
  const free = by("free");
  const grammar = by("grammar");
  const freeProbs = by("free+probs");
  const grammarProbs = by("grammar+probs");
  const anyGrammar = by("any-grammar");
  const lines = [
    `## Where the time goes (in-process, node-llama-cpp, vocabulary ${vocabularySize} tokens)`,
    "",
    "| mode | steps | step p50 (ms) | step p90 (ms) | step mean (ms) | 10%-trimmed mean (ms) | tok/s |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...results.map(
      (r) =>
        `| ${r.mode} | ${r.steps} | ${ms(r.stepMsP50)} | ${ms(r.stepMsP90)} | ${ms(r.stepMsMean)} | ${ms(r.stepMsTrimmed)} | ${rate(r.tokensPerSecond)} |`,
    ),
  ];
  if (free && grammar && freeProbs && grammarProbs) {
    const fullPass = grammarProbs.stepMsTrimmed - freeProbs.stepMsTrimmed;
    const overhead = grammar.stepMsTrimmed - free.stepMsTrimmed;
    const threshold = free.stepMsP50 + fullPass / 2;
    const slow = grammar.stepMs.filter((t) => t > threshold).length;
    lines.push(
      "",
      `One grammar pass over the whole vocabulary costs about ${ms(fullPass)} ms per step (grammar+probs - free+probs, trimmed means).`,
      `With the grammar as the server samples, a step costs ${ms(overhead)} ms more than free (trimmed means, ${((overhead / free.stepMsTrimmed) * 100).toFixed(0)}%).`,
      anyGrammar
        ? `With a grammar whose checks always pass (\`any-grammar\`), a step differs from free by ${ms(anyGrammar.stepMsTrimmed - free.stepMsTrimmed)} ms (${(((anyGrammar.stepMsTrimmed - free.stepMsTrimmed) / free.stepMsTrimmed) * 100).toFixed(0)}%): the price when the model's first pick follows the grammar.`
        : "",
      `${slow} of ${grammar.steps} grammar steps (${((slow / Math.max(1, grammar.steps)) * 100).toFixed(0)}%) took longer than free p50 + half a full pass (${ms(threshold)} ms), i.e. the sampled token was rejected and the grammar re-applied to the whole vocabulary.`,
    );
  }
  return lines.join("\n");
}

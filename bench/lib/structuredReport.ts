/**
 * Markdown tables of `bench/structured.ts`: compile times over the schema corpus (target p50 < 10 ms),
 * and per constraint kind the constrained vs unconstrained throughput over HTTP at each concurrency with
 * issue 18's targets, the server's mask-cache / jump-forward / step-time figures, and the validity of
 * the finished constrained outputs.
 */
import type { SchemaCompileTime } from "./structuredCompile.ts";
import { percentile } from "./structuredCompile.ts";
import type { MetricsSnapshot } from "./structuredMetrics.ts";
import type { KindResult, LevelResult, Sample, Side } from "./structuredRun.ts";

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
    `| \`validateGbnf\` (our GBNF check + llama.cpp's parse in the native addon) | ${spread(nativeTimes)} |`,
    `| grammar size (bytes, p50 / p90 / max) | ${percentile(bytes, 50)} / ${percentile(bytes, 90)} / ${Math.max(...bytes)} |`,
    "",
    `Slowest compiles: ${slowest.map((r) => `\`${r.name}\` ${ms(r.compileMs)} ms`).join(", ")}.`,
    `Target compile p50 < 10 ms: **${compileP50 < 10 ? "met" : "missed"}** (${ms(compileP50)} ms).`,
  ].join("\n");
}

const ratioText = (ratio: number) => (Number.isFinite(ratio) ? `${ratio.toFixed(2)}x` : "–");
const median = (values: readonly number[]) => percentile(values.filter(Number.isFinite), 50);

/** Median constrained decode tok/s over median unconstrained decode tok/s of one level. */
export function levelRatio(level: LevelResult): number {
  return (
    median(level.constrained.samples.map((s) => s.decodeRate)) /
    median(level.free.samples.map((s) => s.decodeRate))
  );
}

function verdict(ratio: number, target: number | null): string {
  if (target === null) return "–";
  if (!Number.isFinite(ratio)) return "no figure";
  return ratio >= target ? "met" : "**missed**";
}

function finishes(samples: readonly Sample[]): string {
  const counts = new Map<string, number>();
  for (const s of samples)
    counts.set(s.finishReason || "(none)", (counts.get(s.finishReason || "(none)") ?? 0) + 1);
  return [...counts].map(([reason, count]) => `${count} ${reason}`).join(", ");
}

function tokens(samples: readonly Sample[]): string {
  const counts = samples.map((s) => s.tokens);
  return `${percentile(counts, 50)} (${Math.min(...counts)}–${Math.max(...counts)})`;
}

function sideRow(
  concurrency: string,
  name: string,
  samples: readonly Sample[],
  batchRates: readonly number[],
  tail: string,
) {
  const ttft = median(samples.map((s) => s.ttftMs));
  const estimated = samples.some((s) => s.serverTtft) ? "*" : "";
  return `| ${concurrency} | ${name} | ${samples.length} | ${tokens(samples)} | ${finishes(samples)} | ${ms(ttft)}${estimated} | ${rate(median(samples.map((s) => s.decodeRate)))} | ${rate(median(batchRates))} | ${tail}`;
}

/** Issue 18's targets, one row per kind and concurrency. */
export function summaryTable(results: readonly KindResult[]): string {
  const lines = [
    "## Summary: constrained / unconstrained decode tok/s (medians of per-request rates)",
    "",
    "| kind | concurrency | ratio | target | verdict | valid / checked |",
    "| --- | --- | --- | --- | --- | --- |",
  ];
  for (const result of results) {
    result.levels.forEach((level, index) => {
      const ratio = levelRatio(level);
      const target = result.kind.target === null ? "–" : `>= ${result.kind.target.toFixed(2)}x`;
      const valid = index === 0 ? `${result.checked - result.invalid.length} / ${result.checked}` : "";
      lines.push(
        `| ${result.kind.label} | ${level.concurrency} | ${ratioText(ratio)} | ${target} | ${verdict(ratio, result.kind.target)} | ${valid} |`,
      );
    });
  }
  lines.push(
    "",
    "Valid / checked: the kind's constrained outputs that finished (`stop`, or `tool_calls`), warm-up and both levels together.",
  );
  return lines.join("\n");
}

function stepMeans(metrics: MetricsSnapshot): string {
  const decode = metrics.decodeSteps > 0 ? (metrics.decodeSeconds * 1000) / metrics.decodeSteps : Number.NaN;
  const sample = metrics.sampleSteps > 0 ? (metrics.sampleSeconds * 1000) / metrics.sampleSteps : Number.NaN;
  return `${metrics.decodeSteps} steps, decode ${ms(decode)} ms, sample ${ms(sample)} ms`;
}

function maskLine(metrics: MetricsSnapshot, tokensOut: number): string {
  const lookups = metrics.maskHits + metrics.maskMisses;
  const hitRate = lookups > 0 ? `${((metrics.maskHits / lookups) * 100).toFixed(1)}%` : "–";
  const jump =
    tokensOut > 0
      ? ` (${((metrics.jumpForwardTokens / tokensOut) * 100).toFixed(0)}% of ${tokensOut} tokens)`
      : "";
  return `mask cache ${metrics.maskHits} hits / ${metrics.maskMisses} misses (hit rate ${hitRate}), jump-forward ${metrics.jumpForwardTokens} tokens${jump}`;
}

const sideTokens = (side: Side) => side.samples.reduce((total, s) => total + s.tokens, 0);

/** One kind's table (warm-up, then each level's two sides) and its `/metrics` figures. */
export function kindSection(result: KindResult, maxTokens: number): string {
  const { kind, warmup } = result;
  const lines = [
    `## ${kind.label}`,
    "",
    `Endpoint \`/v1/${kind.endpoint === "chat" ? "chat/completions" : "completions"}\`, ${kind.server} server, max_tokens ${maxTokens}; unconstrained = same request without the constraint, with \`ignore_eos\`.`,
    "",
    "| concurrency | side | requests | tokens p50 (min–max) | finish | TTFT p50 (ms) | decode tok/s p50 | batch tok/s | ratio | target | verdict |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    sideRow("1", "warm-up, unconstrained", [warmup.free], [], " | | |"),
    sideRow("1", "warm-up, constrained (grammar new to the cache)", [warmup.constrained], [], " | | |"),
  ];
  for (const level of result.levels) {
    const ratio = levelRatio(level);
    const target = kind.target === null ? "–" : `>= ${kind.target.toFixed(2)}x`;
    const c = String(level.concurrency);
    lines.push(
      sideRow(c, "unconstrained", level.free.samples, level.free.batchRates, " | | |"),
      sideRow(
        c,
        "constrained",
        level.constrained.samples,
        level.constrained.batchRates,
        ` ${ratioText(ratio)} | ${target} | ${verdict(ratio, kind.target)} |`,
      ),
    );
  }
  if (
    [
      warmup.free,
      warmup.constrained,
      ...result.levels.flatMap((l) => [...l.free.samples, ...l.constrained.samples]),
    ].some((s) => s.serverTtft)
  )
    lines.push(
      "",
      "\\* The stream sent the output at once (a tool call is sent whole once parsed): TTFT is the server's (`vllm:time_to_first_token_seconds`, the batch's mean) and decode time is the request's time less it.",
    );
  lines.push("", "Server (`/metrics` differences, per side):", "");
  lines.push(
    `- warm-up constrained: ${maskLine(warmup.constrainedMetrics, warmup.constrained.tokens)}; ${stepMeans(warmup.constrainedMetrics)}`,
  );
  for (const level of result.levels) {
    lines.push(
      `- c=${level.concurrency} constrained: ${maskLine(level.constrained.metrics, sideTokens(level.constrained))}; step means: ${stepMeans(level.constrained.metrics)}`,
      `- c=${level.concurrency} unconstrained: step means: ${stepMeans(level.free.metrics)}`,
    );
  }
  const last = result.levels.at(-1)?.constrained.samples.at(-1) ?? warmup.constrained;
  const output = last.toolCalls.length > 0 ? JSON.stringify(last.toolCalls) : last.text;
  lines.push(
    "",
    `Last constrained output (${last.finishReason}): \`${JSON.stringify(output.slice(0, 200))}\``,
  );
  return lines.join("\n");
}

/** The invalid finished outputs of every kind, in full. */
export function validitySection(results: readonly KindResult[]): string {
  const checked = results.reduce((total, r) => total + r.checked, 0);
  const invalid = results.flatMap((r) => r.invalid.map((i) => ({ ...i, kind: r.kind.name })));
  const lines = [
    "## Validity of finished constrained outputs",
    "",
    `${checked - invalid.length} of ${checked} valid (JSON.parse + ajv for schemas and tool arguments, JSON.parse for \`json_object\`, a full match of a regex for the regex kind and the chess GBNF, membership for the choice).`,
  ];
  if (invalid.length > 0) {
    lines.push("", "| kind | concurrency | reason | output |", "| --- | --- | --- | --- |");
    for (const i of invalid)
      lines.push(
        `| ${i.kind} | ${i.concurrency} | ${i.reason.replaceAll("|", "\\|")} | \`${JSON.stringify(i.output).replaceAll("|", "\\|")}\` |`,
      );
  }
  return lines.join("\n");
}

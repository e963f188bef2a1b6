/**
 * The throughput measurement of `bench/structured.ts` for one constraint kind on one server: one warm-up
 * of each side, then, at concurrency 1, `requests` unconstrained / constrained pairs (alternating which
 * goes first), and at concurrency 4, `rounds` rounds of a batch of 4 concurrent unconstrained requests and
 * a batch of 4 constrained ones (alternating which batch goes first). `/metrics` is read around every
 * batch, so mask-cache, jump-forward and step-time figures are attributed to the side that caused them.
 */
import type { ConstraintKind } from "./structuredKinds.ts";
import { addMetrics, diffMetrics, type MetricsSnapshot, zeroMetrics } from "./structuredMetrics.ts";
import type { StreamTiming, StructuredServer } from "./structuredServer.ts";

/** One request's timing with its decode rate and where its TTFT came from. */
export type Sample = StreamTiming & {
  /** (tokens - 1) / decode time, tok/s; NaN when fewer than 2 tokens. */
  decodeRate: number;
  /**
   * True when the stream sent the tokens at once (a chat tool call is sent whole once parsed): TTFT is
   * then the server's (`vllm:time_to_first_token_seconds`, the batch's mean) and decode time is the
   * request's total time less that TTFT.
   */
  serverTtft: boolean;
};

/** One side (unconstrained or constrained) of a level. */
export type Side = {
  samples: Sample[];
  /** Completion tokens per second of each batch: its tokens over its wall time. */
  batchRates: number[];
  /** `/metrics` differences summed over this side's batches. */
  metrics: MetricsSnapshot;
};

/** One concurrency level of a kind. */
export type LevelResult = { concurrency: number; free: Side; constrained: Side };

/** A constrained output that finished (stop / tool_calls) and failed its check. */
export type InvalidOutput = { concurrency: number; reason: string; output: string };

/** Everything measured for one kind. */
export type KindResult = {
  kind: ConstraintKind;
  /** The warm-up requests (the constrained one meets a mask cache that has not seen this grammar). */
  warmup: { free: Sample; constrained: Sample; constrainedMetrics: MetricsSnapshot };
  levels: LevelResult[];
  /** Constrained outputs whose validity was checked (warm-up included), and the invalid ones. */
  checked: number;
  invalid: InvalidOutput[];
};

/** What {@link measureKind} needs besides the server and the kind. */
export type RunOptions = {
  maxTokens: number;
  /** Pairs at concurrency 1. */
  requests: number;
  /** Rounds at concurrency 4 (each a batch of 4 per side). */
  rounds: number;
  /** Concurrency of the batched level (4). */
  concurrency: number;
  /** The sampling, as request fields. */
  sampling: Record<string, unknown>;
  completionsPrompt: string;
  chatPrompt: string;
  log: (line: string) => void;
};

function emptySide(): Side {
  return { samples: [], batchRates: [], metrics: zeroMetrics() };
}

function toSample(timing: StreamTiming, batch: MetricsSnapshot): Sample {
  let { ttftMs, decodeMs } = timing;
  const serverTtft = timing.tokens > 1 && timing.tokenChunks < 2;
  if (serverTtft) {
    ttftMs = batch.ttftCount > 0 ? (batch.ttftSeconds / batch.ttftCount) * 1000 : Number.NaN;
    decodeMs = timing.totalMs - ttftMs;
  }
  const decodeRate = timing.tokens > 1 && decodeMs > 0 ? ((timing.tokens - 1) * 1000) / decodeMs : Number.NaN;
  return { ...timing, ttftMs, decodeMs, decodeRate, serverTtft };
}

/**
 * Measures one kind on `server` (see the file comment) and checks every finished constrained output.
 * @throws Error when a request fails (HTTP error or an error event in its stream).
 */
export async function measureKind(
  server: StructuredServer,
  kind: ConstraintKind,
  options: RunOptions,
): Promise<KindResult> {
  const base: Record<string, unknown> = {
    ...options.sampling,
    max_tokens: options.maxTokens,
    ...(kind.endpoint === "chat"
      ? { messages: [{ role: "user", content: options.chatPrompt }] }
      : { prompt: options.completionsPrompt }),
  };
  const freeBody = { ...base, ignore_eos: true };
  const constrainedBody = { ...base, ...kind.fields };
  let checked = 0;
  const invalid: InvalidOutput[] = [];
  const check = (sample: Sample, concurrency: number) => {
    if (!kind.finished.includes(sample.finishReason)) return;
    checked++;
    const reason = kind.check(sample);
    if (reason) {
      const output = sample.toolCalls.length > 0 ? JSON.stringify(sample.toolCalls) : sample.text;
      invalid.push({ concurrency, reason, output });
    }
  };

  /** `count` concurrent requests of one side, with `/metrics` read before and after. */
  const batch = async (constrained: boolean, count: number, side: Side) => {
    const before = await server.metrics();
    const started = performance.now();
    const timings = await Promise.all(
      Array.from({ length: count }, () =>
        server.stream(constrained ? constrainedBody : freeBody, kind.endpoint),
      ),
    );
    const wallMs = performance.now() - started;
    const delta = diffMetrics(await server.metrics(), before);
    const samples = timings.map((timing) => toSample(timing, delta));
    side.samples.push(...samples);
    side.batchRates.push((timings.reduce((total, t) => total + t.tokens, 0) * 1000) / wallMs);
    side.metrics = addMetrics(side.metrics, delta);
    if (constrained) for (const sample of samples) check(sample, count);
    return samples;
  };

  const warmFree = emptySide();
  const warmConstrained = emptySide();
  const [free] = await batch(false, 1, warmFree);
  const [constrained] = await batch(true, 1, warmConstrained);
  if (!free || !constrained) throw new Error("no warm-up sample");
  options.log(
    `${kind.name} warm-up: free ${free.tokens} tokens, constrained ${constrained.tokens} (${constrained.finishReason}, ${constrained.decodeRate.toFixed(1)} tok/s)`,
  );

  const levels: LevelResult[] = [];
  const one: LevelResult = { concurrency: 1, free: emptySide(), constrained: emptySide() };
  for (let i = 0; i < options.requests; i++) {
    const order = i % 2 === 0 ? [false, true] : [true, false];
    for (const side of order) await batch(side, 1, side ? one.constrained : one.free);
  }
  levels.push(one);
  options.log(`${kind.name}@1: ${options.requests} pairs`);
  const many: LevelResult = { concurrency: options.concurrency, free: emptySide(), constrained: emptySide() };
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? [false, true] : [true, false];
    for (const side of order) await batch(side, options.concurrency, side ? many.constrained : many.free);
  }
  if (options.rounds > 0) levels.push(many);
  options.log(`${kind.name}@${options.concurrency}: ${options.rounds} rounds`);
  return {
    kind,
    warmup: { free, constrained, constrainedMetrics: warmConstrained.metrics },
    levels,
    checked,
    invalid,
  };
}

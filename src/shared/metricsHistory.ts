/**
 * The dashboard's per-model series computed from scrapes of /metrics. Shared by the web UI (which
 * scrapes every 2 s while the dashboard is open) and the server (`src/server/metricsHistory.ts`, which
 * samples its own registry so that a dashboard opened late still shows the last 10 minutes): no Node
 * or DOM API here.
 */
import { type Buckets, bucketDelta, bucketsOf, histogramQuantile, type Sample, sumOf } from "./prometheus.ts";

/** vLLM's metric names, which lmserve exposes at /metrics (all labelled `model_name`). */
export const METRIC = {
  running: "vllm:num_requests_running",
  waiting: "vllm:num_requests_waiting",
  kvCache: "vllm:kv_cache_usage_perc",
  promptTokens: "vllm:prompt_tokens_total",
  generationTokens: "vllm:generation_tokens_total",
  requestSuccess: "vllm:request_success_total",
  ttft: "vllm:time_to_first_token_seconds",
  itl: "vllm:inter_token_latency_seconds",
  e2e: "vllm:e2e_request_latency_seconds",
  prefixQueries: "vllm:prefix_cache_queries_total",
  prefixHits: "vllm:prefix_cache_hits_total",
} as const;

/** Latency percentiles in seconds (undefined: no observation in the window). */
export type Percentiles = { p50?: number | undefined; p90?: number | undefined; p99?: number | undefined };

/** What the dashboard shows for one model at one scrape. */
export type ModelPoint = {
  /** Scrape time, ms since the epoch. */
  time: number;
  running?: number | undefined;
  waiting?: number | undefined;
  /** KV cache usage, 0..1. */
  kvCache?: number | undefined;
  /** Generated tokens per second since the previous scrape. */
  outputTps?: number | undefined;
  /** Prompt tokens per second since the previous scrape. */
  promptTps?: number | undefined;
  /** TTFT / inter-token / end-to-end latency percentiles over the last {@link WINDOW_MS}. */
  ttft: Percentiles;
  itl: Percentiles;
  e2e: Percentiles;
  /** Totals since the server started. */
  generationTokens?: number | undefined;
  promptTokens?: number | undefined;
  outcomes: Record<string, number>;
  prefixHitRate?: number | undefined;
};

/** Percentiles are computed over the observations of this window. */
export const WINDOW_MS = 30_000;
/** How often the dashboard (and the server's sampler) scrapes /metrics. */
export const POLL_MS = 2_000;
/** How much history the charts keep: 10 minutes. */
export const HISTORY_MS = 10 * 60_000;
/** The most points kept per model: one every {@link POLL_MS} over {@link HISTORY_MS} (300). */
export const MAX_POINTS = HISTORY_MS / POLL_MS;

/** GET /metrics/history's body: every model's points, oldest first. */
export type HistorySnapshot = { interval_ms: number; models: Record<string, ModelPoint[]> };

type Scrape = { time: number; samples: Sample[] };

/** The scrapes of /metrics so far, turned into per-model points for the charts. */
export class MetricsHistory {
  private readonly scrapes: Scrape[] = [];
  private readonly points = new Map<string, ModelPoint[]>();

  /** Adds a scrape taken at `time` (ms) and computes every model's point. */
  add(time: number, samples: Sample[]): void {
    const previous = this.scrapes.at(-1);
    const windowStart = this.scrapes.find((scrape) => scrape.time >= time - WINDOW_MS - 1_000);
    this.scrapes.push({ time, samples });
    while ((this.scrapes[0]?.time ?? time) < time - WINDOW_MS - 5_000) this.scrapes.shift();
    for (const model of modelNames(samples)) {
      const point = modelPoint(model, time, samples, previous, windowStart);
      const list = this.points.get(model) ?? [];
      list.push(point);
      while (list.length > MAX_POINTS || (list[0]?.time ?? time) < time - HISTORY_MS) list.shift();
      this.points.set(model, list);
    }
  }

  /**
   * Seeds the series with points computed elsewhere (the server's history), before any scrape of
   * this instance: points newer than a model's last one are appended.
   */
  load(snapshot: HistorySnapshot): void {
    for (const [model, points] of Object.entries(snapshot.models)) {
      const list = this.points.get(model) ?? [];
      const last = list.at(-1)?.time ?? Number.NEGATIVE_INFINITY;
      list.push(...points.filter((point) => point.time > last));
      list.sort((a, b) => a.time - b.time);
      while (list.length > MAX_POINTS) list.shift();
      this.points.set(model, list);
    }
  }

  /** Every model's points, as GET /metrics/history answers them. */
  snapshot(): HistorySnapshot {
    const models: Record<string, ModelPoint[]> = {};
    for (const model of this.models()) models[model] = this.series(model);
    return { interval_ms: POLL_MS, models };
  }

  /** The models seen so far. */
  models(): string[] {
    return [...this.points.keys()].sort();
  }

  /** One model's points, oldest first. */
  series(model: string): ModelPoint[] {
    return this.points.get(model) ?? [];
  }
}

/** The `model_name` label values present in a scrape. */
export function modelNames(samples: Sample[]): string[] {
  const names = new Set<string>();
  for (const sample of samples) {
    if (sample.name.startsWith("vllm:") && sample.labels.model_name !== undefined)
      names.add(sample.labels.model_name);
  }
  return [...names];
}

function modelPoint(
  model: string,
  time: number,
  samples: Sample[],
  previous?: Scrape,
  windowStart?: Scrape,
): ModelPoint {
  const match = { model_name: model };
  const counter = (name: string, from: Sample[]) =>
    sumOf(from, name, match) ?? sumOf(from, name.replace(/_total$/, ""), match);
  const rate = (name: string) => {
    if (!previous) return undefined;
    const now = counter(name, samples);
    const before = counter(name, previous.samples);
    const seconds = (time - previous.time) / 1000;
    return now === undefined || seconds <= 0 ? undefined : Math.max(0, now - (before ?? 0)) / seconds;
  };
  const windowed = (name: string): Percentiles => {
    const now = bucketsOf(samples, name, match);
    const delta: Buckets = windowStart ? bucketDelta(now, bucketsOf(windowStart.samples, name, match)) : now;
    return {
      p50: histogramQuantile(0.5, delta),
      p90: histogramQuantile(0.9, delta),
      p99: histogramQuantile(0.99, delta),
    };
  };
  const outcomes: Record<string, number> = {};
  for (const sample of samples) {
    if (sample.name !== METRIC.requestSuccess || sample.labels.model_name !== model) continue;
    const reason = sample.labels.finished_reason ?? "unknown";
    outcomes[reason] = (outcomes[reason] ?? 0) + sample.value;
  }
  const queries = counter(METRIC.prefixQueries, samples);
  const hits = counter(METRIC.prefixHits, samples);
  const hasItl = samples.some((sample) => sample.name === `${METRIC.itl}_bucket`);
  return {
    time,
    running: sumOf(samples, METRIC.running, match),
    waiting: sumOf(samples, METRIC.waiting, match),
    kvCache: sumOf(samples, METRIC.kvCache, match),
    outputTps: rate(METRIC.generationTokens),
    promptTps: rate(METRIC.promptTokens),
    ttft: windowed(METRIC.ttft),
    // vLLM before 0.11 called the inter-token histogram time_per_output_token.
    itl: windowed(hasItl ? METRIC.itl : "vllm:time_per_output_token_seconds"),
    e2e: windowed(METRIC.e2e),
    generationTokens: counter(METRIC.generationTokens, samples),
    promptTokens: counter(METRIC.promptTokens, samples),
    outcomes,
    ...(queries !== undefined && queries > 0 && hits !== undefined ? { prefixHitRate: hits / queries } : {}),
  };
}

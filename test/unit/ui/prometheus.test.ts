import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { MetricsHistory } from "../../../src/shared/metricsHistory.ts";
import {
  bucketDelta,
  bucketsOf,
  histogramQuantile,
  parsePrometheus,
  sumOf,
} from "../../../src/shared/prometheus.ts";

/** A registry shaped like lmserve's /metrics (vLLM names, `model_name` label), filled by prom-client. */
function vllmRegistry() {
  const registry = new Registry();
  const labelNames = ["model_name"] as const;
  const metrics = {
    running: new Gauge({ name: "vllm:num_requests_running", help: "h", labelNames, registers: [registry] }),
    generation: new Counter({
      name: "vllm:generation_tokens_total",
      help: "h",
      labelNames,
      registers: [registry],
    }),
    success: new Counter({
      name: "vllm:request_success_total",
      help: "h",
      labelNames: ["model_name", "finished_reason"],
      registers: [registry],
    }),
    ttft: new Histogram({
      name: "vllm:time_to_first_token_seconds",
      help: "h",
      labelNames,
      buckets: [0.01, 0.1, 1],
      registers: [registry],
    }),
  };
  return { registry, metrics };
}

describe("parsePrometheus", () => {
  it("reads prom-client's exposition: names with colons, labels, histogram buckets", async () => {
    const { registry, metrics } = vllmRegistry();
    metrics.running.set({ model_name: "a" }, 3);
    metrics.generation.inc({ model_name: "a" }, 120);
    metrics.generation.inc({ model_name: "b" }, 7);
    metrics.success.inc({ model_name: "a", finished_reason: "stop" }, 2);
    metrics.success.inc({ model_name: "a", finished_reason: "length" });
    for (const seconds of [0.005, 0.05, 0.05, 0.5]) metrics.ttft.observe({ model_name: "a" }, seconds);
    const samples = parsePrometheus(await registry.metrics());

    assert.equal(sumOf(samples, "vllm:num_requests_running", { model_name: "a" }), 3);
    assert.equal(sumOf(samples, "vllm:generation_tokens_total", { model_name: "a" }), 120);
    assert.equal(sumOf(samples, "vllm:generation_tokens_total"), 127);
    assert.equal(sumOf(samples, "vllm:request_success_total", { model_name: "a" }), 3);
    assert.equal(sumOf(samples, "vllm:nothing"), undefined);
    assert.deepEqual(bucketsOf(samples, "vllm:time_to_first_token_seconds", { model_name: "a" }), [
      { le: 0.01, count: 1 },
      { le: 0.1, count: 3 },
      { le: 1, count: 4 },
      { le: Number.POSITIVE_INFINITY, count: 4 },
    ]);
    assert.equal(sumOf(samples, "vllm:time_to_first_token_seconds_count", { model_name: "a" }), 4);
  });

  it("unescapes label values, keeps special values and skips junk lines", () => {
    const samples = parsePrometheus(
      [
        "# HELP x help",
        "# TYPE x gauge",
        'x{path="a\\"b\\\\c\\nd",other="1"} 2.5 1700000000000',
        "y NaN",
        "z +Inf",
        "not a sample line at all",
        "w{broken=} 1",
      ].join("\n"),
    );
    assert.deepEqual(samples[0], { name: "x", labels: { path: 'a"b\\c\nd', other: "1" }, value: 2.5 });
    assert.ok(Number.isNaN(samples[1]?.value));
    assert.equal(samples[2]?.value, Number.POSITIVE_INFINITY);
    assert.equal(samples.length, 3);
  });
});

describe("histogramQuantile", () => {
  const buckets = [
    { le: 0.1, count: 50 },
    { le: 0.2, count: 90 },
    { le: 0.4, count: 100 },
    { le: Number.POSITIVE_INFINITY, count: 100 },
  ];

  it("interpolates inside the bucket as Prometheus does", () => {
    assert.equal(histogramQuantile(0.5, buckets), 0.1);
    assert.equal(histogramQuantile(0.25, buckets), 0.05);
    assert.ok(Math.abs((histogramQuantile(0.7, buckets) ?? 0) - 0.15) < 1e-12);
    assert.ok(Math.abs((histogramQuantile(0.95, buckets) ?? 0) - 0.3) < 1e-12);
  });

  it("reports the largest finite bound for the +Inf bucket and nothing for an empty histogram", () => {
    const overflow = [
      { le: 1, count: 1 },
      { le: Number.POSITIVE_INFINITY, count: 4 },
    ];
    assert.equal(histogramQuantile(0.9, overflow), 1);
    assert.equal(histogramQuantile(0.5, [{ le: Number.POSITIVE_INFINITY, count: 0 }]), undefined);
    assert.equal(histogramQuantile(0.5, []), undefined);
  });

  it("bucketDelta keeps only the observations between two scrapes", () => {
    const earlier = [
      { le: 0.1, count: 40 },
      { le: Number.POSITIVE_INFINITY, count: 40 },
    ];
    const later = [
      { le: 0.1, count: 40 },
      { le: Number.POSITIVE_INFINITY, count: 42 },
    ];
    assert.deepEqual(bucketDelta(later, earlier), [
      { le: 0.1, count: 0 },
      { le: Number.POSITIVE_INFINITY, count: 2 },
    ]);
  });
});

describe("MetricsHistory", () => {
  it("turns successive scrapes into per-model rates, windowed percentiles and totals", async () => {
    const { registry, metrics } = vllmRegistry();
    const history = new MetricsHistory();
    const t0 = 1_000_000;
    metrics.generation.inc({ model_name: "a" }, 100);
    metrics.ttft.observe({ model_name: "a" }, 0.5);
    history.add(t0, parsePrometheus(await registry.metrics()));
    metrics.generation.inc({ model_name: "a" }, 50);
    metrics.success.inc({ model_name: "a", finished_reason: "abort" });
    for (let i = 0; i < 10; i++) metrics.ttft.observe({ model_name: "a" }, 0.005);
    history.add(t0 + 2_000, parsePrometheus(await registry.metrics()));

    assert.deepEqual(history.models(), ["a"]);
    const [first, second] = history.series("a");
    assert.equal(first?.outputTps, undefined, "no rate without a previous scrape");
    assert.equal(second?.outputTps, 25);
    assert.equal(second?.generationTokens, 150);
    assert.deepEqual(second?.outcomes, { abort: 1 });
    // The window holds only the ten fast observations made after the first scrape.
    assert.ok((second?.ttft.p99 ?? 1) <= 0.01, String(second?.ttft.p99));
  });
});

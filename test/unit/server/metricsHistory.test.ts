/**
 * The server's dashboard history: the sampler turns the registry into the shared per-model points
 * (rates, percentiles) on a fake clock, keeps at most 300 per model, runs an unref'd timer that stops
 * when the app closes, and GET /metrics/history answers them under /metrics' auth rule.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { GenerationResult } from "../../../src/engine/types.ts";
import { buildApp } from "../../../src/server/app.ts";
import { ServerMetrics } from "../../../src/server/metrics.ts";
import { MetricsSampler } from "../../../src/server/metricsHistory.ts";
import { DEFAULT_OPERATIONS } from "../../../src/server/operations.ts";
import { ModelRegistry } from "../../../src/serving/ModelRegistry.ts";
import { SeedSource } from "../../../src/serving/request/generationParams.ts";
import { MAX_POINTS, MetricsHistory } from "../../../src/shared/metricsHistory.ts";

function finished(completionTokens: number): GenerationResult {
  return {
    finishReason: "stop",
    stopReason: null,
    promptTokens: 5,
    completionTokens,
    cachedTokens: 0,
    cumulativeLogprob: Number.NaN,
  } as GenerationResult;
}

function appWith(metrics: ServerMetrics, protectMetrics = false) {
  return buildApp(
    { registry: new ModelRegistry(), seeds: new SeedSource(0), isReady: () => true, metrics },
    {
      logger: false,
      operations: { ...DEFAULT_OPERATIONS, apiKeys: protectMetrics ? ["k"] : [], protectMetrics },
    },
  );
}

describe("server metrics history", () => {
  it("samples the registry into per-model points with rates and percentiles", async () => {
    const metrics = new ServerMetrics();
    let now = 1_000_000;
    const sampler = new MetricsSampler(metrics, 2_000, () => now);
    const events = metrics.eventsFor("m");
    events.onFinished?.(finished(10), { queueSeconds: 0, ttftSeconds: 0.05, e2eSeconds: 1 });
    await sampler.sample();
    now += 2_000;
    events.onFinished?.(finished(30), { queueSeconds: 0, ttftSeconds: 0.05, e2eSeconds: 1 });
    await sampler.sample();
    const { interval_ms, models } = sampler.history.snapshot();
    assert.equal(interval_ms, 2_000);
    const points = models.m ?? [];
    assert.equal(points.length, 2);
    assert.equal(points[1]?.time, now);
    assert.equal(points[1]?.outputTps, 15); // 30 tokens in 2 s
    assert.equal(points[1]?.generationTokens, 40);
    assert.deepEqual(points[1]?.outcomes, { stop: 2 });
    assert.ok((points[1]?.ttft.p50 ?? 0) > 0.02 && (points[1]?.ttft.p50 ?? 1) <= 0.06);
  });

  it("keeps at most 300 points per model (10 minutes at 2 s)", async () => {
    const metrics = new ServerMetrics();
    metrics.eventsFor("m").onFinished?.(finished(1), { queueSeconds: 0, ttftSeconds: 0.1, e2eSeconds: 1 });
    let now = 0;
    const sampler = new MetricsSampler(metrics, 2_000, () => now);
    for (let i = 0; i < MAX_POINTS + 20; i++) {
      now += 2_000;
      await sampler.sample();
    }
    assert.equal(MAX_POINTS, 300);
    const points = sampler.history.series("m");
    assert.equal(points.length, 300);
    assert.equal(points.at(-1)?.time, now);
  });

  it("a dashboard's history loads the snapshot, then appends its own scrapes", () => {
    const history = new MetricsHistory();
    const point = { time: 5, ttft: {}, itl: {}, e2e: {}, outcomes: {} };
    history.load({ interval_ms: 2_000, models: { m: [point, { ...point, time: 7 }] } });
    history.load({ interval_ms: 2_000, models: { m: [{ ...point, time: 7 }] } });
    assert.deepEqual(
      history.series("m").map((p) => p.time),
      [5, 7],
    );
  });

  it("the timer is unref'd and stops; the app answers GET /metrics/history as JSON", async () => {
    const sampler = new MetricsSampler(new ServerMetrics());
    sampler.start();
    assert.ok(sampler.running);
    const timer = (sampler as unknown as { timer: NodeJS.Timeout }).timer;
    assert.equal(timer.hasRef(), false);
    sampler.stop();
    assert.equal(sampler.running, false);

    const metrics = new ServerMetrics();
    metrics.eventsFor("m").onFinished?.(finished(3), { queueSeconds: 0, ttftSeconds: 0.1, e2eSeconds: 1 });
    const app = appWith(metrics);
    await app.ready();
    const response = await app.inject({ method: "GET", url: "/metrics/history" });
    assert.equal(response.statusCode, 200);
    assert.match(response.headers["content-type"] as string, /application\/json/);
    const body = response.json() as { interval_ms: number; models: Record<string, unknown[]> };
    assert.equal(body.interval_ms, 2_000);
    assert.equal(typeof body.models, "object");
    await app.close();
  });

  it("GET /metrics/history needs the key with --protect-metrics, as /metrics does", async () => {
    const app = appWith(new ServerMetrics(), true);
    await app.ready();
    for (const url of ["/metrics", "/metrics/history"]) {
      assert.equal((await app.inject({ method: "GET", url })).statusCode, 401, url);
      const keyed = await app.inject({ method: "GET", url, headers: { authorization: "Bearer k" } });
      assert.equal(keyed.statusCode, 200, url);
    }
    await app.close();
  });
});

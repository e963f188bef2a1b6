import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Scheduler } from "../../../src/engine/Scheduler.ts";
import { ServerMetrics } from "../../../src/server/metrics.ts";
import { parsePrometheus } from "../../../src/shared/prometheus.ts";

describe("vllm:lora_requests_info", () => {
  it("keeps the 16 most recently written label sets, so adapters that come and go do not grow /metrics", async () => {
    const metrics = new ServerMetrics();
    metrics.enableLora();
    let running: string[] = [];
    // What the other per-model gauges read of a scheduler, and the LoRA stats.
    const scheduler = {
      host: {
        id: "base",
        contextSize: 64,
        sequences: 1,
        encoder: false,
        kvCache: { typeK: "f16", typeV: "f16", flashAttn: false, kBytes: 0, vBytes: 0 },
      },
      runningCount: 0,
      waitingCount: 0,
      prefixCaching: true,
      kvCacheUsage: () => 0,
      maskCacheStats: () => ({ hits: 0, misses: 0, computed: 0 }),
      maxLoras: 4,
      loraStats: () => ({ running, waiting: [] }),
    } as unknown as Scheduler;
    metrics.track(scheduler);
    const sets = async () =>
      parsePrometheus(await metrics.registry.metrics()).filter(
        (sample) => sample.name === "vllm:lora_requests_info",
      );
    for (let index = 0; index < 40; index++) {
      running = [`adapter-${index}`];
      await sets();
    }
    const kept = await sets();
    assert.equal(kept.length, 16);
    // The newest set is the one the gateway reads: the largest value, the adapter running now.
    const newest = kept.reduce((best, sample) => (sample.value >= best.value ? sample : best));
    assert.equal(newest.labels.running_lora_adapters, "adapter-39");
    assert.equal(newest.labels.max_lora, "4");
    assert.ok(!kept.some((sample) => sample.labels.running_lora_adapters === "adapter-0"));
  });
});

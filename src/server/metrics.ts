/**
 * Prometheus metrics at GET /metrics with vLLM's names and a `model_name` label, the ones the Gateway
 * API Inference Extension's endpoint picker reads (`vllm:num_requests_waiting`,
 * `vllm:num_requests_running`, `vllm:kv_cache_usage_perc`) plus vLLM's token counters and latency
 * histograms. Counters carry the `_total` suffix as vLLM's prometheus_client exports them.
 */
import type { FastifyInstance } from "fastify";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Scheduler } from "../engine/Scheduler.ts";
import type { MaskCacheStats, SchedulerEvents } from "../engine/types.ts";

// Bucket bounds as vLLM's (seconds).
const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];
const ITL_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];
/**
 * Buckets for tokens per engine step (prompt chunks plus one token per decoding sequence): powers of
 * two. vLLM derives its buckets from its CUDA graph capture sizes, which a CPU server has none of.
 */
const ITERATION_TOKEN_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192];
/** Engine step phases, in seconds: from sub-millisecond (a tiny model's decode, sampling) to long prefill chunks. */
const STEP_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5];
/** Model load times, in seconds: a tiny model's milliseconds to a large one's minutes. */
const LOAD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640];
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960];

/**
 * The labels of `vllm:cache_config_info` for one model, as vLLM writes its CacheConfig (every value a
 * string, booleans as Python's `True`/`False`, an unset count as `None`). The Gateway API Inference
 * Extension's prefix-cache scorer auto-tunes from `block_size` and `num_gpu_blocks` (llm-d-router's
 * docs/plugin-metric-protocol.md). A llama.cpp KV cell holds one token, and our prefix cache reuses
 * any number of them, so a block here is one cell.
 */
function cacheConfigLabels(scheduler: Scheduler): Record<string, string> {
  const { host } = scheduler;
  return {
    model_name: host.id,
    block_size: "1",
    num_gpu_blocks: String(host.encoder ? 0 : host.contextSize * host.sequences),
    num_cpu_blocks: "None",
    cache_dtype:
      host.kvCache.typeK === host.kvCache.typeV
        ? host.kvCache.typeK
        : `${host.kvCache.typeK}/${host.kvCache.typeV}`,
    enable_prefix_caching: scheduler.prefixCaching && !host.encoder ? "True" : "False",
  };
}

/** How many label sets of `vllm:lora_requests_info` are kept (the most recently updated). */
const MAX_LORA_LABEL_SETS = 16;

/** The labels of `vllm:lora_requests_info`. */
type LoraLabel = "max_lora" | "waiting_lora_adapters" | "running_lora_adapters";

/** The server's Prometheus registry and vLLM-named metrics for every served model. */
export class ServerMetrics {
  readonly registry = new Registry();
  private readonly schedulers: Scheduler[] = [];
  private readonly promptTokens: Counter<"model_name">;
  private readonly generationTokens: Counter<"model_name">;
  private readonly requestSuccess: Counter<"model_name" | "finished_reason">;
  private readonly prefixQueries: Counter<"model_name">;
  private readonly prefixHits: Counter<"model_name">;
  private readonly ttft: Histogram<"model_name">;
  private readonly itl: Histogram<"model_name">;
  private readonly e2e: Histogram<"model_name">;
  private readonly queueTime: Histogram<"model_name">;
  private readonly iterationTokens: Histogram<"model_name">;
  private readonly stepSeconds: Histogram<"model_name" | "phase">;
  private readonly jumpForwardTokens: Counter<"model_name">;
  private readonly modelLoads: Counter<"model_name" | "outcome">;
  private readonly modelUnloads: Counter<"model_name" | "reason">;
  private readonly modelLoadSeconds: Histogram<"model_name">;
  private readonly modelMemory = new Map<string, number>();
  private loraInfo: Gauge<LoraLabel> | undefined;
  /** Sets the current `vllm:lora_requests_info` series to now (LoRA enabled), else nothing. */
  private updateLoraInfo: () => void = () => undefined;

  constructor() {
    const registers = [this.registry];
    const perModel = (read: (scheduler: Scheduler) => number) =>
      function collect(this: Gauge<"model_name">) {
        this.reset();
        for (const scheduler of schedulers) this.set({ model_name: scheduler.host.id }, read(scheduler));
      };
    const schedulers = this.schedulers;
    new Gauge({
      name: "vllm:num_requests_running",
      help: "Number of requests in model execution batches.",
      labelNames: ["model_name"],
      registers,
      collect: perModel((scheduler) => scheduler.runningCount),
    });
    new Gauge({
      name: "vllm:num_requests_waiting",
      help: "Number of requests waiting to be processed.",
      labelNames: ["model_name"],
      registers,
      collect: perModel((scheduler) => scheduler.waitingCount),
    });
    new Gauge({
      name: "vllm:kv_cache_usage_perc",
      help: "KV-cache usage. 1 means 100 percent usage.",
      labelNames: ["model_name"],
      registers,
      collect: perModel((scheduler) => scheduler.kvCacheUsage()),
    });
    new Gauge({
      name: "lmserve:kv_cache_bytes",
      help: "Bytes of the KV cache allocated for all slots, by part (k, v), as created with --cache-type-k / --cache-type-v.",
      labelNames: ["model_name", "part"],
      registers,
      collect(this: Gauge<"model_name" | "part">) {
        this.reset();
        for (const scheduler of schedulers) {
          const { kBytes, vBytes } = scheduler.host.kvCache;
          this.set({ model_name: scheduler.host.id, part: "k" }, kBytes);
          this.set({ model_name: scheduler.host.id, part: "v" }, vBytes);
        }
      },
    });
    new Gauge({
      name: "vllm:cache_config_info",
      help: "Information of the LLMEngine CacheConfig: a KV block is one cell (block_size 1, prefix caching matches single tokens); num_gpu_blocks is every slot's cells (0 for an encoder, which has no KV cache).",
      labelNames: [
        "model_name",
        "block_size",
        "num_gpu_blocks",
        "num_cpu_blocks",
        "cache_dtype",
        "enable_prefix_caching",
      ],
      registers,
      collect(this: Gauge<string>) {
        this.reset();
        for (const scheduler of schedulers) this.set(cacheConfigLabels(scheduler), 1);
      },
    });
    const maskCacheCounter = (name: string, help: string, read: (stats: MaskCacheStats) => number) =>
      new Counter({
        name,
        help,
        labelNames: ["model_name"],
        registers,
        collect(this: Counter<"model_name">) {
          this.reset();
          for (const scheduler of schedulers) {
            this.inc({ model_name: scheduler.host.id }, read(scheduler.maskCacheStats()));
          }
        },
      });
    maskCacheCounter(
      "lmserve:grammar_mask_cache_hits_total",
      "Guided decoding: token-mask lookups answered from the mask cache.",
      (stats) => stats.hits,
    );
    maskCacheCounter(
      "lmserve:grammar_mask_cache_misses_total",
      "Guided decoding: token-mask lookups the mask cache had no mask for.",
      (stats) => stats.misses,
    );
    maskCacheCounter(
      "lmserve:grammar_masks_computed_total",
      "Guided decoding: token masks computed by a pass over the vocabulary.",
      (stats) => stats.computed,
    );
    this.jumpForwardTokens = new Counter({
      name: "lmserve:jump_forward_tokens_total",
      help: "Guided decoding with --jump-forward: completion tokens appended because the grammar forced them (not sampled).",
      labelNames: ["model_name"],
      registers,
    });
    this.promptTokens = new Counter({
      name: "vllm:prompt_tokens_total",
      help: "Number of prefill tokens processed.",
      labelNames: ["model_name"],
      registers,
    });
    this.generationTokens = new Counter({
      name: "vllm:generation_tokens_total",
      help: "Number of generation tokens processed.",
      labelNames: ["model_name"],
      registers,
    });
    this.requestSuccess = new Counter({
      name: "vllm:request_success_total",
      help: "Count of finished requests, by finish reason (abort: cancelled by the client or the server).",
      labelNames: ["model_name", "finished_reason"],
      registers,
    });
    this.prefixQueries = new Counter({
      name: "vllm:prefix_cache_queries_total",
      help: "Prefix cache queries, in terms of number of queried tokens.",
      labelNames: ["model_name"],
      registers,
    });
    this.prefixHits = new Counter({
      name: "vllm:prefix_cache_hits_total",
      help: "Prefix cache hits, in terms of number of cached tokens.",
      labelNames: ["model_name"],
      registers,
    });
    this.ttft = new Histogram({
      name: "vllm:time_to_first_token_seconds",
      help: "Histogram of time to first token in seconds.",
      labelNames: ["model_name"],
      buckets: TTFT_BUCKETS,
      registers,
    });
    this.itl = new Histogram({
      name: "vllm:inter_token_latency_seconds",
      help: "Histogram of inter-token latency in seconds.",
      labelNames: ["model_name"],
      buckets: ITL_BUCKETS,
      registers,
    });
    this.e2e = new Histogram({
      name: "vllm:e2e_request_latency_seconds",
      help: "Histogram of end to end request latency in seconds.",
      labelNames: ["model_name"],
      buckets: E2E_BUCKETS,
      registers,
    });
    this.iterationTokens = new Histogram({
      name: "vllm:iteration_tokens_total",
      help: "Histogram of number of tokens per engine_step.",
      labelNames: ["model_name"],
      buckets: ITERATION_TOKEN_BUCKETS,
      registers,
    });
    this.stepSeconds = new Histogram({
      name: "lmserve:step_seconds",
      help: "Histogram of the engine step's time by phase: decode (llama_decode) and sample (sampling and logprobs of its outputs), in seconds.",
      labelNames: ["model_name", "phase"],
      buckets: STEP_BUCKETS,
      registers,
    });
    this.modelLoads = new Counter({
      name: "lmserve:model_loads_total",
      help: "Model loads (startup, POST /models/load, autoload), by outcome: success, failure (the loader failed), no_capacity (refused by --models-max / --memory-budget).",
      labelNames: ["model_name", "outcome"],
      registers,
    });
    this.modelUnloads = new Counter({
      name: "lmserve:model_unloads_total",
      help: "Model unloads, by reason: request (POST /models/unload), keep_alive (a request's keep_alive), idle (--idle-unload), evicted (least recently used, to make room), shutdown.",
      labelNames: ["model_name", "reason"],
      registers,
    });
    this.modelLoadSeconds = new Histogram({
      name: "lmserve:model_load_seconds",
      help: "Histogram of model load time (successful loads, eviction included), in seconds.",
      labelNames: ["model_name"],
      buckets: LOAD_BUCKETS,
      registers,
    });
    const memory = this.modelMemory;
    new Gauge({
      name: "lmserve:model_memory_bytes",
      help: "Bytes a loaded model holds (weights + KV cache + projector, measured at load); absent while not loaded.",
      labelNames: ["model_name"],
      registers,
      collect(this: Gauge<"model_name">) {
        this.reset();
        for (const [model, bytes] of memory) this.set({ model_name: model }, bytes);
      },
    });
    this.queueTime = new Histogram({
      name: "vllm:request_queue_time_seconds",
      help: "Histogram of time spent waiting for a slot, in seconds.",
      labelNames: ["model_name"],
      buckets: E2E_BUCKETS,
      registers,
    });
  }

  /**
   * Exports vLLM's `vllm:lora_requests_info` (with `--enable-lora` or any `--lora`, as vLLM only with
   * LoRA enabled): one series per combination of labels `max_lora` (`--max-loras`, the most of the
   * models'), `waiting_lora_adapters` and `running_lora_adapters` (adapter names, comma-joined, across
   * every model), whose value is the Unix time in seconds it was last seen, as vLLM's
   * `set_to_current_time()`; series of earlier combinations stay with their last time (the gateway's
   * LoRA-affinity scorer reads the newest). lmserve updates the current series at each engine step and at
   * each scrape (vLLM at each step). Calling it again does nothing.
   */
  enableLora(): void {
    if (this.loraInfo) return;
    const schedulers = this.schedulers;
    // The label sets written, oldest update first: vLLM's gauge keeps every set it ever wrote (the
    // gateway reads the newest by value); past MAX_LORA_LABEL_SETS the oldest go, so that a server
    // whose adapters come and go does not grow /metrics without bound.
    const kept = new Map<string, Record<LoraLabel, string>>();
    const update = (gauge: Gauge<LoraLabel>) => {
      const running = new Set<string>();
      const waiting = new Set<string>();
      let maxLoras = 0;
      for (const scheduler of schedulers) {
        if (typeof scheduler.loraStats !== "function") continue;
        const stats = scheduler.loraStats();
        for (const name of stats.running) running.add(name);
        for (const name of stats.waiting) waiting.add(name);
        maxLoras = Math.max(maxLoras, scheduler.maxLoras);
      }
      // Labels in vLLM's order.
      const labels = {
        max_lora: String(maxLoras),
        waiting_lora_adapters: [...waiting].join(","),
        running_lora_adapters: [...running].join(","),
      };
      const key = JSON.stringify(labels);
      kept.delete(key);
      kept.set(key, labels);
      for (const [oldKey, old] of kept) {
        if (kept.size <= MAX_LORA_LABEL_SETS) break;
        kept.delete(oldKey);
        gauge.remove(old);
      }
      gauge.set(labels, Date.now() / 1000);
    };
    this.loraInfo = new Gauge({
      name: "vllm:lora_requests_info",
      help: "Running stats on lora requests.",
      labelNames: ["max_lora", "waiting_lora_adapters", "running_lora_adapters"],
      registers: [this.registry],
      collect(this: Gauge<LoraLabel>) {
        update(this);
      },
    });
    const gauge = this.loraInfo;
    this.updateLoraInfo = () => update(gauge);
  }

  /** Reports the running/waiting/KV gauges of this scheduler's model. */
  track(scheduler: Scheduler): void {
    this.schedulers.push(scheduler);
  }

  /** Stops reporting the gauges of this scheduler's model (it was unloaded). */
  untrack(scheduler: Scheduler): void {
    const index = this.schedulers.indexOf(scheduler);
    if (index >= 0) this.schedulers.splice(index, 1);
    this.modelMemory.delete(scheduler.host.id);
  }

  /** Records a load of model `modelName`: its outcome and, when it succeeded, its time in seconds. */
  modelLoad(modelName: string, outcome: "success" | "failure" | "no_capacity", seconds: number): void {
    this.modelLoads.inc({ model_name: modelName, outcome });
    if (outcome === "success") this.modelLoadSeconds.observe({ model_name: modelName }, seconds);
  }

  /** Records the bytes model `modelName` holds once loaded (`lmserve:model_memory_bytes`). */
  modelResident(modelName: string, bytes: number): void {
    this.modelMemory.set(modelName, bytes);
  }

  /** Records an unload of model `modelName` and why. */
  modelUnload(modelName: string, reason: string): void {
    this.modelUnloads.inc({ model_name: modelName, reason });
    this.modelMemory.delete(modelName);
  }

  /** The scheduler callbacks that record the metrics of model `modelName`. */
  eventsFor(modelName: string): SchedulerEvents {
    const labels = { model_name: modelName };
    // The series exists from the start (0 without --jump-forward), as the other per-model counters'.
    this.jumpForwardTokens.inc(labels, 0);
    return {
      onInterTokenLatency: (seconds) => this.itl.observe(labels, seconds),
      onJumpForward: (tokens) => {
        if (tokens > 0) this.jumpForwardTokens.inc(labels, tokens);
      },
      onIteration: (tokens, timing) => {
        this.iterationTokens.observe(labels, tokens);
        this.updateLoraInfo();
        if (!timing) return;
        this.stepSeconds.observe({ ...labels, phase: "decode" }, timing.decodeMs / 1000);
        this.stepSeconds.observe({ ...labels, phase: "sample" }, timing.sampleMs / 1000);
      },
      onFinished: (result, timing) => {
        this.requestSuccess.inc({ ...labels, finished_reason: result.finishReason });
        this.generationTokens.inc(labels, result.completionTokens);
        this.queueTime.observe(labels, timing.queueSeconds);
        if (timing.ttftSeconds === null) return;
        this.promptTokens.inc(labels, result.promptTokens);
        this.prefixQueries.inc(labels, result.promptTokens);
        this.prefixHits.inc(labels, result.cachedTokens);
        this.ttft.observe(labels, timing.ttftSeconds);
        this.e2e.observe(labels, timing.e2eSeconds);
      },
    };
  }
}

/** GET /metrics: the Prometheus text exposition of {@link ServerMetrics}. */
export function registerMetricsRoute(app: FastifyInstance, metrics: ServerMetrics): void {
  app.get("/metrics", async (_request, reply) => {
    reply.header("content-type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}

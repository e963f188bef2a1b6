import { CapacityExceededError, EngineClosedError, QueueFullError } from "./errors.ts";
import type { ModelHost } from "./ModelHost.ts";
import { Scheduler, type SchedulerOptions } from "./Scheduler.ts";
import type { GenerationObserver, GenerationRequest, GenerationResult } from "./types.ts";

type EncodeJob = {
  readonly request: GenerationRequest;
  readonly signal: AbortSignal | undefined;
  readonly submittedAt: number;
  resolve(result: GenerationResult): void;
  reject(error: unknown): void;
};

/**
 * The step loop of an encoder-only model (BERT family, cross-encoder rerankers; see
 * `ModelHost.encoder`): there is no KV cache and nothing to generate, so a step is one `encode` of
 * whole inputs (an encoder sees all of an input at once). Each step takes waiting inputs in arrival
 * order while they fit the batch (`host.batchSize` tokens) and the context's sequences, so many short
 * inputs of one request, or of several, share one step; llama.cpp pools each (the model's pooling, or
 * the reranker's score). Only `embed` requests are served; a generation request is refused.
 */
export class EncoderScheduler extends Scheduler {
  private readonly queue: EncodeJob[] = [];
  private readonly limit: number;
  private inFlight = 0;
  private looping: Promise<void> | undefined;
  private stopped = false;
  private readonly observe: SchedulerOptions["events"];

  constructor(host: ModelHost, options: SchedulerOptions = {}) {
    super(host, options);
    this.limit = options.maxWaiting ?? Number.POSITIVE_INFINITY;
    this.observe = options.events;
  }

  override get runningCount(): number {
    return this.inFlight;
  }

  override get waitingCount(): number {
    return this.queue.length;
  }

  /** Always 0: an encoder keeps no KV cache between steps. */
  override kvCacheUsage(): number {
    return 0;
  }

  /**
   * @throws QueueFullError when `count` more inputs would exceed `--max-waiting` beyond one step's
   *   sequences; CapacityExceededError when `count` alone does.
   */
  override assertCapacity(count: number): void {
    if (count > this.host.sequences + this.limit) {
      throw new CapacityExceededError(count, this.host.sequences, this.limit);
    }
    if (this.queue.length + count > this.host.sequences + this.limit)
      throw new QueueFullError(this.queue.length);
  }

  /**
   * Queues one input (`request.promptTokens`, which must fit `host.batchSize`) and resolves with its
   * pooled `embedding` (the score, for a reranker). Rejects a request that is not an `embed` request,
   * an empty or too long prompt, QueueFullError, EngineClosedError.
   */
  override submit(
    request: GenerationRequest,
    _observer: GenerationObserver,
    signal?: AbortSignal,
  ): Promise<GenerationResult> {
    try {
      if (this.stopped) throw new EngineClosedError();
      if (request.embed === undefined)
        throw new Error("an encoder-only model computes embeddings, it does not generate");
      const length = request.promptTokens.length;
      if (length === 0 || length > this.host.batchSize) {
        throw new RangeError(`the input has ${length} tokens; the encoder takes 1..${this.host.batchSize}`);
      }
      this.assertCapacity(1);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<GenerationResult>((resolve, reject) => {
      this.queue.push({ request, signal, submittedAt: performance.now(), resolve, reject });
      this.kick();
    });
  }

  override async close(): Promise<void> {
    this.stopped = true;
    for (const job of this.queue.splice(0)) job.resolve(aborted(job, new Error("shutting down")));
    await this.looping;
    await this.host.dispose();
  }

  private kick(): void {
    if (this.looping) return;
    // The first step starts after the current turn, so the inputs submitted together (one request's) share it.
    this.looping = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.drain())
      .finally(() => {
        this.looping = undefined;
        if (this.queue.length > 0 && !this.stopped) this.kick();
      });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch: EncodeJob[] = [];
      let tokens = 0;
      while (this.queue.length > 0 && batch.length < this.host.sequences) {
        const job = this.queue[0] as EncodeJob;
        if (job.signal?.aborted) {
          this.queue.shift();
          job.resolve(aborted(job, job.signal.reason));
          continue;
        }
        if (tokens + job.request.promptTokens.length > this.host.batchSize) break;
        this.queue.shift();
        batch.push(job);
        tokens += job.request.promptTokens.length;
      }
      if (batch.length === 0) continue;
      const flat = new Int32Array(tokens);
      let at = 0;
      for (const job of batch) {
        flat.set(job.request.promptTokens, at);
        at += job.request.promptTokens.length;
      }
      const lengths = Int32Array.from(batch, (job) => job.request.promptTokens.length);
      this.inFlight = batch.length;
      const startedAt = performance.now();
      try {
        const output = await this.host.context.encode(flat, lengths);
        this.observe?.onIteration?.(tokens, { decodeMs: output.encodeMs, sampleMs: 0 });
        batch.forEach((job, index) => {
          const result: GenerationResult = {
            finishReason: "stop",
            stopReason: null,
            promptTokens: job.request.promptTokens.length,
            completionTokens: 0,
            cachedTokens: 0,
            cumulativeLogprob: Number.NaN,
            embedding: output.embeddings.slice(index * output.stride, (index + 1) * output.stride),
          };
          const now = performance.now();
          this.observe?.onFinished?.(result, {
            queueSeconds: (startedAt - job.submittedAt) / 1000,
            ttftSeconds: null,
            e2eSeconds: (now - job.submittedAt) / 1000,
          });
          job.resolve(result);
        });
      } catch (error) {
        for (const job of batch) job.reject(error);
      } finally {
        this.inFlight = 0;
      }
    }
  }
}

function aborted(job: EncodeJob, reason: unknown): GenerationResult {
  return {
    finishReason: "abort",
    stopReason: null,
    promptTokens: job.request.promptTokens.length,
    completionTokens: 0,
    cachedTokens: 0,
    cumulativeLogprob: Number.NaN,
    abortReason: reason,
  };
}

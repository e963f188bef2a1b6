import type { LlamaContextSequence } from "node-llama-cpp";
import { ApiError, badRequest, overloaded } from "../errors.ts";
import type { ModelHost } from "./ModelHost.ts";
import { runGeneration } from "./runGeneration.ts";
import type { GenerationObserver, GenerationRequest, GenerationResult, SchedulerEvents } from "./types.ts";

/**
 * The states of a slot (one sequence of the context):
 *
 * ```
 *   Idle --assign--> Prefill --first token--> Decode --finish/abort--> Idle
 * ```
 */
export enum SlotState {
  /** Free; its KV cache still holds the last request's tokens, for prefix reuse. */
  Idle = "idle",
  /** Evaluating the prompt (the part not reused from the cache). */
  Prefill = "prefill",
  /** Generating tokens. */
  Decode = "decode",
}

/** One sequence of the context and what it is doing. */
export type Slot = {
  readonly id: number;
  readonly sequence: LlamaContextSequence;
  state: SlotState;
  /** `performance.now()` when the slot last took a request, in milliseconds (0: never). */
  lastUsedAt: number;
};

/** Options of the {@link Scheduler}. */
export type SchedulerOptions = {
  /** Requests allowed to wait for a slot; one more is refused with 503. Defaults to unbounded. */
  maxWaiting?: number;
  /** Reuse the KV cache of idle slots for a shared prompt prefix. Defaults to true. */
  prefixCaching?: boolean;
  /** Receives per-request timings and outcomes (metrics). */
  events?: SchedulerEvents;
  /**
   * Seconds a request may take from submission to its end (`--request-timeout`); past it the request
   * is aborted with a 504 {@link ApiError} as the abort reason. Defaults to no limit.
   */
  requestTimeoutSeconds?: number;
};

type Job = {
  readonly request: GenerationRequest;
  readonly observer: GenerationObserver;
  readonly signal: AbortSignal | undefined;
  readonly order: number;
  /** `performance.now()` at submission, in milliseconds. */
  readonly submittedAt: number;
  resolve(result: GenerationResult): void;
  reject(error: unknown): void;
  detach(): void;
  /** Releases the request's timer; called once it has ended. */
  dispose(): void;
};

/**
 * The single owner of a model's slots and of its waiting queue (continuous batching).
 *
 * Each running request has its own slot; the model's {@link BatchGate} lines up the decode steps of
 * all slots so node-llama-cpp decodes them as one batch. Requests beyond the slots wait in a queue
 * ordered by priority (lower first, as vLLM's `priority`) then arrival; a request joins as soon as a
 * slot frees, between decode steps. A new request takes the idle slot whose cached tokens share the
 * longest prefix with its prompt (see `pickSlot`).
 */
export class Scheduler {
  readonly host: ModelHost;
  private readonly slots: Slot[];
  private readonly waiting: Job[] = [];
  private readonly maxWaiting: number;
  private readonly prefixCaching: boolean;
  private readonly events: SchedulerEvents | undefined;
  private readonly requestTimeoutSeconds: number | undefined;
  private nextOrder = 0;
  /** True while a batch-invariant job runs alone. */
  private exclusiveRunning = false;

  constructor(host: ModelHost, options: SchedulerOptions = {}) {
    this.host = host;
    this.maxWaiting = options.maxWaiting ?? Number.POSITIVE_INFINITY;
    this.prefixCaching = options.prefixCaching ?? true;
    this.events = options.events;
    this.requestTimeoutSeconds = options.requestTimeoutSeconds;
    this.slots = [];
    host.batchGate.onBatch = (tokens) => this.events?.onIteration?.(tokens);
    for (let id = 0; host.context.sequencesLeft > 0; id++) {
      this.slots.push({ id, sequence: host.context.getSequence(), state: SlotState.Idle, lastUsedAt: 0 });
    }
  }

  /** Number of slots (the context's sequences). */
  get slotCount(): number {
    return this.slots.length;
  }

  /** Slots currently prefilling or decoding. */
  get runningCount(): number {
    return this.slots.filter((slot) => slot.state !== SlotState.Idle).length;
  }

  /** Requests waiting for a slot. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /**
   * Fraction (0..1) of the context's KV cells held by running requests (vLLM's `kv_cache_usage_perc`;
   * idle slots' cached prefixes are reusable, not in use).
   */
  kvCacheUsage(): number {
    const used = this.slots
      .filter((slot) => slot.state !== SlotState.Idle)
      .reduce((sum, slot) => sum + slot.sequence.nextTokenIndex, 0);
    return used / (this.host.contextSize * this.slots.length);
  }

  /** A snapshot of each slot's state, for metrics and tests. */
  slotStates(): SlotState[] {
    return this.slots.map((slot) => slot.state);
  }

  /**
   * Checks that `count` more requests can be taken now (each starts on an idle slot or waits).
   * @throws ApiError 503 with `Retry-After` when the waiting queue would exceed `--max-waiting`; 400 when
   *   `count` exceeds slots + `--max-waiting`, which no retry could fix.
   */
  assertCapacity(count: number): void {
    if (count > this.slots.length + this.maxWaiting) {
      throw badRequest(
        `This request needs ${count} generations (prompts x n or best_of), more than this server can hold at once (${this.slots.length} slots + ${this.maxWaiting} waiting). Lower n or best_of, or send fewer prompts.`,
        "n",
      );
    }
    const idle = this.slots.filter((slot) => slot.state === SlotState.Idle).length;
    const wouldWait = this.waiting.length + Math.max(0, count - idle);
    if (wouldWait > this.maxWaiting) {
      throw overloaded(
        `The server is at capacity: ${this.waiting.length} requests are already waiting. Retry later.`,
      );
    }
  }

  /**
   * Queues a generation and resolves with its result once it has finished; output goes to `observer`
   * as it is produced. An aborted `signal` ends the generation within one decode step (or removes it
   * from the queue) and resolves with `finishReason: "abort"`.
   * Rejects with ApiError 503 when the waiting queue is full.
   */
  submit(
    request: GenerationRequest,
    observer: GenerationObserver,
    callerSignal?: AbortSignal,
  ): Promise<GenerationResult> {
    try {
      this.assertCapacity(1);
    } catch (error) {
      return Promise.reject(error);
    }
    const { signal, dispose } = this.withTimeout(callerSignal);
    return new Promise<GenerationResult>((resolve, reject) => {
      const onAbort = () => {
        const index = this.waiting.indexOf(job);
        if (index === -1) return;
        this.waiting.splice(index, 1);
        job.detach();
        job.dispose();
        const result = abortedBeforeStart(request, signal?.reason);
        const waited = (performance.now() - job.submittedAt) / 1000;
        this.events?.onFinished?.(result, { queueSeconds: waited, ttftSeconds: null, e2eSeconds: waited });
        resolve(result);
      };
      const job: Job = {
        request,
        observer,
        signal,
        order: this.nextOrder++,
        submittedAt: performance.now(),
        resolve,
        reject,
        detach: () => signal?.removeEventListener("abort", onAbort),
        dispose,
      };
      if (signal?.aborted) {
        dispose();
        resolve(abortedBeforeStart(request, signal.reason));
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.enqueue(job);
      this.pump();
    });
  }

  /**
   * The caller's signal, also aborted (with a 504 ApiError) when the request timeout passes; `dispose`
   * stops the timer once the request has ended.
   */
  private withTimeout(signal: AbortSignal | undefined): { signal: AbortSignal | undefined; dispose(): void } {
    const seconds = this.requestTimeoutSeconds;
    if (seconds === undefined) return { signal, dispose: () => undefined };
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(requestTimedOut(seconds)), seconds * 1000);
    const forward = () => controller.abort(signal?.reason);
    if (signal?.aborted) forward();
    else signal?.addEventListener("abort", forward, { once: true });
    return {
      signal: controller.signal,
      dispose: () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", forward);
      },
    };
  }

  private enqueue(job: Job): void {
    const position = this.waiting.findIndex(
      (other) =>
        other.request.priority > job.request.priority ||
        (other.request.priority === job.request.priority && other.order > job.order),
    );
    if (position === -1) this.waiting.push(job);
    else this.waiting.splice(position, 0, job);
  }

  /**
   * Starts waiting jobs on idle slots, highest priority first. A batch-invariant job starts only once
   * every slot is idle and nothing else starts while it runs, so its decode batches hold its tokens
   * alone (llama.cpp's batched kernels give slightly different numbers for a row depending on what
   * else is in the batch).
   */
  private pump(): void {
    while (this.waiting.length > 0) {
      if (this.exclusiveRunning) return;
      const idle = this.slots.filter((slot) => slot.state === SlotState.Idle);
      if (idle.length === 0) return;
      const head = this.waiting[0] as Job;
      if (head.request.batchInvariant && idle.length < this.slots.length) return;
      const job = this.waiting.shift() as Job;
      if (job.request.batchInvariant) this.exclusiveRunning = true;
      job.detach();
      const slot = this.pickSlot(idle, job.request.promptTokens);
      slot.state = SlotState.Prefill;
      slot.lastUsedAt = performance.now();
      void this.run(slot, job);
    }
  }

  /**
   * The idle slot sharing the longest prefix with the prompt, if that prefix is at least a tenth of the
   * prompt (llama-server's `--slot-prompt-similarity` default, 0.1). Otherwise (and without prefix
   * caching) the idle slot that keeps the running sequences' ids in the fewest contiguous runs, which
   * lets llama.cpp decode their tokens in that many ubatches (see `sequenceOrderedStrategy`); among
   * those, the least recently used (as llama-server), so recent caches survive for the next request.
   */
  private pickSlot(idle: Slot[], prompt: readonly number[]): Slot {
    if (this.prefixCaching) {
      let best: Slot | undefined;
      let bestLength = 0;
      for (const slot of idle) {
        const length = commonPrefixLength(slot.sequence.contextTokens, prompt);
        if (length > bestLength) {
          best = slot;
          bestLength = length;
        }
      }
      if (best && bestLength >= prompt.length / 10) return best;
    }
    const running = new Set(
      this.slots.filter((slot) => slot.state !== SlotState.Idle).map((slot) => slot.id),
    );
    const runsWith = (id: number): number => {
      const ids = new Set(running).add(id);
      let runs = 0;
      for (const member of ids) if (!ids.has(member - 1)) runs++;
      return runs;
    };
    let choice = idle[0] as Slot;
    let choiceRuns = runsWith(choice.id);
    for (const slot of idle.slice(1)) {
      const runs = runsWith(slot.id);
      if (runs < choiceRuns || (runs === choiceRuns && slot.lastUsedAt < choice.lastUsedAt)) {
        choice = slot;
        choiceRuns = runs;
      }
    }
    return choice;
  }

  private async run(slot: Slot, job: Job): Promise<void> {
    const startedAt = performance.now();
    let firstTokenAt: number | null = null;
    let lastTokenAt = startedAt;
    try {
      const result = await runGeneration(this.host, slot, job.request, job.observer, {
        signal: job.signal,
        // A batch-invariant job evaluates its whole prompt, so its prefill batch is always the same.
        prefixCaching: this.prefixCaching && !job.request.batchInvariant,
        onFirstToken: () => {
          slot.state = SlotState.Decode;
        },
        onToken: () => {
          const now = performance.now();
          if (firstTokenAt === null) firstTokenAt = now;
          else this.events?.onInterTokenLatency?.((now - lastTokenAt) / 1000);
          lastTokenAt = now;
        },
      });
      this.events?.onFinished?.(result, {
        queueSeconds: (startedAt - job.submittedAt) / 1000,
        ttftSeconds: firstTokenAt === null ? null : (firstTokenAt - job.submittedAt) / 1000,
        e2eSeconds: (performance.now() - job.submittedAt) / 1000,
      });
      job.resolve(result);
    } catch (error) {
      // The sequence's KV state is unknown after a failure: start the slot from scratch next time.
      await this.host.batchGate.erase(() => slot.sequence.clearHistory()).catch(() => undefined);
      job.reject(error);
    } finally {
      job.dispose();
      slot.state = SlotState.Idle;
      if (job.request.batchInvariant) this.exclusiveRunning = false;
      this.pump();
    }
  }
}

/** Length of the common prefix of two token lists. */
export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const max = Math.min(a.length, b.length);
  let index = 0;
  while (index < max && a[index] === b[index]) index++;
  return index;
}

function abortedBeforeStart(request: GenerationRequest, reason: unknown): GenerationResult {
  return {
    finishReason: "abort",
    stopReason: null,
    promptTokens: request.promptTokens.length,
    completionTokens: 0,
    cachedTokens: 0,
    cumulativeLogprob: Number.NaN,
    abortReason: reason,
  };
}

/** 504: the request ran longer than `--request-timeout`. */
function requestTimedOut(seconds: number): ApiError {
  return new ApiError(
    504,
    "server_error",
    "request_timeout",
    `The request did not finish within the server's request timeout of ${seconds} s.`,
  );
}

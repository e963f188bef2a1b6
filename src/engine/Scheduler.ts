import { commonPrefixLength } from "./commonPrefixLength.ts";
import {
  AdapterUnloadedError,
  CapacityExceededError,
  EngineClosedError,
  GrammarUnenforceableError,
  QueueFullError,
  RequestTimeoutError,
} from "./errors.ts";
import { Generation } from "./Generation.ts";
import type { LoraAdapter } from "./LoraAdapter.ts";
import type { ModelHost } from "./ModelHost.ts";
import type { NativeStepInput, NativeStepOutput } from "./native.ts";
import { samplerConfig } from "./samplerConfig.ts";
import { planStep, type StepCandidate } from "./stepPlan.ts";
import type {
  GenerationObserver,
  GenerationRequest,
  GenerationResult,
  MaskCacheStats,
  MediaSpan,
  SchedulerEvents,
  TokenLogprob,
} from "./types.ts";

/**
 * Steps an adapter group runs in a row before the next group's turn: each change of the context's adapter
 * set costs llama.cpp a graph reservation (measured in docs/ARCHITECTURE.md, "LoRA adapters"), so a turn
 * of a few steps amortizes it, while a sequence of another group waits at most this many steps per
 * other group.
 */
const ADAPTER_TURN_STEPS = 8;

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
  /** The llama.cpp sequence id. */
  readonly id: number;
  state: SlotState;
  /** The tokens whose KV state the sequence holds, in order (an image's cells hold its placeholder id). */
  kvTokens: number[];
  /** The images among `kvTokens` (their positions may differ from their cells under M-RoPE). */
  kvImages: MediaSpan[];
  /** `performance.now()` when the slot last took a request, in milliseconds (0: never). */
  lastUsedAt: number;
  /**
   * The prefix-cache isolation domain of the request whose tokens `kvTokens` holds
   * ({@link GenerationRequest.cacheDomain}); only a request of the same domain reuses them.
   */
  cacheDomain: string;
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
   * is aborted with a {@link RequestTimeoutError} as the abort reason. Defaults to no limit.
   */
  requestTimeoutSeconds?: number;
  /**
   * Tokens one step evaluates at most, decodes and prompt chunks together (vLLM's
   * `--max-num-batched-tokens`, chunked prefill): decoding sequences wait at most one step of this many
   * tokens while a prompt prefills, and an abort stops a long prompt within one step. Capped at the
   * context's batch size; see {@link planStep} for the policy. Defaults to the host's step budget.
   */
  maxNumBatchedTokens?: number;
  /**
   * Jump-forward for guided decoding (`--jump-forward`): after each sampled token, the text the grammar
   * allows as its only continuation is appended as its canonical tokens, evaluated in the next step
   * like a prompt chunk instead of one decode-and-sample round per token. Defaults to false.
   */
  jumpForward?: boolean;
  /**
   * The most LoRA adapters that may have generations running at once (vLLM's `--max-loras`, the
   * gateway's `max_lora`); a request under another adapter waits while that many run. Defaults to the
   * number of slots.
   */
  maxLoras?: number;
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

/** A job running on a slot. */
type Running = {
  readonly slot: Slot;
  readonly job: Job;
  readonly generation: Generation;
  readonly startedAt: number;
  firstTokenAt: number | null;
  lastTokenAt: number;
};

/** What one output row of a step is for. */
type StepOutputFor =
  | { kind: "sample"; running: Running }
  | { kind: "prompt"; running: Running; topN: number }
  | { kind: "embed"; running: Running; position: number };

/**
 * The single owner of a model's slots, its waiting queue and its step loop (continuous batching).
 *
 * One loop per model runs one step at a time: one batch holding every decoding sequence's next token(s)
 * plus prompt chunks up to the step's budget (decodes first, chunked prefill), one `llama_decode` on a
 * native worker thread, every sequence sampled in C++; the results come back as typed arrays and each
 * generation handles its token here (text, stop strings, deltas). Requests join and leave between steps;
 * an abort takes effect before the next step. Requests beyond the slots wait in a queue ordered by
 * priority (lower first, as vLLM's `priority`) then arrival. A new request takes the idle slot whose
 * cached tokens share the longest prefix with its prompt (see `pickSlot`). LoRA adapters: llama.cpp
 * applies them per context, so a step holds the sequences of one adapter set only, and the sets with
 * running sequences take turns (see `nextGroup`; at most `maxLoras` adapters run at once).
 */
export class Scheduler {
  readonly host: ModelHost;
  private readonly slots: Slot[];
  private readonly waiting: Job[] = [];
  private readonly running: Running[] = [];
  private readonly maxWaiting: number;
  /** Whether a request may reuse the KV cells of a slot's earlier prompt (`--no-prefix-caching` turns it off). */
  readonly prefixCaching: boolean;
  private readonly events: SchedulerEvents | undefined;
  private readonly requestTimeoutSeconds: number | undefined;
  private readonly maxNumBatchedTokens: number;
  private readonly jumpForward: boolean;
  private nextOrder = 0;
  /** True while a batch-invariant job runs alone. */
  private exclusiveRunning = false;
  /** The step loop, while it runs. */
  private loop: Promise<void> | undefined;
  private closed = false;
  /** The LoRA adapters served on this model, by name. */
  private readonly adapters = new Map<string, LoraAdapter>();
  /** The adapter set on the context now (undefined: the base alone). */
  private activeAdapter: LoraAdapter | undefined;
  /** The group (adapter id, 0 for the base) the last step ran, and how many steps in a row it has run. */
  private lastGroup = -1;
  private groupSteps = 0;
  /** Unloaded adapters waiting for their generations to end before they are freed. */
  private readonly retiring: { adapter: LoraAdapter; done: () => void }[] = [];
  private nextAdapterId = 1;
  /** `--max-loras`: adapters with generations running at once. */
  readonly maxLoras: number;
  /** Times the step loop changed the context's adapter set (each costs a graph reservation in llama.cpp). */
  adapterSwitches = 0;

  constructor(host: ModelHost, options: SchedulerOptions = {}) {
    this.host = host;
    this.maxWaiting = options.maxWaiting ?? Number.POSITIVE_INFINITY;
    this.prefixCaching = options.prefixCaching ?? true;
    this.events = options.events;
    this.requestTimeoutSeconds = options.requestTimeoutSeconds;
    this.maxNumBatchedTokens = Math.min(options.maxNumBatchedTokens ?? host.stepBudget, host.batchSize);
    this.jumpForward = options.jumpForward ?? false;
    this.maxLoras = options.maxLoras ?? host.sequences;
    this.slots = Array.from({ length: host.sequences }, (_, id) => ({
      id,
      state: SlotState.Idle,
      kvTokens: [],
      cacheDomain: "",
      kvImages: [],
      lastUsedAt: 0,
    }));
  }

  /** Number of slots (the context's sequences). */
  get slotCount(): number {
    return this.slots.length;
  }

  /** Slots currently prefilling or decoding. */
  get runningCount(): number {
    return this.running.length;
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
    const used = this.running.reduce((sum, { slot }) => sum + slot.kvTokens.length, 0);
    return used / (this.host.contextSize * this.slots.length);
  }

  /** A snapshot of each slot's state, for metrics and tests. */
  slotStates(): SlotState[] {
    return this.slots.map((slot) => slot.state);
  }

  /**
   * Loads a LoRA adapter GGUF for this model and serves it as `name` (a request's `model`), at `scale`.
   * @throws Error when the name is taken on this model, or with llama.cpp's reason when the file does not
   *   load (missing, not an adapter, another base model's shapes).
   */
  async loadAdapter(name: string, path: string, scale = 1): Promise<LoraAdapter> {
    if (this.adapters.has(name)) throw new Error(`The LoRA adapter '${name}' is already loaded.`);
    const native = await this.host.loadLora(path);
    if (this.adapters.has(name) || this.closed) {
      native.dispose();
      throw new Error(`The LoRA adapter '${name}' is already loaded.`);
    }
    const adapter: LoraAdapter = { id: this.nextAdapterId++, name, path, scale, native };
    this.adapters.set(name, adapter);
    return adapter;
  }

  /**
   * Stops serving the adapter `name` at once (new requests naming it are refused); the generations
   * queued or running under it finish first, then it is freed. Resolves once it is freed.
   * @throws Error when no adapter of that name is loaded on this model.
   */
  unloadAdapter(name: string): Promise<void> {
    const adapter = this.adapters.get(name);
    if (!adapter) throw new Error(`No LoRA adapter '${name}' is loaded.`);
    this.adapters.delete(name);
    const freed = new Promise<void>((resolve) => this.retiring.push({ adapter, done: resolve }));
    // Between steps (or with no loop at all) the context is free to change.
    if (!this.loop) this.retireAdapters();
    return freed;
  }

  /** The adapter served as `name` on this model, or undefined. */
  adapter(name: string): LoraAdapter | undefined {
    return this.adapters.get(name);
  }

  /** Every adapter served on this model, in load order. */
  adapterList(): LoraAdapter[] {
    return [...this.adapters.values()];
  }

  /**
   * The names of the adapters with generations running and with generations waiting (each once, in
   * order of first appearance): vLLM's `running_lora_adapters` / `waiting_lora_adapters`.
   */
  loraStats(): { running: string[]; waiting: string[] } {
    const names = (requests: GenerationRequest[]) => [
      ...new Set(requests.flatMap((request) => (request.adapter ? [request.adapter.name] : []))),
    ];
    return {
      running: names(this.running.map((entry) => entry.job.request)),
      waiting: names(this.waiting.map((job) => job.request)),
    };
  }

  /** Frees the unloaded adapters no generation uses any more; only between steps. */
  private retireAdapters(): void {
    for (const entry of [...this.retiring]) {
      const { adapter } = entry;
      const used =
        this.running.some((running) => running.job.request.adapter === adapter) ||
        this.waiting.some((job) => job.request.adapter === adapter);
      if (used) continue;
      this.retiring.splice(this.retiring.indexOf(entry), 1);
      try {
        if (this.activeAdapter === adapter) this.useAdapter(undefined);
        adapter.native.dispose();
      } catch {
        // A disposed context or model freed it already.
      }
      entry.done();
    }
  }

  /** Sets the context's adapter set to `adapter` alone (undefined: none) unless it is set already. */
  private useAdapter(adapter: LoraAdapter | undefined): void {
    if (adapter === this.activeAdapter) return;
    const changed = this.host.context.setAdapters(
      adapter ? [adapter.native] : [],
      adapter ? Float32Array.of(adapter.scale) : new Float32Array(0),
    );
    this.activeAdapter = adapter;
    if (changed) this.adapterSwitches++;
  }

  /**
   * The adapter group the next step runs (llama.cpp applies adapters per context, so one step holds the
   * sequences of one adapter set): the groups with running sequences take turns of
   * {@link ADAPTER_TURN_STEPS} steps each, in order of adapter id (the base first).
   */
  private nextGroup(): LoraAdapter | undefined {
    const groups = new Map<number, LoraAdapter | undefined>();
    for (const running of this.running) {
      const adapter = running.job.request.adapter;
      groups.set(adapter?.id ?? 0, adapter);
    }
    if (groups.has(this.lastGroup) && (this.groupSteps < ADAPTER_TURN_STEPS || groups.size === 1)) {
      this.groupSteps++;
      return groups.get(this.lastGroup);
    }
    const ids = [...groups.keys()].sort((a, b) => a - b);
    const id = ids.find((candidate) => candidate > this.lastGroup) ?? (ids[0] as number);
    this.lastGroup = id;
    this.groupSteps = 1;
    return groups.get(id);
  }

  /**
   * Checks that `count` more requests can be taken now (each starts on an idle slot or waits).
   * @throws QueueFullError when the waiting queue would exceed `--max-waiting`; CapacityExceededError
   *   when `count` exceeds slots + `--max-waiting`, which no retry could fix.
   */
  assertCapacity(count: number): void {
    if (count > this.slots.length + this.maxWaiting) {
      throw new CapacityExceededError(count, this.slots.length, this.maxWaiting);
    }
    const idle = this.slots.filter((slot) => slot.state === SlotState.Idle).length;
    const wouldWait = this.waiting.length + Math.max(0, count - idle);
    if (wouldWait > this.maxWaiting) {
      throw new QueueFullError(this.waiting.length);
    }
  }

  /**
   * Queues a generation and resolves with its result once it has finished; output goes to `observer`
   * as it is produced. An aborted `signal` ends the generation before its next step (or removes it
   * from the queue) and resolves with `finishReason: "abort"`.
   * Rejects with QueueFullError when the waiting queue is full, EngineClosedError once closed.
   */
  submit(
    request: GenerationRequest,
    observer: GenerationObserver,
    callerSignal?: AbortSignal,
  ): Promise<GenerationResult> {
    try {
      if (this.closed) throw new EngineClosedError();
      const { adapter } = request;
      if (adapter && this.adapters.get(adapter.name) !== adapter)
        throw new AdapterUnloadedError(adapter.name);
      this.assertCapacity(1);
    } catch (error) {
      return Promise.reject(error);
    }
    const { signal, dispose } = this.withTimeout(callerSignal);
    return new Promise<GenerationResult>((resolve, reject) => {
      const onAbort = () => {
        const index = this.waiting.indexOf(job);
        if (index === -1) {
          // Running: the loop ends it before the next step.
          this.wake();
          return;
        }
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
      this.wake();
    });
  }

  /**
   * Stops taking requests, lets the step loop finish its current step, then frees the model. Running
   * and waiting requests should have been ended (aborted) by the caller; any left are aborted here.
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) {
      job.detach();
      job.dispose();
      job.resolve(abortedBeforeStart(job.request, new Error("shutting down")));
    }
    for (const running of this.running) running.generation.abort(new Error("shutting down"));
    this.wake();
    await this.loop;
    await this.host.dispose();
    // The model freed its adapters with it.
    for (const { done } of this.retiring.splice(0)) done();
  }

  /**
   * The caller's signal, also aborted (with a RequestTimeoutError) when the request timeout passes; `dispose`
   * stops the timer once the request has ended.
   */
  private withTimeout(signal: AbortSignal | undefined): { signal: AbortSignal | undefined; dispose(): void } {
    const seconds = this.requestTimeoutSeconds;
    if (seconds === undefined) return { signal, dispose: () => undefined };
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new RequestTimeoutError(seconds)), seconds * 1000);
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

  /** Starts the step loop unless it runs (it runs while any sequence does). */
  private wake(): void {
    if (this.loop) return;
    this.loop = this.runLoop()
      .catch((error: unknown) => {
        // A bug in the loop must not take the process down: the requests it held fail, their slots reset.
        for (const running of [...this.running]) this.fail(running, error);
      })
      .finally(() => {
        this.loop = undefined;
        this.retireAdapters();
        // A request that arrived while the loop was ending.
        const idle = this.slots.some((slot) => slot.state === SlotState.Idle);
        if (!this.closed && ((this.waiting.length > 0 && idle) || this.running.length > 0)) this.wake();
      });
  }

  private async runLoop(): Promise<void> {
    for (;;) {
      this.reap();
      this.retireAdapters();
      if (!this.closed) this.admit();
      if (this.running.length === 0) return;
      if (await this.evaluateImages()) continue;
      const group = this.nextGroup();
      this.useAdapter(group);
      const { input, outputs } = this.planStep(group);
      if (input.tokens.length === 0) {
        // Nothing to decode (every sequence waits on an image that just failed, say): yield, then look again.
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      let output: NativeStepOutput;
      try {
        output = await this.host.context.step(input);
      } catch (error) {
        // The batch's KV state is unknown: every sequence in it fails and its slot starts from scratch.
        const members = new Set(outputs.map((entry) => entry.running));
        for (const running of this.running.filter(
          (entry) => members.has(entry) || input.seqs.includes(entry.slot.id),
        )) {
          this.fail(running, error);
        }
        continue;
      }
      this.events?.onIteration?.(input.tokens.length, {
        decodeMs: output.decodeMs,
        sampleMs: output.sampleMs,
      });
      this.applyStep(outputs, output);
    }
  }

  /** Ends the generations that finished or were aborted, between steps. */
  private reap(): void {
    for (const running of [...this.running]) {
      const { generation, job } = running;
      if (generation.finishReason === null && job.signal?.aborted) generation.abort(job.signal.reason);
      if (generation.finishReason !== null) this.complete(running);
    }
  }

  /**
   * Starts waiting jobs on idle slots, highest priority first. A batch-invariant job starts only once
   * every slot is idle and nothing else starts while it runs, so its batches hold its tokens alone
   * (llama.cpp's batched kernels give slightly different numbers for a row depending on what else is in
   * the batch).
   */
  private admit(): void {
    while (this.waiting.length > 0) {
      if (this.exclusiveRunning) return;
      const idle = this.slots.filter((slot) => slot.state === SlotState.Idle);
      if (idle.length === 0) return;
      // The first waiting job whose adapter may run now (`--max-loras` adapters at once).
      const index = this.waiting.findIndex((job) => this.adapterMayRun(job.request.adapter));
      if (index === -1) return;
      const head = this.waiting[index] as Job;
      if (head.request.batchInvariant && idle.length < this.slots.length) return;
      const job = this.waiting.splice(index, 1)[0] as Job;
      job.detach();
      if (job.request.batchInvariant) this.exclusiveRunning = true;
      const slot = this.pickSlot(idle, job.request);
      this.start(slot, job);
    }
  }

  /** Whether a generation under `adapter` may start now: the base always, an adapter within `--max-loras`. */
  private adapterMayRun(adapter: LoraAdapter | undefined): boolean {
    if (!adapter) return true;
    const running = new Set(this.running.flatMap((entry) => entry.job.request.adapter ?? []));
    return running.has(adapter) || running.size < this.maxLoras;
  }

  /** Puts a job on a slot: trims the slot's KV cache to the reused prefix and configures its sampler. */
  private start(slot: Slot, job: Job): void {
    const { request } = job;
    const prompt = request.promptTokens;
    if (prompt.length === 0) {
      // Serving refuses empty prompts; the engine refuses them too rather than corrupt the slot.
      slot.state = SlotState.Idle;
      if (request.batchInvariant) this.exclusiveRunning = false;
      job.dispose();
      job.reject(new Error("the prompt is empty: a generation needs at least one prompt token"));
      return;
    }
    const { context } = this.host;
    // Prompt logprobs need every prompt position's logits, and a batch-invariant job's prefill batch
    // must always be the same: both evaluate the whole prompt.
    const reuse =
      this.prefixCaching &&
      request.promptLogprobs === null &&
      !request.batchInvariant &&
      request.embed === undefined;
    // Another isolation domain's cells are never reused (the time to first token would tell), nor cells
    // computed under another adapter set (their keys and values differ).
    const domain = cacheDomainOf(request);
    let cached = reuse && slot.cacheDomain === domain ? commonPrefixLength(slot.kvTokens, prompt) : 0;
    // At least one prompt token is evaluated, for the next token's logits.
    if (cached >= prompt.length) cached = prompt.length - 1;
    // Never half an image: the cut goes before an image the reused prefix ends inside.
    for (const span of [...slot.kvImages, ...(request.media?.spans ?? [])]) {
      if (cached > span.start && cached < span.start + span.length) cached = span.start;
    }
    slot.state = SlotState.Prefill;
    slot.cacheDomain = domain;
    slot.lastUsedAt = performance.now();
    const startedAt = performance.now();
    try {
      if (slot.kvTokens.length > cached) {
        context.removeTokens(slot.id, positionOf(slot, cached), -1);
        slot.kvTokens.length = cached;
        slot.kvImages = slot.kvImages.filter((span) => span.start + span.length <= cached);
      }
      context.configure(slot.id, samplerConfig(request, this.host.endOfGenerationTokens));
    } catch (error) {
      this.resetSlot(slot);
      if (request.batchInvariant) this.exclusiveRunning = false;
      job.dispose();
      job.reject(error);
      return;
    }
    const generation = new Generation(
      this.host,
      request,
      job.observer,
      cached,
      (tokens) => {
        if (!context.accept(slot.id, Int32Array.from(tokens))) {
          throw new Error(`injected tokens ${tokens.join(",")} are not allowed by the request's grammar`);
        }
      },
      this.jumpForward && request.grammar
        ? (maxTokens) => {
            const tokens = Array.from(context.forced(slot.id, maxTokens));
            this.events?.onJumpForward?.(tokens.length);
            return tokens;
          }
        : undefined,
    );
    this.running.push({ slot, job, generation, startedAt, firstTokenAt: null, lastTokenAt: startedAt });
    job.observer.onStart?.();
  }

  /**
   * The idle slot of the request's isolation domain sharing the longest prefix with the prompt, if that
   * prefix is more than one token and at least a tenth of the prompt (llama-server's
   * `--slot-prompt-similarity` default, 0.1);
   * otherwise (and without prefix caching) the least recently used idle slot (as llama-server), so
   * recent caches survive for the next request. With one KV buffer per sequence (not `kv_unified`) the
   * choice falls first on the idle slots that leave the fewest runs of consecutive ids among the busy
   * slots, and among those on the least recently used: llama.cpp evaluates a step in one physical batch
   * (one pass over the weights) per such run.
   */
  private pickSlot(idle: Slot[], request: GenerationRequest): Slot {
    const prompt = request.promptTokens;
    const domain = cacheDomainOf(request);
    if (this.prefixCaching) {
      let best: Slot | undefined;
      let bestLength = 0;
      for (const slot of idle) {
        if (slot.cacheDomain !== domain) continue;
        const length = commonPrefixLength(slot.kvTokens, prompt);
        if (length > bestLength) {
          best = slot;
          bestLength = length;
        }
      }
      // A match of the first token alone (a BOS every prompt shares) is no reuse: taking that slot would
      // drop its cache for nothing while other idle slots hold less.
      if (best && bestLength > 1 && bestLength >= prompt.length / 10) return best;
    }
    if (this.host.kvUnified) {
      return idle.reduce((choice, slot) => (slot.lastUsedAt < choice.lastUsedAt ? slot : choice));
    }
    const busy = this.slots.map((slot) => slot.state !== SlotState.Idle);
    let choice = idle[0] as Slot;
    let choiceRuns = Number.POSITIVE_INFINITY;
    for (const slot of idle) {
      busy[slot.id] = true;
      const runs = runsOf(busy);
      busy[slot.id] = false;
      if (runs < choiceRuns || (runs === choiceRuns && slot.lastUsedAt < choice.lastUsedAt)) {
        choice = slot;
        choiceRuns = runs;
      }
    }
    return choice;
  }

  /**
   * Evaluates the images that prefilling generations have reached (each its own native call: the vision
   * encoder, then its embeddings' decode), one after the other. Decoding sequences wait meanwhile, as in
   * llama-server. Returns whether any image was evaluated (the loop then looks at aborts again).
   */
  private async evaluateImages(): Promise<boolean> {
    const projector = this.host.projector;
    let evaluated = false;
    for (const running of [...this.running]) {
      const { generation, slot, job } = running;
      const media = generation.request.media;
      const span = media?.spans.find((entry) => entry.start === generation.prefilled);
      if (!media || !span || generation.finishReason !== null) continue;
      if (job.signal?.aborted) continue;
      try {
        if (!projector) throw new Error("the model has no projector for the prompt's images");
        if (span.start + span.length >= generation.request.promptTokens.length) {
          throw new Error("a prompt must not end with an image");
        }
        const nPast = positionOf(slot, slot.kvTokens.length);
        this.useAdapter(job.request.adapter);
        await this.host.context.evalImage(slot.id, projector, media.prompt, span.chunk, nPast);
        slot.kvImages.push(span);
        for (let index = 0; index < span.length; index++) {
          slot.kvTokens.push(generation.request.promptTokens[span.start + index] as number);
        }
        generation.prefilled = span.start + span.length;
        this.events?.onIteration?.(span.length);
        evaluated = true;
      } catch (error) {
        this.fail(running, error);
      }
    }
    return evaluated;
  }

  /**
   * The next step's batch, planned by {@link planStep} over the running set within
   * `--max-num-batched-tokens` (decodes first, then prompt chunks oldest first); the tokens it takes
   * enter the slots' KV bookkeeping here.
   */
  private planStep(group: LoraAdapter | undefined): { input: NativeStepInput; outputs: StepOutputFor[] } {
    const members = this.running.filter((running) => running.job.request.adapter === group);
    const candidates: StepCandidate<Running>[] = members.map((running) => {
      const { generation, slot, job } = running;
      const position = positionOf(slot, slot.kvTokens.length);
      const topN = job.request.logprobs ?? -1;
      if (!generation.prefilling) {
        return { kind: "decode", key: running, seq: slot.id, position, pending: generation.pending, topN };
      }
      const { promptTokens, media, promptLogprobs, embed } = generation.request;
      const from = generation.prefilled;
      const image = media?.spans.find((span) => span.start >= from);
      return {
        kind: "prefill",
        key: running,
        seq: slot.id,
        position,
        prompt: promptTokens,
        from,
        ...(image !== undefined ? { imageStart: image.start } : {}),
        promptTopN: promptLogprobs,
        ...(embed !== undefined ? { embed } : {}),
        topN,
      };
    });
    const plan = planStep(candidates, this.maxNumBatchedTokens);
    for (const { key: running, kind, tokens } of plan.takes) {
      const { generation, slot } = running;
      if (kind === "decode") {
        for (const token of generation.pending.splice(0, tokens)) slot.kvTokens.push(token);
        continue;
      }
      const prompt = generation.request.promptTokens;
      for (let index = generation.prefilled; index < generation.prefilled + tokens; index++) {
        slot.kvTokens.push(prompt[index] as number);
      }
      generation.prefilled += tokens;
    }
    const outputs: StepOutputFor[] = plan.outputs.map((entry) =>
      entry.kind === "sample"
        ? { kind: "sample", running: entry.key }
        : entry.kind === "prompt"
          ? { kind: "prompt", running: entry.key, topN: entry.topN }
          : { kind: "embed", running: entry.key, position: entry.position },
    );
    return { input: plan.input, outputs };
  }

  /** Hands each output of a step to its generation. */
  private applyStep(outputs: StepOutputFor[], output: NativeStepOutput): void {
    outputs.forEach((entry, index) => {
      const { running } = entry;
      const { generation } = running;
      if (generation.finishReason !== null) return;
      try {
        if (entry.kind === "embed") {
          const stride = output.embdStride;
          generation.addEmbedding(
            entry.position,
            output.embeddings.subarray(index * stride, (index + 1) * stride),
          );
          return;
        }
        const token = output.tokens[index] as number;
        // The native sampler answers -1 where the sequence's grammar cannot be enforced (never a token it
        // does not allow).
        if (token < 0) throw new GrammarUnenforceableError(generation.completionTokens);
        const wanted = entry.kind === "prompt" ? entry.topN : running.job.request.logprobs;
        const logprob = wanted === null ? undefined : tokenLogprob(output, index, token);
        if (entry.kind === "prompt") {
          generation.addPromptLogprob(logprob as TokenLogprob);
          return;
        }
        const now = performance.now();
        if (running.firstTokenAt === null) {
          running.firstTokenAt = now;
          running.slot.state = SlotState.Decode;
        } else this.events?.onInterTokenLatency?.((now - running.lastTokenAt) / 1000);
        running.lastTokenAt = now;
        generation.onToken(token, logprob);
      } catch (error) {
        this.fail(running, error);
      }
    });
  }

  /** The guided-decoding mask cache's lookups and memory (metrics). */
  maskCacheStats(): MaskCacheStats {
    return this.host.context.maskStats();
  }

  /** Ends a finished (or aborted) generation: its result to the caller, its slot back to idle. */
  private complete(running: Running): void {
    this.remove(running);
    const { job, slot, generation } = running;
    let result: GenerationResult;
    try {
      result = generation.finish();
    } catch (error) {
      this.resetSlot(slot);
      job.reject(error);
      return;
    }
    this.host.context.release(slot.id);
    slot.state = SlotState.Idle;
    this.events?.onFinished?.(result, {
      queueSeconds: (running.startedAt - job.submittedAt) / 1000,
      ttftSeconds: running.firstTokenAt === null ? null : (running.firstTokenAt - job.submittedAt) / 1000,
      e2eSeconds: (performance.now() - job.submittedAt) / 1000,
    });
    job.resolve(result);
  }

  /** Ends a generation with an error; its slot's KV state is dropped. */
  private fail(running: Running, error: unknown): void {
    if (!this.running.includes(running)) return;
    this.remove(running);
    this.resetSlot(running.slot);
    running.job.reject(error);
  }

  private remove(running: Running): void {
    const index = this.running.indexOf(running);
    if (index !== -1) this.running.splice(index, 1);
    running.job.dispose();
    running.job.detach();
    if (running.job.request.batchInvariant) this.exclusiveRunning = false;
  }

  /** Clears a slot (after a failure its KV state is unknown). */
  private resetSlot(slot: Slot): void {
    try {
      this.host.context.removeTokens(slot.id, 0, -1);
      this.host.context.release(slot.id);
    } catch {
      // A disposed context: nothing left to clear.
    }
    slot.kvTokens = [];
    slot.kvImages = [];
    slot.state = SlotState.Idle;
  }
}

/**
 * The cache domain of a request's cells: its isolation domain, and the adapter they are computed under
 * (by id, so an adapter loaded again under the same name never reuses the old one's cells).
 */
function cacheDomainOf(request: GenerationRequest): string {
  const domain = request.cacheDomain ?? "";
  return request.adapter ? `${domain}\u0000lora:${request.adapter.id}` : domain;
}

/**
 * The position of a slot's `index`-th KV cell: the index itself, plus what the images before it advance
 * beyond their cells (M-RoPE models place an image's cells on fewer positions).
 */
function positionOf(slot: Slot, index: number): number {
  let position = index;
  for (const span of slot.kvImages)
    if (span.start + span.length <= index) position += span.nPos - span.length;
  return position;
}

/** The logprob entry of output `index` of a step (vLLM's floor of -9999 for a probability of 0). */
function tokenLogprob(output: NativeStepOutput, index: number, token: number): TokenLogprob {
  const top: { id: number; logprob: number }[] = [];
  for (let k = 0; k < output.topStride; k++) {
    const id = output.topIds[index * output.topStride + k] as number;
    if (id < 0) break;
    top.push({ id, logprob: floorLogprob(output.topLogprobs[index * output.topStride + k] as number) });
  }
  return {
    id: token,
    logprob: floorLogprob(output.logprobs[index] as number),
    rank: output.ranks[index] as number,
    top,
  };
}

function floorLogprob(value: number): number {
  return Number.isFinite(value) ? Math.max(value, -9999) : -9999;
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

/**
 * Number of runs of consecutive true entries in `busy` (slot ids in order): with one KV buffer per
 * sequence llama.cpp splits a step into one physical batch per run of consecutive sequence ids
 * (`llama_batch_allocr::split_equal`, sequential).
 */
export function runsOf(busy: readonly boolean[]): number {
  let runs = 0;
  for (let id = 0; id < busy.length; id++) {
    if (busy[id] && !busy[id - 1]) runs++;
  }
  return runs;
}

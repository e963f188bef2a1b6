import type { BatchItem, LlamaContext, PrioritizedBatchItem } from "node-llama-cpp";

/**
 * Lines up the running sequences' decode steps so that each decode batch holds every running
 * sequence's next token, and lets new requests' KV-cache erasures in between batches.
 *
 * Why, in node-llama-cpp 3.21.1 (`LlamaContext.dispatchPendingBatch`): the context decodes inside its
 * "context" lock and, after a batch, loops `while (this._queuedDecodes.length > 0)` without releasing
 * the lock or going through `dispatchSchedule`. Each sequence samples its token in its own native call,
 * so the sequences that finish sampling first queue their next token while the loop is still running,
 * and the loop decodes them at once without the slower ones (measured at 8 sequences: steps of 3.6
 * sequences on average, a third of them of 1). And a new request's `clearHistory` or
 * `eraseContextTokenRanges` needs that lock, so it waited until no running sequence had anything
 * queued: up to 13.9 s (the whole life of a straggler, which decoded alone meanwhile).
 *
 * How: every running sequence is a {@link GateMember}. When its evaluation returns it calls
 * {@link GateMember.arrived}; after handling the token it calls {@link GateMember.step} before queuing
 * the next one. The gate releases all waiting members together once no released member is still in
 * node-llama-cpp (a member in the batch running now comes back after it, so waiting for it re-joins
 * sequences that drifted into alternating batches) and every member handling its token has come to
 * the gate (one that is slow, e.g. the JS sampler's own work, is waited for
 * at most a quarter of the last round, at most `maxWaitMs`). So nothing is queued while the batch loop
 * decides whether to loop again: it stops, the lock is freed, and the released tokens go out as one
 * batch through `dispatchSchedule`. While a new request's erasure ({@link erase}) waits for the lock,
 * no member is released, so the erasure runs before the next batch. Sequences still evaluating their
 * prompt are not waited for (a long prompt takes several batches): the others' tokens go with it.
 *
 * `dispatchSchedule` (see {@link schedule}) then waits until as many sequences have queued as are
 * released and not back (at most the same straggler limit), reading node-llama-cpp's internal
 * `_queuedDecodeSequenceIds`; if that field is missing it dispatches at once, as the library would.
 */
export class BatchGate {
  /** Longest wait for stragglers, in milliseconds (the wait is also at most a quarter of a round). */
  readonly maxWaitMs: number;
  private context: LlamaContext | undefined;
  private readonly members = new Set<MemberState>();
  /** Erasures waiting for (or holding) the context lock. */
  private erasures = 0;
  /** `performance.now()` of the last release, in milliseconds. */
  private lastReleaseAt: number | undefined;
  /** Length of the last round (release to release), in milliseconds. */
  private lastRoundMs = 0;
  private stragglerTimer: NodeJS.Timeout | undefined;
  /** Rounds, members released in them, and rounds released without a straggler, for benchmarks and tests. */
  readonly stats = { rounds: 0, released: 0, timedOut: 0, batches: 0 };

  /** Shortest wait for stragglers, in milliseconds. */
  readonly minWaitMs: number;

  /**
   * @param maxWaitMs longest wait for a straggler, in milliseconds.
   * @param minWaitMs shortest wait for a straggler, in milliseconds (at most `maxWaitMs`).
   */
  constructor(maxWaitMs = 40, minWaitMs = 1) {
    this.maxWaitMs = maxWaitMs;
    this.minWaitMs = minWaitMs;
  }

  /** Called with the number of tokens of every decode batch (metrics). */
  onBatch: ((tokens: number) => void) | undefined;

  /** The `itemPrioritizationStrategy` to pass to `createContext({batching})` (see {@link sequenceOrderedStrategy}). */
  readonly prioritize = sequenceOrderedStrategy(
    () => this.context,
    (tokens) => this.onBatch?.(tokens),
  );

  /** Connects the gate to the context whose queue it watches. */
  attach(context: LlamaContext): void {
    this.context = context;
  }

  /** Number of running sequences (members), for tests and metrics. */
  get memberCount(): number {
    return this.members.size;
  }

  /**
   * Adds a sequence that is about to evaluate its prompt. Call {@link GateMember.arrived} when each
   * evaluation returns its token, {@link GateMember.step} before queuing the next step, and
   * {@link GateMember.leave} when the generation ends (in a `finally`).
   */
  join(): GateMember {
    const member: MemberState = { phase: "prompt", release: undefined };
    this.members.add(member);
    return {
      arrived: () => this.arrived(member),
      step: () => this.step(member),
      leave: () => this.leave(member),
    };
  }

  /**
   * Runs a KV-cache erasure (`clearHistory`, `eraseContextTokenRanges`) of a sequence that is starting:
   * no member is released until it is done, so node-llama-cpp's batch loop stops and lets it have the lock.
   */
  async erase<T>(run: () => Promise<T>): Promise<T> {
    this.erasures++;
    try {
      return await run();
    } finally {
      this.erasures--;
      this.maybeRelease();
    }
  }

  /** The `dispatchSchedule` function to pass to `createContext({batching})`. */
  readonly schedule = (dispatch: () => void): void => {
    const started = performance.now();
    const limit = this.stragglerLimitMs();
    const check = () => {
      const queued = this.queuedSequences();
      // Every member released in this round queues its token at once (or is a straggler).
      const ready = queued === undefined || queued >= this.count("engine");
      if (!ready && performance.now() - started < limit) {
        setImmediate(check);
        return;
      }
      this.stats.batches++;
      dispatch();
    };
    setImmediate(check);
  };

  private arrived(member: MemberState): void {
    if (member.phase === "engine" || member.phase === "prompt") member.phase = "processing";
    this.maybeRelease();
  }

  private step(member: MemberState): Promise<void> {
    member.phase = "waiting";
    const released = new Promise<void>((resolve) => {
      member.release = resolve;
    });
    this.maybeRelease();
    return released;
  }

  private leave(member: MemberState): void {
    if (!this.members.delete(member)) return;
    member.release?.();
    this.maybeRelease();
  }

  private count(phase: MemberState["phase"]): number {
    let count = 0;
    for (const member of this.members) if (member.phase === phase) count++;
    return count;
  }

  /**
   * Releases the waiting members once no released member is still in the engine, no member is still
   * handling its token and no erasure waits; members still handling their token are waited for at
   * most the straggler limit.
   */
  private maybeRelease(): void {
    if (this.erasures > 0 || this.count("waiting") === 0 || this.count("engine") > 0) {
      this.clearTimer();
      return;
    }
    if (this.count("processing") === 0) {
      this.release(false);
      return;
    }
    this.stragglerTimer ??= setTimeout(() => {
      this.stragglerTimer = undefined;
      if (this.erasures === 0 && this.count("engine") === 0) this.release(true);
    }, this.stragglerLimitMs());
  }

  private clearTimer(): void {
    if (this.stragglerTimer) {
      clearTimeout(this.stragglerTimer);
      this.stragglerTimer = undefined;
    }
  }

  private release(timedOut: boolean): void {
    this.clearTimer();
    const now = performance.now();
    if (this.lastReleaseAt !== undefined) this.lastRoundMs = now - this.lastReleaseAt;
    this.lastReleaseAt = now;
    let released = 0;
    for (const member of this.members) {
      if (member.phase !== "waiting") continue;
      member.phase = "engine";
      const resolve = member.release;
      member.release = undefined;
      resolve?.();
      released++;
    }
    this.stats.rounds++;
    this.stats.released += released;
    if (timedOut) this.stats.timedOut++;
  }

  /** A quarter of the last round, at least `minWaitMs` and at most `maxWaitMs`. */
  private stragglerLimitMs(): number {
    return Math.min(this.maxWaitMs, Math.max(this.minWaitMs, this.lastRoundMs / 4));
  }

  private queuedSequences(): number | undefined {
    const queued = (this.context as unknown as { _queuedDecodeSequenceIds?: Set<number> } | undefined)
      ?._queuedDecodeSequenceIds;
    return queued?.size;
  }
}

/** A running sequence's handle on the {@link BatchGate}. */
export type GateMember = {
  /** The sequence's evaluation returned its token (call it before handling the token). */
  arrived(): void;
  /** Resolves when the sequence may queue its next decode step (call it after each token, before the next). */
  step(): Promise<void>;
  /** The sequence is done (idempotent); a pending `step` resolves. */
  leave(): void;
};

type MemberState = {
  /**
   * prompt: evaluating its prompt (not waited for: a long prompt takes several batches); engine:
   * released, its step not back from node-llama-cpp yet (waited for: it comes back after the batch
   * running now); processing: handling its token (waited for up to the straggler limit); waiting: at
   * the gate.
   */
  phase: "prompt" | "engine" | "processing" | "waiting";
  release: (() => void) | undefined;
};

/**
 * The context's `batching.itemPrioritizationStrategy`: which queued items go into the next decode batch,
 * how many tokens of each, and in what order.
 *
 * Order: ascending sequence id. With more than one sequence, llama.cpp keeps one KV stream per
 * sequence (`kv_unified` off; node-llama-cpp 3.21.1 does not expose it) and cuts a batch into ubatches
 * with `split_equal(…, sequential = true)` (llama.cpp `src/llama-batch.cpp`), which adds a sequence to
 * the current ubatch only if its id is the previous one's plus one. Every ubatch is a full pass over
 * the weights, so the tokens of sequences 3, 1, 0, 2 in that order cost three passes and in order
 * 0, 1, 2, 3 one. node-llama-cpp's default strategy keeps the queue's order (whichever sequence
 * sampled first). Measured on the synthetic Qwen2.5-0.5B (`npm run bench`): see bench/results.
 *
 * Amounts: one token for every item first (a decoding sequence needs no more), then the rest of the
 * batch's `size` tokens to the items with more (prompts), higher `evaluationPriority` first — decodes
 * before prefill chunks, as vLLM's chunked prefill.
 *
 * The sequence ids come from node-llama-cpp's internal `_queuedDecodes` (same order as `items`, same
 * `tokens` arrays); if that does not line up, the queue's order is kept.
 */
export function sequenceOrderedStrategy(
  context: () => LlamaContext | undefined,
  onBatch?: (tokens: number) => void,
): (options: { items: readonly BatchItem[]; size: number }) => PrioritizedBatchItem[] {
  return ({ items, size }) => {
    const queued = (
      context() as unknown as { _queuedDecodes?: { sequenceId: number; tokens: unknown }[] } | undefined
    )?._queuedDecodes;
    const aligned =
      queued !== undefined &&
      queued.length === items.length &&
      items.every((item, index) => queued[index]?.tokens === item.tokens);
    const order = items.map((item, index) => ({
      item,
      sequenceId: aligned ? (queued[index] as { sequenceId: number }).sequenceId : index,
      processAmount: 0,
    }));
    order.sort((a, b) => a.sequenceId - b.sequenceId);
    let left = size;
    const chosen: typeof order = [];
    for (const entry of order) {
      if (left === 0) break;
      entry.processAmount = 1;
      left--;
      chosen.push(entry);
    }
    const wanting = chosen
      .filter((entry) => entry.item.tokens.length > 1)
      .sort((a, b) => b.item.evaluationPriority - a.item.evaluationPriority || a.sequenceId - b.sequenceId);
    for (const entry of wanting) {
      if (left === 0) break;
      const more = Math.min(entry.item.tokens.length - 1, left);
      entry.processAmount += more;
      left -= more;
    }
    onBatch?.(size - left);
    return chosen.map(({ item, processAmount }) => ({ item, processAmount }));
  };
}

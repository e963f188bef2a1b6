/**
 * The errors the engine raises. They say what happened in the engine's terms (slots, queue, timeout);
 * `toApiError` in `src/errors.ts` is the one place that maps them to the API's status, type and code.
 */

/** Base of every error the engine raises on purpose. */
export class EngineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The waiting queue cannot take more generations now (`--max-waiting`); a retry later may succeed. */
export class QueueFullError extends EngineError {
  /** Generations already waiting. */
  readonly waiting: number;

  constructor(waiting: number) {
    super(`The waiting queue is full: ${waiting} generations are already waiting.`);
    this.waiting = waiting;
  }
}

/** More generations at once than the scheduler can ever hold (slots + `--max-waiting`); no retry helps. */
export class CapacityExceededError extends EngineError {
  /** Generations asked for at once. */
  readonly requested: number;
  /** The scheduler's slots. */
  readonly slots: number;
  /** The most generations that may wait (`--max-waiting`). */
  readonly maxWaiting: number;

  constructor(requested: number, slots: number, maxWaiting: number) {
    super(`${requested} generations at once exceed ${slots} slots + ${maxWaiting} waiting.`);
    this.requested = requested;
    this.slots = slots;
    this.maxWaiting = maxWaiting;
  }
}

/** The scheduler is closed (the server is shutting down) and takes no more generations. */
export class EngineClosedError extends EngineError {
  constructor() {
    super("The scheduler is closed.");
  }
}

/** A generation ran longer than the request timeout (`--request-timeout`); the abort reason it ends with. */
export class RequestTimeoutError extends EngineError {
  /** The timeout, in seconds. */
  readonly seconds: number;

  constructor(seconds: number) {
    super(`The generation did not finish within ${seconds} s.`);
    this.seconds = seconds;
  }
}

/** The longest one token mask computation may take (native/src/constraint.h `kMaskTimeLimitMs`), in ms. */
export const GRAMMAR_MASK_TIME_LIMIT_MS = 1000;

/**
 * The sequence's grammar could not go on within the mask engine's bounds (native/src/constraint.h: one
 * mask computation over `kMaskTimeLimitMs`, or no allowed token left that may be drawn): the generation
 * ends with this error instead of a token the grammar does not allow (issue 31).
 */
export class GrammarUnenforceableError extends EngineError {
  /** Tokens generated before it ended. */
  readonly generated: number;

  constructor(generated: number) {
    super(`The grammar could not be enforced after ${generated} tokens.`);
    this.generated = generated;
  }
}

/** A generation names a LoRA adapter that was unloaded before it could be queued. */
export class AdapterUnloadedError extends EngineError {
  /** The adapter's served name. */
  readonly adapter: string;

  constructor(adapter: string) {
    super(`The LoRA adapter '${adapter}' has been unloaded.`);
    this.adapter = adapter;
  }
}

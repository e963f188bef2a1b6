/**
 * Compiles guided-decoding constraints on a worker thread, so that a large schema (up to ~100 ms of
 * compiling) never blocks the event loop that streams other requests' tokens, and under limits of time
 * and memory, so that no constraint can crash the process or hold the compiler: a worker that overruns
 * is terminated and replaced. The worker's young generation is larger than V8's default for the main
 * thread: the compiler allocates many short-lived objects, and a 16 MiB semi-space made garbage
 * collection a fifth of its time on the largest schemas.
 */
import { Worker } from "node:worker_threads";
import type { CompiledConstraint, CompileOptions, ConstraintKind } from "../compile.ts";
import { CompilerFailureError, ConstraintError } from "../errors.ts";
import type { CompileJob, CompileReply } from "./compileThread.ts";

/** The limits of a {@link ConstraintCompiler}. */
export type CompilerLimits = {
  /** Wall-clock milliseconds one compilation may take once the worker runs it. Defaults to 10,000. */
  timeoutMs: number;
  /** Old-generation heap of the worker, in MiB (`resourceLimits.maxOldGenerationSizeMb`). Defaults to 1,024. */
  heapMb: number;
};

/** See {@link CompilerLimits} for each default. */
export const DEFAULT_COMPILER_LIMITS: CompilerLimits = { timeoutMs: 10_000, heapMb: 1024 };

/**
 * The worker's young generation in MiB (`resourceLimits.maxYoungGenerationSizeMb`): three semi-spaces of
 * 64 MiB, where V8's default is 16 MiB. Measured on JSONSchemaBench's JsonSchemaStore (491 schemas, warm,
 * median of 3 per schema, 2-core VM): compile p99 26–28 ms with the default, 18–21 ms with this.
 * Exported so that `bench/schemas.ts` times the compiler under the same heap.
 */
export const COMPILER_YOUNG_GENERATION_MB = 192;

type Job = CompileJob & {
  resolve(compiled: CompiledConstraint): void;
  reject(error: unknown): void;
};

// From the compiled build (dist/, plain JavaScript) the worker runs `compileThread.js` itself; from the
// TypeScript sources it starts through `tsWorker.mjs`, which registers tsx in the worker first.
const COMPILED = import.meta.url.endsWith(".js");
const THREAD_MODULE = new URL(COMPILED ? "./compileThread.js" : "./compileThread.ts", import.meta.url);
const WORKER_URL = COMPILED ? THREAD_MODULE : new URL("./tsWorker.mjs", import.meta.url);

/**
 * One compiler worker thread and a FIFO queue of constraints for it. Idle, the worker does not keep the
 * process alive; it is started on first use (or by {@link warm}) and again after it was terminated.
 */
export class ConstraintCompiler {
  private worker: Worker | undefined;
  private readonly queue: Job[] = [];
  private job: Job | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Whether the worker has built its automata (jobs are sent, and timed, from then on). */
  private ready = false;
  private nextId = 1;

  constructor(readonly limits: CompilerLimits = DEFAULT_COMPILER_LIMITS) {}

  /**
   * Compiles a constraint as `compileConstraint` (`compile.ts`) does, on the worker (with its cache).
   * `spec` is structured-cloned into the worker: plain JSON data only. When `signal` aborts (the client
   * left), the promise rejects with the signal's reason at once: a constraint still queued is dropped, and
   * one compiling ends with its worker (a fresh one takes the next), so that a client that sends a slow
   * schema and leaves does not hold every other guided request.
   * @returns The frozen `{kind, gbnf}`.
   * @throws ConstraintError as `compileConstraint` (naming `options.param`), also when the compilation takes
   *   longer than `timeoutMs` or more than `heapMb` of memory; `CompilerFailureError` for a failure of the compiler itself.
   */
  compile(
    kind: ConstraintKind,
    spec: unknown,
    options: CompileOptions = {},
    signal?: AbortSignal,
  ): Promise<CompiledConstraint> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const job: Job = { id: this.nextId++, kind, spec, options, resolve, reject };
      if (signal) {
        const abandon = (): void => {
          const queued = this.queue.indexOf(job);
          if (queued >= 0) {
            this.queue.splice(queued, 1);
            reject(signal.reason);
          } else if (this.job === job) this.fail(signal.reason);
          else reject(signal.reason);
        };
        signal.addEventListener("abort", abandon, { once: true });
        job.resolve = (compiled) => {
          signal.removeEventListener("abort", abandon);
          resolve(compiled);
        };
        job.reject = (error) => {
          signal.removeEventListener("abort", abandon);
          reject(error);
        };
      }
      this.queue.push(job);
      this.pump();
    });
  }

  /** Starts the worker now (it builds the formats' automata, about 0.5 s of CPU), if it is not running. */
  warm(): void {
    this.spawn().unref();
  }

  /** Terminates the worker; constraints still queued or compiling are rejected (`CompilerFailureError`). */
  async close(): Promise<void> {
    for (const job of this.queue.splice(0))
      job.reject(new CompilerFailureError("The constraint compiler closed."));
    const worker = this.worker;
    this.worker = undefined;
    if (this.job)
      this.settle((job) => job.reject(new CompilerFailureError("The constraint compiler closed.")));
    if (worker) await worker.terminate();
  }

  private pump(): void {
    if (this.job !== undefined || this.queue.length === 0) return;
    const worker = this.spawn();
    worker.ref();
    if (!this.ready) return; // sent once the worker says it is ready
    const job = this.queue.shift() as Job;
    this.job = job;
    this.timer = setTimeout(
      () =>
        this.fail(
          new ConstraintError(
            `The constraint took longer than ${this.limits.timeoutMs / 1000} s to compile, the server's limit; simplify it.`,
            job.options.param ?? null,
          ),
        ),
      this.limits.timeoutMs,
    );
    const { id, kind, spec, options } = job;
    try {
      worker.postMessage({ id, kind, spec, options } satisfies CompileJob);
    } catch (error) {
      // (A spec parsed from JSON always clones, unless it nests too deeply for the clone's stack.)
      const reason = error instanceof Error ? error.message : String(error);
      this.settle((done) =>
        done.reject(
          new ConstraintError(`The constraint cannot be compiled: ${reason}.`, options.param ?? null),
        ),
      );
    }
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_URL, {
      workerData: { module: THREAD_MODULE.href },
      resourceLimits: {
        maxOldGenerationSizeMb: this.limits.heapMb,
        maxYoungGenerationSizeMb: COMPILER_YOUNG_GENERATION_MB,
      },
      execArgv: [],
      stdout: false,
      stderr: false,
    });
    this.ready = false;
    worker.on("message", (reply: CompileReply | { ready: true }) => {
      if ("ready" in reply) {
        this.ready = true;
        this.pump();
        if (this.job === undefined) worker.unref();
        return;
      }
      if (reply.id !== this.job?.id) return;
      if (reply.ok) this.settle((job) => job.resolve(Object.freeze({ kind: job.kind, gbnf: reply.gbnf })));
      else if ("error" in reply) {
        const { message, param } = reply.error;
        this.settle((job) => job.reject(new ConstraintError(message, param)));
      } else
        this.settle((job) =>
          job.reject(new CompilerFailureError(`The constraint compiler failed: ${reply.failure}`)),
        );
    });
    worker.on("error", (error: Error & { code?: string }) => {
      // ERR_WORKER_OUT_OF_MEMORY: the constraint needed more than the heap limit.
      const param = this.job?.options.param ?? null;
      this.fail(
        error.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? new ConstraintError(
              `The constraint needs more than ${this.limits.heapMb} MiB of memory to compile, the server's limit; simplify it.`,
              param,
            )
          : new CompilerFailureError(`The constraint compiler failed: ${error.message}`),
      );
    });
    worker.on("exit", () => {
      if (this.worker === worker) this.fail(new CompilerFailureError("The constraint compiler stopped."));
    });
    this.worker = worker;
    return worker;
  }

  /**
   * Ends the current job with `error` (or, when the worker failed before it was ready, the first one
   * waiting) and drops the worker (it may be stuck); the next job starts another.
   */
  private fail(error: unknown): void {
    const worker = this.worker;
    this.worker = undefined;
    if (this.job === undefined && !this.ready) this.job = this.queue.shift();
    if (worker) {
      worker.removeAllListeners();
      worker.on("error", () => {}); // an error raised while terminating has no one left to tell
      void worker.terminate();
    }
    this.settle((job) => job.reject(error));
  }

  private settle(finish: (job: Job) => void): void {
    clearTimeout(this.timer);
    const job = this.job;
    this.job = undefined;
    if (job) finish(job);
    if (this.queue.length > 0) this.pump();
    else this.worker?.unref(); // an idle worker never keeps the process alive
  }
}

let shared: ConstraintCompiler | undefined;

/** The process-wide compiler with the default limits, created on first use. */
export function sharedCompiler(): ConstraintCompiler {
  shared ??= new ConstraintCompiler();
  return shared;
}

/**
 * Compiles guided-decoding constraints on a worker thread, so that a large schema (up to ~100 ms of
 * compiling) never blocks the event loop that streams other requests' tokens, and under limits of time
 * and memory, so that no constraint can crash the process or hold the compiler: a worker that overruns
 * is terminated and replaced. The worker's young generation is larger than V8's default for the main
 * thread: the compiler allocates many short-lived objects, and a 16 MiB semi-space made garbage
 * collection a fifth of its time on the largest schemas.
 */

import { WorkerSupervisor } from "../../workers/WorkerSupervisor.ts";
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

type Task = Omit<CompileJob, "id">;

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
  private readonly worker: WorkerSupervisor<Task, CompileReply, CompiledConstraint>;

  constructor(readonly limits: CompilerLimits = DEFAULT_COMPILER_LIMITS) {
    this.worker = new WorkerSupervisor({
      url: WORKER_URL,
      options: {
        workerData: { module: THREAD_MODULE.href },
        resourceLimits: {
          maxOldGenerationSizeMb: limits.heapMb,
          maxYoungGenerationSizeMb: COMPILER_YOUNG_GENERATION_MB,
        },
        execArgv: [],
        stdout: false,
        stderr: false,
      },
      // The worker builds the formats' automata, then says it is ready.
      handshake: true,
      timeoutMs: limits.timeoutMs,
      message: ({ kind, spec, options }, id) => ({ id, kind, spec, options }) satisfies CompileJob,
      result: (reply, { kind }) => {
        if (reply.ok) return Object.freeze({ kind, gbnf: reply.gbnf });
        if ("error" in reply) throw new ConstraintError(reply.error.message, reply.error.param);
        throw new CompilerFailureError(`The constraint compiler failed: ${reply.failure}`);
      },
      timeoutError: ({ options }) =>
        new ConstraintError(
          `The constraint took longer than ${limits.timeoutMs / 1000} s to compile, the server's limit; simplify it.`,
          options.param ?? null,
        ),
      // ERR_WORKER_OUT_OF_MEMORY: the constraint needed more than the heap limit.
      crashError: (error, task) =>
        error.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? new ConstraintError(
              `The constraint needs more than ${limits.heapMb} MiB of memory to compile, the server's limit; simplify it.`,
              task?.options.param ?? null,
            )
          : new CompilerFailureError(`The constraint compiler failed: ${error.message}`),
      exitError: () => new CompilerFailureError("The constraint compiler stopped."),
      closedError: () => new CompilerFailureError("The constraint compiler closed."),
      // (A spec parsed from JSON always clones, unless it nests too deeply for the clone's stack.)
      postError: (error, { options }) =>
        new ConstraintError(
          `The constraint cannot be compiled: ${error instanceof Error ? error.message : String(error)}.`,
          options.param ?? null,
        ),
    });
  }

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
    return this.worker.run({ kind, spec, options }, signal);
  }

  /** Starts the worker now (its modules load before the first constraint needs them), if it is not running. */
  warm(): void {
    this.worker.warm();
  }

  /** Terminates the worker; constraints still queued or compiling are rejected (`CompilerFailureError`). */
  close(): Promise<void> {
    return this.worker.close();
  }
}

let shared: ConstraintCompiler | undefined;

/** The process-wide compiler with the default limits, created on first use. */
export function sharedCompiler(): ConstraintCompiler {
  shared ??= new ConstraintCompiler();
  return shared;
}

/**
 * Supervises worker threads that run one task at a time each, so that a task cannot crash the process or
 * hold the caller: tasks wait in one FIFO queue for an idle worker; a task past its time limit is
 * rejected and its worker terminated (it may be stuck in a loop); a worker that raises (out of memory
 * under `resourceLimits`, an uncaught error) or exits fails its running task; and the next task starts a
 * fresh worker. Idle workers never keep the process alive. The chat-template sandbox
 * (`chat/TemplateSandbox.ts`) and the constraint compiler (`structured/worker/compileService.ts`) are
 * built on it; each says in a {@link WorkerSupervisorSpec} what its messages are and what each failure
 * rejects with.
 */
import { Worker, type WorkerOptions } from "node:worker_threads";

/** A worker's reply to one task: it carries the task's `id`. */
export type WorkerReply = { id: number };

/** What a {@link WorkerSupervisor} needs to know about its workers, their messages and their failures. */
export type WorkerSupervisorSpec<Task, Reply extends WorkerReply, Result> = {
  /** The worker's entry module (`new Worker(url, options)`); plain JavaScript, as worker threads do not inherit tsx's hooks. */
  url: URL;
  /** The options of every worker started (`resourceLimits`, `workerData`, `execArgv`, ...). */
  options: WorkerOptions;
  /** Worker threads running tasks at once; further tasks wait in FIFO order. Defaults to 1. */
  workers?: number;
  /**
   * Whether a fresh worker first posts `{ ready: true }` (after set-up of its own, such as building
   * caches): tasks are posted to it, and timed, only from then on. A worker that fails before it is
   * ready rejects the first task waiting (so that a worker that cannot start does not loop). Defaults
   * to false (a worker takes tasks as soon as it is made).
   */
  handshake?: boolean;
  /** Wall-clock milliseconds a task may run once posted to its worker. */
  timeoutMs: number;
  /** The message posted to the worker for `task`; it must carry `id`, which the reply repeats. */
  message(task: Task, id: number): unknown;
  /** The task's result from its worker's reply; what it throws rejects the task. */
  result(reply: Reply, task: Task): Result;
  /** What a task past `timeoutMs` rejects with. */
  timeoutError(task: Task): unknown;
  /**
   * What the task running on a worker that raised `error` rejects with (`error.code` is
   * `ERR_WORKER_OUT_OF_MEMORY` past `resourceLimits`); `task` is the one running, if any.
   */
  crashError(error: Error & { code?: string }, task: Task | undefined): unknown;
  /** What the task running on a worker that exited by itself rejects with. */
  exitError(): unknown;
  /** What tasks still queued or running at {@link WorkerSupervisor.close} reject with. */
  closedError(): unknown;
  /** What a task whose message cannot be posted (structured clone failed) rejects with; its worker is kept. */
  postError(error: unknown, task: Task): unknown;
};

type Pending<Task, Result> = {
  id: number;
  task: Task;
  resolve(result: Result): void;
  reject(error: unknown): void;
};

/** One worker thread (started on demand) and the task it runs, if any. */
type Lane<Task, Result> = {
  worker: Worker | undefined;
  /** Whether the worker takes tasks (always, without a handshake). */
  ready: boolean;
  pending: Pending<Task, Result> | undefined;
  timer: NodeJS.Timeout | undefined;
};

/**
 * A pool of `spec.workers` supervised worker threads and their FIFO queue (see the module comment).
 * Workers start on first use (or {@link warm}) and again after one was terminated.
 */
export class WorkerSupervisor<Task, Reply extends WorkerReply, Result> {
  private readonly lanes: Lane<Task, Result>[];
  private readonly queue: Pending<Task, Result>[] = [];
  private nextId = 1;

  constructor(private readonly spec: WorkerSupervisorSpec<Task, Reply, Result>) {
    this.lanes = Array.from({ length: Math.max(1, spec.workers ?? 1) }, () => ({
      worker: undefined,
      ready: false,
      pending: undefined,
      timer: undefined,
    }));
  }

  /**
   * Runs `task` on the next idle worker (the message is structured-cloned: plain data only). When
   * `signal` aborts, the promise rejects with the signal's reason at once: a task still queued is
   * dropped, a running one ends with its worker (a fresh one takes the next task).
   * @returns `spec.result` of the worker's reply.
   * @throws What the spec's `result`, `timeoutError`, `crashError`, `exitError`, `closedError` or
   *   `postError` gives; the signal's reason when it aborts.
   */
  run(task: Task, signal?: AbortSignal): Promise<Result> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const pending: Pending<Task, Result> = { id: this.nextId++, task, resolve, reject };
      if (signal) {
        const abandon = (): void => {
          const queued = this.queue.indexOf(pending);
          const lane = this.lanes.find((candidate) => candidate.pending === pending);
          if (queued >= 0) {
            this.queue.splice(queued, 1);
            reject(signal.reason);
          } else if (lane) this.fail(lane, signal.reason);
          else reject(signal.reason);
        };
        signal.addEventListener("abort", abandon, { once: true });
        pending.resolve = (result) => {
          signal.removeEventListener("abort", abandon);
          resolve(result);
        };
        pending.reject = (error) => {
          signal.removeEventListener("abort", abandon);
          reject(error);
        };
      }
      this.queue.push(pending);
      this.pump();
    });
  }

  /** Starts the first worker now (its set-up runs before any task needs it), if it is not running. */
  warm(): void {
    this.spawn(this.lanes[0] as Lane<Task, Result>).unref();
  }

  /** Terminates every worker; tasks still queued or running are rejected with `spec.closedError()`. */
  async close(): Promise<void> {
    for (const pending of this.queue.splice(0)) pending.reject(this.spec.closedError());
    await Promise.all(
      this.lanes.map((lane) => {
        const worker = lane.worker;
        lane.worker = undefined;
        if (lane.pending) this.settle(lane, (pending) => pending.reject(this.spec.closedError()));
        return worker?.terminate();
      }),
    );
  }

  /** Gives queued tasks to idle workers, starting those that are not running. */
  private pump(): void {
    for (const lane of this.lanes) {
      if (this.queue.length === 0) return;
      if (lane.pending) continue;
      const worker = this.spawn(lane);
      worker.ref();
      if (!lane.ready) continue; // posted once the worker says it is ready
      this.start(lane, worker, this.queue.shift() as Pending<Task, Result>);
    }
  }

  private start(lane: Lane<Task, Result>, worker: Worker, pending: Pending<Task, Result>): void {
    lane.pending = pending;
    lane.timer = setTimeout(() => this.fail(lane, this.spec.timeoutError(pending.task)), this.spec.timeoutMs);
    try {
      worker.postMessage(this.spec.message(pending.task, pending.id));
    } catch (error) {
      this.settle(lane, (done) => done.reject(this.spec.postError(error, done.task)));
    }
  }

  private spawn(lane: Lane<Task, Result>): Worker {
    if (lane.worker) return lane.worker;
    const worker = new Worker(this.spec.url, this.spec.options);
    lane.ready = !this.spec.handshake;
    worker.on("message", (reply: Reply | { ready: true }) => {
      if (this.spec.handshake && "ready" in reply) {
        lane.ready = true;
        this.pump();
        if (lane.pending === undefined) worker.unref();
        return;
      }
      if ((reply as Reply).id !== lane.pending?.id) return;
      this.settle(lane, (done) => {
        let result: Result;
        try {
          result = this.spec.result(reply as Reply, done.task);
        } catch (error) {
          done.reject(error);
          return;
        }
        done.resolve(result);
      });
    });
    worker.on("error", (error: Error & { code?: string }) => {
      this.fail(lane, this.spec.crashError(error, lane.pending?.task));
    });
    worker.on("exit", () => {
      if (lane.worker === worker) this.fail(lane, this.spec.exitError());
    });
    lane.worker = worker;
    return worker;
  }

  /**
   * Ends the lane's task with `error` (or, when its worker failed before it was ready, the first one
   * waiting) and drops the worker (it may be stuck); the next task starts another.
   */
  private fail(lane: Lane<Task, Result>, error: unknown): void {
    const worker = lane.worker;
    lane.worker = undefined;
    if (lane.pending === undefined && !lane.ready) lane.pending = this.queue.shift();
    if (worker) {
      worker.removeAllListeners();
      worker.on("error", () => {}); // an error raised while terminating has no one left to tell
      void worker.terminate();
    }
    this.settle(lane, (pending) => pending.reject(error));
  }

  private settle(lane: Lane<Task, Result>, finish: (pending: Pending<Task, Result>) => void): void {
    clearTimeout(lane.timer);
    const pending = lane.pending;
    lane.pending = undefined;
    lane.worker?.unref(); // an idle worker never keeps the process alive (pump refs it for a next task)
    if (pending) finish(pending);
    this.pump();
  }
}

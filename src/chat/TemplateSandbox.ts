/**
 * Renders Jinja chat templates in worker threads under hard limits, so that no template (a request's
 * own `chat_template` under `--trust-request-chat-template`, or a model's) can crash the process or
 * block the event loop: `range()` size, output length, heap size (`resourceLimits`) and wall-clock time,
 * a worker that overruns being terminated and replaced.
 */
import { Worker } from "node:worker_threads";

/** The limits of a {@link TemplateSandbox}. */
export type TemplateLimits = {
  /** Most items one `range()` may produce. Defaults to 100,000 (jinja2's sandbox `MAX_RANGE`, as vLLM). */
  maxRange: number;
  /** Most characters a rendered prompt may have. Defaults to 16 Mi (far beyond any context window). */
  maxOutputChars: number;
  /** Wall-clock milliseconds one render may take once a worker runs it. Defaults to 5,000. */
  timeoutMs: number;
  /** Old-generation heap of each worker, in MiB (`resourceLimits.maxOldGenerationSizeMb`). Defaults to 256. */
  heapMb: number;
  /** Worker threads rendering at once; further renders wait in FIFO order. Defaults to 2. */
  workers: number;
};

/** See {@link TemplateLimits} for each default and its source. */
export const DEFAULT_TEMPLATE_LIMITS: TemplateLimits = {
  maxRange: 100_000,
  maxOutputChars: 16 * 1024 * 1024,
  timeoutMs: 5_000,
  heapMb: 256,
  workers: 2,
};

/** Why a render failed: the template does not parse, it raised or failed, or it went past a limit. */
export type TemplateFailureStage = "parse" | "render" | "limit";

/** A render that failed; `message` is the template engine's (or the limit's) own words. */
export class TemplateRenderError extends Error {
  readonly stage: TemplateFailureStage;

  constructor(stage: TemplateFailureStage, message: string) {
    super(message);
    this.name = "TemplateRenderError";
    this.stage = stage;
  }
}

type Job = {
  id: number;
  template: string;
  variables: Record<string, unknown>;
  resolve(text: string): void;
  reject(error: TemplateRenderError): void;
};

type Reply =
  | { id: number; ok: true; text: string }
  | { id: number; ok: false; stage: TemplateFailureStage; message: string };

const WORKER_URL = new URL("./templateWorker.mjs", import.meta.url);

/** One worker thread and the job it runs, if any. */
class Lane {
  private worker: Worker | undefined;
  job: Job | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly limits: TemplateLimits,
    private readonly onIdle: () => void,
  ) {}

  run(job: Job): void {
    this.job = job;
    const worker = this.spawn();
    worker.ref();
    this.timer = setTimeout(
      () =>
        this.fail(
          new TemplateRenderError(
            "limit",
            `rendering took longer than ${this.limits.timeoutMs / 1000} s, the sandbox's limit.`,
          ),
        ),
      this.limits.timeoutMs,
    );
    worker.postMessage({ id: job.id, template: job.template, variables: job.variables });
  }

  /** Ends the current job with `error` and replaces the worker (it may be stuck in a loop). */
  private fail(error: TemplateRenderError): void {
    const worker = this.worker;
    this.worker = undefined;
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
    this.worker?.unref(); // an idle worker never keeps the process alive
    if (job) finish(job);
    this.onIdle();
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_URL, {
      workerData: { maxRange: this.limits.maxRange, maxOutputChars: this.limits.maxOutputChars },
      resourceLimits: { maxOldGenerationSizeMb: this.limits.heapMb, maxYoungGenerationSizeMb: 32 },
      // No TypeScript loader or test-runner flags in the worker: it is plain JavaScript.
      execArgv: [],
      env: {},
      stdout: false,
      stderr: false,
    });
    worker.on("message", (reply: Reply) => {
      if (reply.id !== this.job?.id) return;
      if (reply.ok) this.settle((job) => job.resolve(reply.text));
      else this.settle((job) => job.reject(new TemplateRenderError(reply.stage, reply.message)));
    });
    worker.on("error", (error: Error & { code?: string }) => {
      // ERR_WORKER_OUT_OF_MEMORY: the template built more than the heap limit.
      const message =
        error.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? `rendering used more than the sandbox's ${this.limits.heapMb} MiB of memory.`
          : `the template worker failed: ${error.message}`;
      this.fail(new TemplateRenderError("limit", message));
    });
    worker.on("exit", () => {
      if (this.worker === worker) this.fail(new TemplateRenderError("limit", "the template worker stopped."));
    });
    this.worker = worker;
    return worker;
  }

  /** Stops the worker; a job still running is rejected. */
  close(): Promise<unknown> {
    const worker = this.worker;
    this.worker = undefined;
    if (this.job) this.settle((job) => job.reject(new TemplateRenderError("limit", "the sandbox closed.")));
    return worker ? worker.terminate() : Promise.resolve();
  }
}

/**
 * A small pool of template workers. Each render is sent to an idle worker; one that overruns
 * `timeoutMs` or its heap is terminated (its render rejected with stage `"limit"`) and a fresh worker
 * takes its place on the next render. Idle workers do not keep the process alive.
 */
export class TemplateSandbox {
  private readonly lanes: Lane[];
  private readonly queue: Job[] = [];
  private nextId = 1;

  constructor(readonly limits: TemplateLimits = DEFAULT_TEMPLATE_LIMITS) {
    this.lanes = Array.from(
      { length: Math.max(1, limits.workers) },
      () => new Lane(limits, () => this.pump()),
    );
  }

  /**
   * Renders `template` with `variables` (structured-cloned into the worker: plain data only).
   * @returns The rendered text.
   * @throws TemplateRenderError with stage `"parse"` (syntax), `"render"` (the template raised, e.g.
   *   `raise_exception`) or `"limit"` (range, output, memory or time).
   */
  render(template: string, variables: Record<string, unknown>): Promise<string> {
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, template, variables, resolve, reject });
      this.pump();
    });
  }

  /** Terminates every worker; renders still queued or running are rejected. */
  async close(): Promise<void> {
    for (const job of this.queue.splice(0))
      job.reject(new TemplateRenderError("limit", "the sandbox closed."));
    await Promise.all(this.lanes.map((lane) => lane.close()));
  }

  private pump(): void {
    for (const lane of this.lanes) {
      if (this.queue.length === 0) return;
      if (lane.job) continue;
      lane.run(this.queue.shift() as Job);
    }
  }
}

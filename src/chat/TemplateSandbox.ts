/**
 * Renders Jinja chat templates in worker threads under hard limits, so that no template (a request's
 * own `chat_template` under `--trust-request-chat-template`, or a model's) can crash the process or
 * block the event loop: `range()` size, output length, heap size (`resourceLimits`) and wall-clock time,
 * a worker that overruns being terminated and replaced.
 */
import { WorkerSupervisor } from "../workers/WorkerSupervisor.ts";

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

type Render = { template: string; variables: Record<string, unknown> };

type Reply =
  | { id: number; ok: true; text: string }
  | { id: number; ok: false; stage: TemplateFailureStage; message: string };

const WORKER_URL = new URL("./templateWorker.mjs", import.meta.url);

/**
 * A small pool of template workers. Each render is sent to an idle worker; one that overruns
 * `timeoutMs` or its heap is terminated (its render rejected with stage `"limit"`) and a fresh worker
 * takes its place on the next render. Idle workers do not keep the process alive.
 */
export class TemplateSandbox {
  private readonly workers: WorkerSupervisor<Render, Reply, string>;

  constructor(readonly limits: TemplateLimits = DEFAULT_TEMPLATE_LIMITS) {
    this.workers = new WorkerSupervisor({
      url: WORKER_URL,
      options: {
        workerData: { maxRange: limits.maxRange, maxOutputChars: limits.maxOutputChars },
        resourceLimits: { maxOldGenerationSizeMb: limits.heapMb, maxYoungGenerationSizeMb: 32 },
        // No TypeScript loader or test-runner flags in the worker: it is plain JavaScript.
        execArgv: [],
        env: {},
        stdout: false,
        stderr: false,
      },
      workers: limits.workers,
      timeoutMs: limits.timeoutMs,
      message: ({ template, variables }, id) => ({ id, template, variables }),
      result: (reply) => {
        if (reply.ok) return reply.text;
        throw new TemplateRenderError(reply.stage, reply.message);
      },
      timeoutError: () =>
        new TemplateRenderError(
          "limit",
          `rendering took longer than ${limits.timeoutMs / 1000} s, the sandbox's limit.`,
        ),
      // ERR_WORKER_OUT_OF_MEMORY: the template built more than the heap limit.
      crashError: (error) =>
        new TemplateRenderError(
          "limit",
          error.code === "ERR_WORKER_OUT_OF_MEMORY"
            ? `rendering used more than the sandbox's ${limits.heapMb} MiB of memory.`
            : `the template worker failed: ${error.message}`,
        ),
      exitError: () => new TemplateRenderError("limit", "the template worker stopped."),
      closedError: () => new TemplateRenderError("limit", "the sandbox closed."),
      postError: (error) =>
        new TemplateRenderError(
          "limit",
          `the template's variables cannot be passed to the sandbox: ${error instanceof Error ? error.message : String(error)}.`,
        ),
    });
  }

  /**
   * Renders `template` with `variables` (structured-cloned into the worker: plain data only).
   * @returns The rendered text.
   * @throws TemplateRenderError with stage `"parse"` (syntax), `"render"` (the template raised, e.g.
   *   `raise_exception`) or `"limit"` (range, output, memory or time; variables that cannot be cloned).
   */
  render(template: string, variables: Record<string, unknown>): Promise<string> {
    return this.workers.run({ template, variables });
  }

  /** Terminates every worker; renders still queued or running are rejected. */
  close(): Promise<void> {
    return this.workers.close();
  }
}

/**
 * The dashboard's history on the server: every {@link POLL_MS} the sampler reads the registry's
 * exposition, exactly as the dashboard reads /metrics, into the shared {@link MetricsHistory} (the
 * last 10 minutes, at most 300 points per model), served at GET /metrics/history so that a dashboard
 * opened late draws them at once.
 */
import type { FastifyInstance } from "fastify";
import { MetricsHistory, POLL_MS } from "../shared/metricsHistory.ts";
import { parsePrometheus } from "../shared/prometheus.ts";
import type { ServerMetrics } from "./metrics.ts";

/** Samples a {@link ServerMetrics} registry into a {@link MetricsHistory} on a timer. */
export class MetricsSampler {
  readonly history = new MetricsHistory();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly metrics: ServerMetrics,
    private readonly intervalMs = POLL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes one sample now (the timer's tick; tests call it directly). */
  async sample(): Promise<void> {
    const text = await this.metrics.registry.metrics();
    this.history.add(this.now(), parsePrometheus(text));
  }

  /** Starts sampling every interval; the timer does not keep the process alive. Idempotent. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      // A failed read (a collect callback throwing) skips one point; the next tick tries again.
      this.sample().catch(() => {});
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops sampling (on shutdown: the app's `onClose`). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** True while the timer runs. */
  get running(): boolean {
    return this.timer !== undefined;
  }
}

/**
 * GET /metrics/history: the sampler's points as JSON (`HistorySnapshot`); same auth as /metrics
 * (`--protect-metrics`, `auth.ts` covers `/metrics/*`). The sampler starts when the app is ready and
 * stops on its `onClose`.
 */
export function registerMetricsHistoryRoute(app: FastifyInstance, sampler: MetricsSampler): void {
  app.addHook("onReady", async () => sampler.start());
  app.addHook("onClose", async () => sampler.stop());
  app.get("/metrics/history", async () => sampler.history.snapshot());
}

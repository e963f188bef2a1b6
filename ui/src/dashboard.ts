import {
  HISTORY_MS,
  type HistorySnapshot,
  MetricsHistory,
  type ModelPoint,
  type Percentiles,
  POLL_MS,
} from "../../src/shared/metricsHistory.ts";
import { parsePrometheus } from "../../src/shared/prometheus.ts";
import { ApiRequestError, apiFetch, listModels, type ModelInfo } from "./api.ts";
import { barList, lineChart } from "./chart.ts";
import { h, replaceChildren } from "./dom.ts";
import { residencyRows, residencyTable } from "./modelResidency.ts";

/** The live dashboard: polls /metrics while shown and draws per-model cards and charts. */
export type Dashboard = { element: HTMLElement; start(): void; stop(): void };

const COLOURS = ["#2563eb", "#d97706", "#db2777", "#059669"];

/** Builds the dashboard (not polling until {@link Dashboard.start}). */
export function createDashboard(): Dashboard {
  const history = new MetricsHistory();
  const status = h("p", { class: "hint" }, "Loading metrics…");
  const content = h("div", { class: "dashboard-models" });
  const element = h(
    "section",
    { class: "dashboard", "aria-labelledby": "dashboard-title" },
    h("h2", { id: "dashboard-title" }, "Dashboard"),
    status,
    content,
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  let active = false;
  let historyLoaded = false;

  /**
   * Once per page: the server's last 10 minutes (GET /metrics/history), so that a dashboard opened
   * late is not empty. A server without it (older lmserve, a proxy) is fine: the charts start empty.
   */
  async function loadHistory(): Promise<void> {
    if (historyLoaded) return;
    const response = await apiFetch("metrics/history");
    historyLoaded = true;
    if (!response.ok) return;
    try {
      history.load((await response.json()) as HistorySnapshot);
    } catch {
      // Not our JSON: no history.
    }
  }

  async function poll(): Promise<void> {
    try {
      if (!document.hidden) {
        await loadHistory();
        await scrape();
      }
    } catch (error) {
      status.textContent = `Could not read /metrics: ${error instanceof Error ? error.message : String(error)}`;
      if (error instanceof ApiRequestError && error.status === 401) {
        // The key prompt was cancelled: stop asking every 2 s until the user wants to try again.
        active = false;
        status.append(
          " ",
          h("button", { type: "button", onclick: () => dashboard.start() }, "Enter the API key"),
        );
      }
    }
    if (active) timer = setTimeout(() => void poll(), POLL_MS);
  }

  async function scrape(): Promise<void> {
    const response = await apiFetch("metrics");
    if (response.status === 404) {
      element.dataset.state = "unavailable";
      status.textContent = "";
      replaceChildren(
        content,
        h(
          "p",
          { class: "alert", role: "alert" },
          h("strong", {}, "Metrics unavailable. "),
          "This server has no /metrics endpoint.",
        ),
      );
      return;
    }
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    history.add(Date.now(), parsePrometheus(await response.text()));
    // The residency table is a convenience beside the metrics: a failed /v1/models leaves it out.
    const served: ModelInfo[] | undefined = await listModels().catch(() => undefined);
    element.dataset.state = "live";
    status.textContent = `Updated ${new Date().toLocaleTimeString()} · every ${POLL_MS / 1000} s`;
    const models = history.models();
    replaceChildren(
      content,
      ...(served && served.length > 0 ? [residencyTable(residencyRows(served, Date.now()))] : []),
      ...(models.length === 0
        ? [h("p", { class: "hint" }, "No per-model metrics yet: send a request from the playground.")]
        : models.map((model) => modelSection(model, history.series(model)))),
    );
  }

  const dashboard: Dashboard = {
    element,
    start() {
      if (active) return;
      active = true;
      void poll();
    },
    stop() {
      active = false;
      clearTimeout(timer);
    },
  };
  return dashboard;
}

function modelSection(model: string, points: ModelPoint[]): HTMLElement {
  const last = points.at(-1)!;
  const times = points.map((point) => point.time);
  // The time axis grows with the history: at least a minute, at most the 10 minutes kept.
  const spanMs = Math.min(HISTORY_MS, Math.max(60_000, last.time - (points[0]?.time ?? last.time)));
  const finished = Object.values(last.outcomes).reduce((sum, count) => sum + count, 0);
  const percentileSeries = (pick: (point: ModelPoint) => Percentiles) =>
    (["p50", "p90", "p99"] as const).map((key, index) => ({
      name: key,
      values: points.map((point) => pick(point)[key]),
      colour: COLOURS[index] ?? "#888",
    }));
  return h(
    "section",
    { class: "model-metrics", "data-model": model, "aria-label": `Metrics of ${model}` },
    h("h3", {}, model),
    h(
      "div",
      { class: "cards" },
      card("output-tps", "Output tok/s", fmtNumber(last.outputTps, 1)),
      card("running", "Running", fmtNumber(last.running)),
      card("waiting", "Waiting", fmtNumber(last.waiting)),
      card("kv-cache", "KV cache", fmtPercent(last.kvCache)),
      card("requests-finished", "Requests finished", fmtNumber(finished)),
      card("generation-tokens", "Generated tokens", fmtNumber(last.generationTokens)),
      card("prompt-tokens", "Prompt tokens", fmtNumber(last.promptTokens)),
      card("prefix-hit-rate", "Prefix cache hits", fmtPercent(last.prefixHitRate)),
      card("ttft-p50", "TTFT p50 (30 s)", fmtSeconds(last.ttft.p50)),
      card("itl-p50", "ITL p50 (30 s)", fmtSeconds(last.itl.p50)),
    ),
    h(
      "div",
      { class: "charts" },
      lineChart({
        title: "Throughput (tokens/s)",
        format: (v) => fmtNumber(v, v > 0 && v < 10 ? 1 : 0),
        times,
        spanMs,
        series: [
          { name: "output", values: points.map((p) => p.outputTps), colour: COLOURS[0]! },
          { name: "prompt", values: points.map((p) => p.promptTps), colour: COLOURS[1]! },
        ],
      }),
      lineChart({
        title: "Requests",
        format: (v) => fmtNumber(v, Number.isInteger(v) ? 0 : 1),
        times,
        spanMs,
        series: [
          { name: "running", values: points.map((p) => p.running), colour: COLOURS[0]! },
          { name: "waiting", values: points.map((p) => p.waiting), colour: COLOURS[1]! },
        ],
      }),
      lineChart({
        title: "KV cache usage",
        format: (v) => fmtPercent(v),
        times,
        spanMs,
        max: 1,
        series: [{ name: "used", values: points.map((p) => p.kvCache), colour: COLOURS[3]! }],
      }),
      lineChart({
        title: "Time to first token (last 30 s)",
        format: (v) => fmtSeconds(v),
        times,
        spanMs,
        series: percentileSeries((p) => p.ttft),
      }),
      lineChart({
        title: "Inter-token latency (last 30 s)",
        format: (v) => fmtSeconds(v),
        times,
        spanMs,
        series: percentileSeries((p) => p.itl),
      }),
      barList(
        "Request outcomes (finish reason)",
        Object.entries(last.outcomes).sort((a, b) => b[1] - a[1]),
      ),
    ),
  );
}

function card(key: string, label: string, value: string): HTMLElement {
  return h(
    "div",
    { class: "card", "data-metric": key },
    h("span", { class: "card-label" }, label),
    h("span", { class: "card-value" }, value),
  );
}

const integer = new Intl.NumberFormat("en");

function fmtNumber(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return "–";
  return digits === 0 ? integer.format(Math.round(value)) : value.toFixed(digits);
}

function fmtPercent(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value)
    ? "–"
    : `${(value * 100).toFixed(value < 0.1 ? 1 : 0)}%`;
}

function fmtSeconds(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return "–";
  if (value === 0) return "0";
  return value < 1 ? `${(value * 1000).toPrecision(value < 0.01 ? 2 : 3)} ms` : `${value.toFixed(2)} s`;
}

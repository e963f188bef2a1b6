import { h, svg } from "./dom.ts";

/** One line of a chart: values aligned with the chart's times (`undefined` leaves a gap). */
export type Series = { name: string; values: (number | undefined)[]; colour: string };

/** What {@link lineChart} draws. */
export type LineChartSpec = {
  title: string;
  /** Formats a value for the axis and the legend. */
  format: (value: number) => string;
  /** Sample times, ms since the epoch, oldest first. */
  times: number[];
  series: Series[];
  /** Width of the time axis in ms (the chart spans [now - span, now]). */
  spanMs: number;
  /** Fixed top of the value axis (e.g. 1 for a fraction); otherwise from the data. */
  max?: number;
};

const WIDTH = 480;
const HEIGHT = 150;
const PAD = { left: 52, right: 10, top: 10, bottom: 22 };

/**
 * A line chart as an SVG figure with a caption, value gridlines, a time axis and a legend holding
 * each series' latest value. Plain SVG: no library.
 */
export function lineChart(spec: LineChartSpec): HTMLElement {
  const now = spec.times.at(-1) ?? Date.now();
  const values = spec.series.flatMap((series) =>
    series.values.filter((v): v is number => v !== undefined && Number.isFinite(v)),
  );
  const top = spec.max ?? niceCeiling(Math.max(0, ...values));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (time: number) => PAD.left + plotW * (1 - (now - time) / spec.spanMs);
  const y = (value: number) => PAD.top + plotH * (1 - (top > 0 ? Math.min(value, top) / top : 0));

  const grid = [0, 0.5, 1].flatMap((fraction) => {
    const value = top * fraction;
    return [
      svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(value), y2: y(value), class: "grid" }),
      svg(
        "text",
        { x: PAD.left - 6, y: y(value) + 4, class: "axis", "text-anchor": "end" },
        spec.format(value),
      ),
    ];
  });
  const timeLabels = [1, 0.5, 0].map((fraction) =>
    svg(
      "text",
      {
        x: x(now - spec.spanMs * fraction),
        y: HEIGHT - 6,
        class: "axis",
        "text-anchor": fraction === 1 ? "start" : fraction === 0 ? "end" : "middle",
      },
      fraction === 0 ? "now" : `−${ago(spec.spanMs * fraction)}`,
    ),
  );
  const lines = spec.series.map((series) =>
    svg("path", { d: pathOf(series.values, spec.times, x, y), class: "line", stroke: series.colour }),
  );
  const latest = (series: Series) => {
    const value = series.values.at(-1);
    return value === undefined || !Number.isFinite(value) ? "–" : spec.format(value);
  };
  const summary = spec.series.map((series) => `${series.name} ${latest(series)}`).join(", ");
  return h(
    "figure",
    { class: "chart" },
    h("figcaption", {}, spec.title),
    svg(
      "svg",
      { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": `${spec.title}: ${summary}` },
      ...grid,
      ...timeLabels,
      ...lines,
    ),
    h(
      "ul",
      { class: "chart-legend" },
      ...spec.series.map((series) =>
        h("li", {}, swatch(series.colour), `${series.name} `, h("strong", {}, latest(series))),
      ),
    ),
  );
}

function swatch(colour: string): HTMLElement {
  const element = h("span", { class: "swatch", "aria-hidden": "true" });
  element.style.background = colour;
  return element;
}

/** An SVG path through the defined points; a missing value starts a new segment. */
function pathOf(
  values: (number | undefined)[],
  times: number[],
  x: (time: number) => number,
  y: (value: number) => number,
): string {
  let d = "";
  let pen = false;
  values.forEach((value, index) => {
    const time = times[index];
    if (value === undefined || !Number.isFinite(value) || time === undefined) {
      pen = false;
      return;
    }
    d += `${pen ? "L" : "M"}${x(time).toFixed(1)},${y(value).toFixed(1)}`;
    pen = true;
  });
  return d;
}

/** A duration for the time axis: seconds up to two minutes, then minutes. */
function ago(ms: number): string {
  const seconds = Math.round(ms / 1000);
  return seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 6) / 10} min`;
}

/** 1, 2 or 5 times a power of ten, at least `value` (1 for 0). */
function niceCeiling(value: number): number {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

/** Horizontal bars, one per entry, labelled with its count (request outcomes). */
export function barList(title: string, entries: [string, number][]): HTMLElement {
  const max = Math.max(1, ...entries.map(([, count]) => count));
  return h(
    "figure",
    { class: "chart bars" },
    h("figcaption", {}, title),
    entries.length === 0
      ? h("p", { class: "hint" }, "No finished requests yet.")
      : h(
          "ul",
          {},
          ...entries.map(([label, count]) => {
            const bar = h("span", { class: "bar", "data-reason": label });
            bar.style.width = `${(count / max) * 100}%`;
            return h(
              "li",
              {},
              h("span", { class: "bar-label" }, label),
              h("span", { class: "bar-track" }, bar),
              h("strong", {}, String(count)),
            );
          }),
        ),
  );
}

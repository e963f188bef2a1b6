/** One sample of the Prometheus text format: `name{label="value",...} value`. */
export type Sample = { name: string; labels: Record<string, string>; value: number };

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?/y;

/**
 * Parses the Prometheus text exposition format (version 0.0.4) into samples. `# HELP` / `# TYPE`
 * comments and lines that do not parse are skipped; `NaN`, `+Inf` and `-Inf` values are kept.
 */
export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const match = SAMPLE_LINE.exec(line);
    if (!match) continue;
    const [, name, labelText, valueText] = match;
    const labels = parseLabels(labelText ?? "");
    const value = parseValue(valueText ?? "");
    if (name !== undefined && labels !== null && value !== null) samples.push({ name, labels, value });
  }
  return samples;
}

function parseLabels(text: string): Record<string, string> | null {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const start = LABEL.lastIndex;
    const match = LABEL.exec(text);
    if (!match) return text.slice(start).trim() === "" ? labels : null;
    const [, key, value] = match;
    if (key !== undefined) labels[key] = unescapeLabel(value ?? "");
  }
  return labels;
}

function unescapeLabel(value: string): string {
  return value.replace(/\\(.)/g, (_match, c: string) => (c === "n" ? "\n" : c));
}

function parseValue(text: string): number | null {
  if (text === "+Inf" || text === "Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  if (text === "NaN") return Number.NaN;
  const value = Number(text);
  return Number.isNaN(value) ? null : value;
}

/** The sum of the samples named `name` whose labels include every entry of `match`. */
export function sumOf(
  samples: Sample[],
  name: string,
  match: Record<string, string> = {},
): number | undefined {
  let total: number | undefined;
  for (const sample of samples) {
    if (sample.name !== name) continue;
    if (Object.entries(match).some(([key, value]) => sample.labels[key] !== value)) continue;
    total = (total ?? 0) + sample.value;
  }
  return total;
}

/** Cumulative histogram buckets: upper bound (`le`) to count, sorted by bound, `+Inf` last. */
export type Buckets = { le: number; count: number }[];

/** The `_bucket` samples of histogram `name` for the labels in `match` (summed over other labels). */
export function bucketsOf(samples: Sample[], name: string, match: Record<string, string>): Buckets {
  const byBound = new Map<number, number>();
  for (const sample of samples) {
    if (sample.name !== `${name}_bucket`) continue;
    if (Object.entries(match).some(([key, value]) => sample.labels[key] !== value)) continue;
    const le = parseValue(sample.labels.le ?? "");
    if (le === null) continue;
    byBound.set(le, (byBound.get(le) ?? 0) + sample.value);
  }
  return [...byBound].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
}

/** `later - earlier` bucket by bucket: the observations made between two scrapes. */
export function bucketDelta(later: Buckets, earlier: Buckets): Buckets {
  const before = new Map(earlier.map((bucket) => [bucket.le, bucket.count]));
  return later.map((bucket) => ({
    le: bucket.le,
    count: Math.max(0, bucket.count - (before.get(bucket.le) ?? 0)),
  }));
}

/**
 * The q-quantile (0..1) of a cumulative histogram, interpolated linearly inside the bucket as
 * Prometheus' `histogram_quantile` does; `undefined` when it holds no observation. A quantile in the
 * `+Inf` bucket is reported as the largest finite bound.
 */
export function histogramQuantile(q: number, buckets: Buckets): number | undefined {
  const total = buckets.at(-1)?.count ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const bucket of buckets) {
    if (bucket.count >= rank) {
      if (!Number.isFinite(bucket.le)) return lowerBound;
      const inBucket = bucket.count - lowerCount;
      return inBucket <= 0
        ? bucket.le
        : lowerBound + (bucket.le - lowerBound) * ((rank - lowerCount) / inBucket);
    }
    lowerBound = bucket.le;
    lowerCount = bucket.count;
  }
  return lowerBound;
}

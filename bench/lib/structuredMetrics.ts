/**
 * The server-side figures of `bench/structured.ts`, read from `lmserve`'s Prometheus `/metrics`: the
 * token-mask cache's hits and misses, the jump-forward tokens, the engine step's decode and sample time
 * (`lmserve:step_seconds{phase}`), and the time-to-first-token histogram. Counters are summed over every
 * label set (one model per server here); a snapshot is taken around each batch of requests and the
 * differences are attributed to the batch's side.
 */

/** The counters and histogram sums this benchmark reads, at one moment. */
export type MetricsSnapshot = {
  maskHits: number;
  maskMisses: number;
  jumpForwardTokens: number;
  /** `lmserve:step_seconds{phase="decode"}` sum (s) and count. */
  decodeSeconds: number;
  decodeSteps: number;
  /** `lmserve:step_seconds{phase="sample"}` sum (s) and count. */
  sampleSeconds: number;
  sampleSteps: number;
  /** `vllm:time_to_first_token_seconds` sum (s) and count. */
  ttftSeconds: number;
  ttftCount: number;
};

/** A snapshot with every field 0 (the identity of {@link addMetrics}). */
export function zeroMetrics(): MetricsSnapshot {
  return {
    maskHits: 0,
    maskMisses: 0,
    jumpForwardTokens: 0,
    decodeSeconds: 0,
    decodeSteps: 0,
    sampleSeconds: 0,
    sampleSteps: 0,
    ttftSeconds: 0,
    ttftCount: 0,
  };
}

/** The sample lines `name{labels} value` of a Prometheus text exposition whose name is `name`, summed. */
function sum(text: string, name: string, label?: string): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name) || (line[name.length] !== "{" && line[name.length] !== " ")) continue;
    if (label && !line.includes(label)) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(value)) total += value;
  }
  return total;
}

/** Parses the fields of {@link MetricsSnapshot} from a `/metrics` body (absent series read 0). */
export function parseMetrics(text: string): MetricsSnapshot {
  return {
    maskHits: sum(text, "lmserve:grammar_mask_cache_hits_total"),
    maskMisses: sum(text, "lmserve:grammar_mask_cache_misses_total"),
    jumpForwardTokens: sum(text, "lmserve:jump_forward_tokens_total"),
    decodeSeconds: sum(text, "lmserve:step_seconds_sum", 'phase="decode"'),
    decodeSteps: sum(text, "lmserve:step_seconds_count", 'phase="decode"'),
    sampleSeconds: sum(text, "lmserve:step_seconds_sum", 'phase="sample"'),
    sampleSteps: sum(text, "lmserve:step_seconds_count", 'phase="sample"'),
    ttftSeconds: sum(text, "vllm:time_to_first_token_seconds_sum"),
    ttftCount: sum(text, "vllm:time_to_first_token_seconds_count"),
  };
}

/** `after - before`, field by field. */
export function diffMetrics(after: MetricsSnapshot, before: MetricsSnapshot): MetricsSnapshot {
  const out = zeroMetrics();
  for (const key of Object.keys(out) as (keyof MetricsSnapshot)[]) out[key] = after[key] - before[key];
  return out;
}

/** `a + b`, field by field. */
export function addMetrics(a: MetricsSnapshot, b: MetricsSnapshot): MetricsSnapshot {
  const out = zeroMetrics();
  for (const key of Object.keys(out) as (keyof MetricsSnapshot)[]) out[key] = a[key] + b[key];
  return out;
}

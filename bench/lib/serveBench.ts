/**
 * The `vllm bench serve`-style workload of `bench/peer.ts`: a fixed list of requests all queued at
 * once, at most `concurrency` in flight (vLLM's `--max-concurrency` with `--request-rate inf`), and the
 * metrics as vLLM's `benchmarks/serve.py` defines them:
 *
 * - TTFT: request sent to first token received.
 * - TPOT: per request, (E2EL − TTFT) / (output tokens − 1); requests of one token have none.
 * - ITL: every gap between successive token arrivals, pooled over requests (a chunk of k tokens counts
 *   as k equal gaps here, see `ArrivalRecorder`; vLLM counts one gap per chunk, which is the same
 *   when every chunk holds one token, as both servers stream).
 * - E2EL: request sent to its last token.
 * - Request throughput: completed requests / duration; output tok/s: output tokens / duration; total
 *   tok/s: (prompt + output tokens) / duration, duration from the first send to the last end.
 *
 * Each latency is given as mean, median and p99 (vLLM's default `--metric-percentiles 99` plus mean and
 * median), in milliseconds.
 */
import { quantile, type RequestTiming } from "./stats.ts";

/** One finished request: its timing and its prompt length. */
export type ServeRequestResult = RequestTiming & { promptTokens: number };

/** Mean, median and p99 of a latency, in milliseconds (NaN when there are no samples). */
export type LatencyStats = { mean: number; median: number; p99: number };

/** One `serve` level's metrics (see the file comment for the definitions). */
export type ServeSummary = {
  concurrency: number;
  requests: number;
  /** From the first request sent to the last one ended, in milliseconds. */
  durationMs: number;
  promptTokens: number;
  outputTokens: number;
  requestsPerS: number;
  outputTokPerS: number;
  totalTokPerS: number;
  ttft: LatencyStats;
  tpot: LatencyStats;
  itl: LatencyStats;
  e2el: LatencyStats;
};

/** Mean, median and p99 of `values`. */
export function latencyStats(values: readonly number[]): LatencyStats {
  const mean =
    values.length === 0 ? Number.NaN : values.reduce((sum, value) => sum + value, 0) / values.length;
  return { mean, median: quantile(values, 0.5), p99: quantile(values, 0.99) };
}

/** Summarises the requests of one level as vLLM's `bench serve` does (see the file comment). */
export function summariseServe(concurrency: number, requests: readonly ServeRequestResult[]): ServeSummary {
  const start = Math.min(...requests.map((request) => request.startMs));
  const end = Math.max(...requests.map((request) => request.endMs));
  const durationMs = requests.length > 0 ? end - start : 0;
  const promptTokens = requests.reduce((sum, request) => sum + request.promptTokens, 0);
  const outputTokens = requests.reduce((sum, request) => sum + request.tokens, 0);
  const perSecond = (count: number) => (durationMs > 0 ? (count * 1000) / durationMs : Number.NaN);
  const e2el = requests.map((request) => request.endMs - request.startMs);
  const tpot = requests
    .filter((request) => request.tokens > 1)
    .map((request) => (request.endMs - request.startMs - request.ttftMs) / (request.tokens - 1));
  return {
    concurrency,
    requests: requests.length,
    durationMs,
    promptTokens,
    outputTokens,
    requestsPerS: perSecond(requests.length),
    outputTokPerS: perSecond(outputTokens),
    totalTokPerS: perSecond(promptTokens + outputTokens),
    ttft: latencyStats(requests.map((request) => request.ttftMs)),
    tpot: latencyStats(tpot),
    itl: latencyStats(requests.flatMap((request) => request.itlMs)),
    e2el: latencyStats(e2el),
  };
}

/**
 * Sends every prompt at once with at most `concurrency` in flight (a shared queue: the next request
 * goes as soon as one ends, as vLLM's semaphore), and resolves with each request's result in send order.
 * @throws whatever `runOne` throws (requests already in flight are left to finish).
 */
export async function queuedAtOnce<Prompt>(
  prompts: readonly Prompt[],
  concurrency: number,
  runOne: (prompt: Prompt) => Promise<ServeRequestResult>,
): Promise<ServeRequestResult[]> {
  const results: ServeRequestResult[] = new Array(prompts.length);
  let next = 0;
  const worker = async () => {
    while (next < prompts.length) {
      const index = next++;
      results[index] = await runOne(prompts[index] as Prompt);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, prompts.length) }, worker));
  return results;
}

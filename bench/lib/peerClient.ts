/**
 * The HTTP driver of `bench/peer.ts`: streams one `/v1/completions` or `/v1/chat/completions` request
 * to either server and times every token's arrival. Tokens are counted from each server's own running
 * count: lmserve's vLLM `stream_options.continuous_usage_stats` (usage in every chunk), llama-server's
 * `timings_per_token` (`timings.predicted_n` in every chunk); a chunk without either counts one token
 * when it carries text or logprobs. The final usage chunk gives the prompt and cached token counts.
 */
import type { PeerServer } from "./peerServer.ts";
import { sseEvents } from "./sseEvents.ts";
import { ArrivalRecorder, type RequestTiming } from "./stats.ts";

/** The endpoint of a request. */
export type Endpoint = "completions" | "chat";

/** One streamed request's timings plus its usage. */
export type PeerTiming = RequestTiming & { promptTokens: number; cachedTokens: number };

type Usage = {
  completion_tokens?: number;
  prompt_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
};

type Chunk = {
  choices?: { text?: string | null; delta?: { content?: string | null }; logprobs?: unknown }[];
  usage?: Usage | null;
  timings?: { predicted_n?: number };
  error?: { message?: string };
};

/** The per-server streaming options that make every chunk carry the running completion token count. */
function countingFields(server: PeerServer): Record<string, unknown> {
  return server.name === "lmserve"
    ? { stream_options: { include_usage: true, continuous_usage_stats: true } }
    : { stream_options: { include_usage: true }, timings_per_token: true };
}

/** A non-streamed request's latency and usage. */
export type PeerCompletion = { latencyMs: number; promptTokens: number; cachedTokens: number };

/**
 * Sends `body` (the `model` field and `stream: false` are added) to `/v1/completions` and times the
 * whole response (for fields that cannot stream, such as `prompt_logprobs`).
 * @throws Error on an HTTP error status.
 */
export async function completeRequest(
  server: PeerServer,
  body: Record<string, unknown>,
): Promise<PeerCompletion> {
  const started = performance.now();
  const response = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: server.modelId, ...body, stream: false }),
  });
  const text = await response.text();
  const latencyMs = performance.now() - started;
  if (!response.ok) throw new Error(`${server.name} answered ${response.status}: ${text.slice(0, 500)}`);
  const usage = (JSON.parse(text) as { usage?: Usage }).usage ?? {};
  return {
    latencyMs,
    promptTokens: usage.prompt_tokens ?? 0,
    cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

/**
 * Streams `body` (the `model`, `stream` and counting fields are added) to the endpoint and times it.
 * @throws Error on an HTTP error status or an error event in the stream.
 */
export async function streamRequest(
  server: PeerServer,
  endpoint: Endpoint,
  body: Record<string, unknown>,
): Promise<PeerTiming> {
  const recorder = new ArrivalRecorder();
  const path = endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions";
  const response = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: server.modelId, ...body, stream: true, ...countingFields(server) }),
  });
  if (!response.ok || !response.body)
    throw new Error(`${server.name} answered ${response.status}: ${(await response.text()).slice(0, 500)}`);
  let usage: Usage = {};
  let seen = 0;
  for await (const { data, arrivedMs } of sseEvents(response.body)) {
    if (data === "[DONE]") continue;
    const chunk = JSON.parse(data) as Chunk;
    if (chunk.error) throw new Error(`${server.name} stream error: ${chunk.error.message ?? data}`);
    if (chunk.usage) usage = chunk.usage;
    const carries = (chunk.choices ?? []).some(
      (choice) => Boolean(choice.text) || Boolean(choice.delta?.content) || Boolean(choice.logprobs),
    );
    const count = chunk.usage?.completion_tokens ?? chunk.timings?.predicted_n ?? (carries ? seen + 1 : seen);
    if (count > seen) {
      recorder.arrive(count - seen, arrivedMs);
      seen = count;
    }
  }
  return {
    ...recorder.finish(performance.now()),
    promptTokens: usage.prompt_tokens ?? 0,
    cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

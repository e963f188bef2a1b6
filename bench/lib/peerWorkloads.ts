/**
 * The workloads of `bench/peer.ts`, identical on both servers: closed-loop throughput levels (plain,
 * chat, logprobs, seeded, guided JSON), each request streaming 64 tokens (`ignore_eos`, except guided
 * JSON) with the sampling and the one shared ban list as `logit_bias`; paired-TTFT scenarios
 * (prompt logprobs, non-streamed; prefix cache); and `vllm bench serve`-style levels (`serve`: random
 * 1,024-token prompts, `shared-prefix`: 768 shared + 256 own tokens, 128 tokens out, all queued at once,
 * see `serveBench.ts`).
 */
import type { Endpoint } from "./peerClient.ts";
import { corpusSchemas } from "./structuredCompile.ts";
import { SAMPLING } from "./workload.ts";

/** Workload groups, the names `--only` takes. */
export const GROUPS = [
  "plain",
  "chat",
  "logprobs",
  "seed",
  "guided",
  "prompt-logprobs",
  "prefix",
  "serve",
  "shared-prefix",
] as const;

/** One of {@link GROUPS}. */
export type Group = (typeof GROUPS)[number];

/** A closed-loop level: `concurrency` workers, each sending its prompts one after another. */
export type ThroughputWorkload = {
  kind: "throughput";
  /** e.g. `logprobs@4` */
  name: string;
  group: Group;
  endpoint: Endpoint;
  concurrency: number;
  /** Fields of the level's request number `index` besides prompt, sampling, bans and max_tokens. */
  fields: (index: number) => Record<string, unknown>;
  /** Guided JSON may end before 64 tokens: no `ignore_eos`. */
  ignoreEos: boolean;
};

/** A scenario of request pairs whose TTFTs are compared (see `peer.ts`). */
export type PairWorkload = { kind: "pair"; name: string; group: Group; lmserveOnly: boolean };

/**
 * A `vllm bench serve`-style level: a fixed list of requests queued at once, `concurrency` in flight;
 * `random` prompts are each their own text, `shared-prefix` ones share one of {@link SHARED_PREFIXES}
 * prefixes (vLLM's `prefix_repetition` dataset).
 */
export type ServeWorkload = {
  kind: "serve";
  /** e.g. `serve@4`, `shared-prefix@8` */
  name: string;
  group: Group;
  concurrency: number;
  prompts: "random" | "shared-prefix";
};

/** Any workload. */
export type PeerWorkload = ThroughputWorkload | PairWorkload | ServeWorkload;

/** Completion tokens of every throughput request. */
export const OUTPUT_TOKENS = 64;
/** Prompt length of the completions levels, in tokens. */
export const PROMPT_TOKENS = 32;
/** Prompt of the `prompt_logprobs` scenario, in tokens. */
export const PROMPT_LOGPROBS_TOKENS = 500;
/** Shared prefix and suffix of the prefix-cache scenario, in tokens. */
export const PREFIX_TOKENS = 1000;
export const SUFFIX_TOKENS = 16;
/** Prompt and output tokens of the `serve` levels (`vllm bench serve --random-input-len 1024 --random-output-len 128`). */
export const SERVE_INPUT_TOKENS = 1024;
export const SERVE_OUTPUT_TOKENS = 128;
/** The `shared-prefix` levels: a prefix of this many tokens shared by the requests of a group, then their own tokens. */
export const SHARED_PREFIX_TOKENS = 768;
/** How many different prefixes a `shared-prefix` level's requests share (vLLM's `--prefix-repetition-num-prefixes`). */
export const SHARED_PREFIXES = 2;
/** Concurrencies of the `serve` and `shared-prefix` levels. */
export const SERVE_CONCURRENCY: readonly number[] = [1, 4, 8];

/** Requests of a `serve` level: `max(8, 2 x concurrency)`, or `concurrency` with `--quick`. */
export function serveRequests(concurrency: number, quick: boolean): number {
  return quick ? concurrency : Math.max(8, 2 * concurrency);
}

/** The guided-JSON schema: the corpus's medium-sized `api-order` (nested objects, enum, formats, pattern). */
export function guidedSchema(): unknown {
  const schema = corpusSchemas().find((entry) => entry.name === "api-order")?.schema;
  if (!schema) throw new Error("test/fixtures/schemas/api-order.json is missing");
  return schema;
}

/** Every workload, in run order. */
export function allWorkloads(): PeerWorkload[] {
  const schema = guidedSchema();
  const level = (
    group: Group,
    endpoint: Endpoint,
    concurrency: number,
    fields: (index: number) => Record<string, unknown> = () => ({}),
  ): ThroughputWorkload => ({
    kind: "throughput",
    name: `${group}@${concurrency}`,
    group,
    endpoint,
    concurrency,
    fields,
    ignoreEos: group !== "guided",
  });
  const guided = {
    response_format: { type: "json_schema", json_schema: { name: "order", schema, strict: true } },
  };
  return [
    level("plain", "completions", 1),
    level("plain", "completions", 4),
    level("plain", "completions", 8),
    level("chat", "chat", 1),
    level("chat", "chat", 4),
    level("logprobs", "completions", 1, () => ({ logprobs: 5 })),
    level("logprobs", "completions", 4, () => ({ logprobs: 5 })),
    level("seed", "completions", 4, (index) => ({ seed: 1000 + index })),
    level("guided", "chat", 1, () => guided),
    level("guided", "chat", 4, () => guided),
    { kind: "pair", name: "prompt-logprobs", group: "prompt-logprobs", lmserveOnly: true },
    { kind: "pair", name: "prefix", group: "prefix", lmserveOnly: false },
    ...SERVE_CONCURRENCY.map(
      (concurrency): ServeWorkload => ({
        kind: "serve",
        name: `serve@${concurrency}`,
        group: "serve",
        concurrency,
        prompts: "random",
      }),
    ),
    ...SERVE_CONCURRENCY.map(
      (concurrency): ServeWorkload => ({
        kind: "serve",
        name: `shared-prefix@${concurrency}`,
        group: "shared-prefix",
        concurrency,
        prompts: "shared-prefix",
      }),
    ),
  ];
}

/** The request fields every request shares: sampling and the ban list (one object, shared). */
export function baseFields(bias: Record<string, number>): Record<string, unknown> {
  return {
    temperature: SAMPLING.temperature,
    top_k: SAMPLING.topK,
    top_p: SAMPLING.topP,
    min_p: SAMPLING.minP,
    logit_bias: bias,
  };
}

/** Requests per worker of a level: `max(2, ceil(8 / concurrency))`, or 1 with `--quick`. */
export function requestsPerWorker(concurrency: number, quick: boolean): number {
  return quick ? 1 : Math.max(2, Math.ceil(8 / concurrency));
}

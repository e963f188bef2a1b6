/**
 * The workloads of `bench/peer.ts`, identical on both servers: closed-loop throughput levels (plain,
 * chat, logprobs, seeded, guided JSON) and paired-TTFT scenarios (prompt logprobs, prefix cache).
 * Every request streams 64 tokens (`ignore_eos`, except guided JSON) with the sampling and the
 * one shared ban list as `logit_bias`.
 */
import type { Endpoint } from "./peerClient.ts";
import { corpusSchemas } from "./structuredCompile.ts";
import { SAMPLING } from "./workload.ts";

/** Workload groups, the names `--only` takes. */
export const GROUPS = ["plain", "chat", "logprobs", "seed", "guided", "prompt-logprobs", "prefix"] as const;

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

/** Any workload. */
export type PeerWorkload = ThroughputWorkload | PairWorkload;

/** Completion tokens of every throughput request. */
export const OUTPUT_TOKENS = 64;
/** Prompt length of the completions levels, in tokens. */
export const PROMPT_TOKENS = 32;
/** Prompt of the `prompt_logprobs` scenario, in tokens. */
export const PROMPT_LOGPROBS_TOKENS = 500;
/** Shared prefix and suffix of the prefix-cache scenario, in tokens. */
export const PREFIX_TOKENS = 1000;
export const SUFFIX_TOKENS = 16;

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

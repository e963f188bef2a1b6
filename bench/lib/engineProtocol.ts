/**
 * The line protocol between `bench/serve.ts` and its bare-engine child (`bareEngine.ts`): one JSON
 * object per line on the child's stdin (commands) and stdout (replies, prefixed with
 * {@link ENGINE_LINE_PREFIX} so that stray library output is never mistaken for one).
 */
import type { BatchStats, LevelRaw } from "./stats.ts";
import type { Sampling } from "./workload.ts";

/** Prefix of every protocol line the child prints. */
export const ENGINE_LINE_PREFIX = "@@bench ";

/** Prefix of the server probe's stderr lines (`serverProbe.ts`), each a JSON `BatchStats`. */
export const PROBE_LINE_PREFIX = "@@probe ";

/** What the child reports once its model and context are ready. */
export type EngineInfo = {
  vocabSize: number;
  trainContextSize: number;
  /** Tokens of context per sequence. */
  contextSize: number;
  sequences: number;
  threads: number;
  batchSize: number;
  /** Whether decode batches are counted and timed (see `batchProbe.ts`). */
  probe: boolean;
  /** Whether the `--defer-reloop` experiment is active (see `deferReloop.ts`). */
  deferReloop: boolean;
  /** Whether the `--yield-per-token` experiment is active (see `bareEngine.ts`). */
  yieldPerToken: boolean;
};

/** Result of the prefix-cache scenario, times in milliseconds. */
export type PrefixRaw = {
  /** TTFT of prefix + first suffix on a cleared sequence. */
  uncachedTtftMs: number;
  /** TTFT of prefix + second suffix, reusing the prefix's KV state. */
  cachedTtftMs: number;
  /** Prompt tokens reused by the second request. */
  cachedTokens: number;
};

/** A command to the child. */
export type EngineCommand =
  | { id: number; cmd: "tokenize"; text: string }
  | {
      id: number;
      cmd: "run";
      /** prompts[w] = the prompts worker w runs one after the other (closed loop). */
      prompts: number[][][];
      outputTokens: number;
      sampling: Sampling;
    }
  | { id: number; cmd: "prefix"; prefix: number[]; suffixes: [number[], number[]]; sampling: Sampling };

/** A reply of the child; `result` depends on the command. */
export type EngineReply =
  | { ready: true; info: EngineInfo }
  | { id: number; ok: true; tokens: number[] }
  | { id: number; ok: true; level: LevelRaw; batch: BatchStats | null }
  | { id: number; ok: true; prefix: PrefixRaw }
  | { id: number; ok: false; error: string };

/**
 * Measures one concurrency level on the server and the bare engine, interleaved so that both see the
 * same machine load: with two or more requests per worker the level runs as two closed-loop blocks
 * in ABBA order (first half of every worker's prompts on A then B, second half on B then A), which
 * cancels a load that drifts linearly during the level; with one request per worker, A then B.
 */
import type { LevelPair } from "./report.ts";
import {
  type BatchStats,
  type LevelRaw,
  type LevelSummary,
  mergeBatchStats,
  mergeLevels,
  summarise,
} from "./stats.ts";

/** Something that runs a closed-loop level: `prompts[w]` are worker w's prompts, in order. */
export type LevelRunner = (prompts: number[][][]) => Promise<{ level: LevelRaw; batch: BatchStats | null }>;

/** The targets of {@link measureLevel}; `deferred` (an experiment) runs after both blocks, in one go. */
export type LevelTargets = { server: LevelRunner; engine: LevelRunner; deferred?: LevelRunner };

/** Splits every worker's queue in two halves (the first half gets the odd one). */
function halves(prompts: number[][][]): number[][][][] {
  const perWorker = Math.min(...prompts.map((queue) => queue.length));
  if (perWorker < 2) return [prompts];
  const cut = Math.ceil(perWorker / 2);
  return [prompts.map((queue) => queue.slice(0, cut)), prompts.map((queue) => queue.slice(cut))];
}

/**
 * Runs `prompts` on both targets (ABBA blocks, A = the server when `serverFirst`) and summarises them.
 * @param load the 1-minute load average before the level, recorded in the result.
 * @throws whatever a target throws.
 */
export async function measureLevel(
  targets: LevelTargets,
  prompts: number[][][],
  serverFirst: boolean,
  load: number,
): Promise<LevelPair> {
  const collected = { server: [] as LevelRaw[], engine: [] as LevelRaw[] };
  const batches = { server: [] as (BatchStats | null)[], engine: [] as (BatchStats | null)[] };
  const order: ("server" | "engine")[] = serverFirst ? ["server", "engine"] : ["engine", "server"];
  const blocks = halves(prompts);
  for (const [index, block] of blocks.entries()) {
    for (const name of index % 2 === 0 ? order : [...order].reverse()) {
      const { level, batch } = await targets[name](block);
      collected[name].push(level);
      batches[name].push(batch);
    }
  }
  const summary = (name: "server" | "engine"): LevelSummary =>
    summarise(mergeLevels(collected[name]), mergeBatchStats(batches[name]));
  let deferred: LevelSummary | undefined;
  if (targets.deferred) {
    const { level, batch } = await targets.deferred(prompts);
    deferred = summarise(level, batch ?? undefined);
  }
  return {
    server: summary("server"),
    engine: summary("engine"),
    order:
      blocks.length > 1
        ? serverFirst
          ? "server, engine, engine, server"
          : "engine, server, server, engine"
        : serverFirst
          ? "server, engine"
          : "engine, server",
    load,
    othersCpu: null,
    ...(deferred ? { deferred } : {}),
  };
}

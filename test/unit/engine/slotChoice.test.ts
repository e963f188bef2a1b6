/**
 * The scheduler's choice of an idle slot on stories260K: with one KV buffer per sequence (the default,
 * not `kv_unified`) a new request fills the gap a finished one left among the busy slots, so the running
 * sequence ids stay one run (llama.cpp evaluates a step in one physical batch per run of consecutive
 * ids); with a shared buffer it takes the least recently used idle slot, as llama-server.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, test } from "node:test";
import { commonPrefixLength } from "../../../src/engine/commonPrefixLength.ts";
import { ModelHost } from "../../../src/engine/ModelHost.ts";
import { plainRequest } from "../../../src/engine/plainRequest.ts";
import { runsOf, Scheduler, SlotState } from "../../../src/engine/Scheduler.ts";
import { sharedModelsDir } from "../../../src/paths.ts";

const schedulers: Scheduler[] = [];
const ignore = { onDelta: () => {} };

after(async () => {
  for (const each of schedulers) await each.close();
});

test("runsOf counts the runs of consecutive busy ids", () => {
  assert.equal(runsOf([]), 0);
  assert.equal(runsOf([false, false]), 0);
  assert.equal(runsOf([true, true, true, false]), 1);
  assert.equal(runsOf([true, false, true, false]), 2);
  assert.equal(runsOf([false, true, true, false, true]), 2);
  assert.equal(runsOf([true, false, true, false, true]), 3);
});

/**
 * Runs A, B, C on a fresh 4-slot scheduler (slots 0, 1, 2), lets B (3 tokens) finish, then starts D and
 * returns which slots are busy while A, C and D run.
 */
async function busyAfterGap(kvUnified: boolean): Promise<boolean[]> {
  const host = await ModelHost.load({
    modelPath: join(sharedModelsDir, "stories260K.gguf"),
    sequences: 4,
    maxModelLen: 2048,
    threads: 1,
    device: "cpu",
    kvUnified,
  });
  assert.equal(host.kvUnified, kvUnified);
  const scheduler = new Scheduler(host, { prefixCaching: false });
  schedulers.push(scheduler);
  const prompt = host.tokenize("Once upon a time", true);
  const stop = new AbortController();
  const long = () => scheduler.submit(plainRequest(prompt, 2000, { ignoreEos: true }), ignore, stop.signal);
  const a = long();
  const b = scheduler.submit(plainRequest(prompt, 3, { ignoreEos: true }), ignore);
  const c = long();
  assert.equal((await b).finishReason, "length");
  let started: () => void = () => {};
  const dStarted = new Promise<void>((resolve) => {
    started = resolve;
  });
  const d = scheduler.submit(
    plainRequest(prompt, 2000, { ignoreEos: true }),
    { ...ignore, onStart: () => started() },
    stop.signal,
  );
  await dStarted;
  const busy = scheduler.slotStates().map((state) => state !== SlotState.Idle);
  stop.abort();
  for (const result of await Promise.all([a, c, d])) assert.equal(result.finishReason, "abort");
  return busy;
}

test("one KV buffer per sequence: a new request fills the gap among the busy slots", async () => {
  assert.deepEqual(await busyAfterGap(false), [true, true, true, false]);
});

test("a shared KV buffer: a new request takes the least recently used idle slot", async () => {
  assert.deepEqual(await busyAfterGap(true), [true, false, true, true]);
});

test("a short prompt that shares only the first token with a cached one leaves that cache alone", async () => {
  const host = await ModelHost.load({
    modelPath: join(sharedModelsDir, "stories260K.gguf"),
    sequences: 4,
    maxModelLen: 1024,
    threads: 1,
    device: "cpu",
  });
  const scheduler = new Scheduler(host, { prefixCaching: true });
  schedulers.push(scheduler);
  const long = host.tokenize(
    "Once upon a time there was a little girl named Lily. She loved to play in the park with her dog. ".repeat(
      6,
    ),
    true,
  );
  const short = host.tokenize("Hi there", true);
  assert.equal(commonPrefixLength(long, short), 1, "the two prompts share only the first token");
  const run = (prompt: readonly number[]) => scheduler.submit(plainRequest(prompt, 1), ignore);
  await run(long);
  await run(short);
  const again = await run(long);
  assert.equal(again.cachedTokens, long.length - 1);
});

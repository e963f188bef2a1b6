import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { BatchItem, LlamaContext } from "node-llama-cpp";
import { BatchGate, type GateMember, sequenceOrderedStrategy } from "../../../src/engine/BatchGate.ts";

/** Resolves after the pending timers and immediates of this turn have run. */
const settle = (ms = 0) => new Promise((resolve) => setTimeout(resolve, ms));

/** Calls `step()` and records when its promise resolves. */
function stepTracked(member: GateMember): { released: () => boolean; done: Promise<void> } {
  let released = false;
  const done = member.step().then(() => {
    released = true;
  });
  return { released: () => released, done };
}

/** `count` members that have evaluated their prompts and are now released into a decode step together. */
async function decoding(gate: BatchGate, count: number): Promise<GateMember[]> {
  const members = Array.from({ length: count }, () => gate.join());
  for (const member of members) member.arrived();
  await Promise.all(members.map((member) => member.step()));
  return members;
}

describe("BatchGate", () => {
  it("releases a lone sequence at once", async () => {
    const gate = new BatchGate(40);
    const member = gate.join();
    member.arrived();
    const step = stepTracked(member);
    await settle();
    assert.equal(step.released(), true);
    member.leave();
    assert.equal(gate.memberCount, 0);
  });

  it("holds a sequence until every sequence still in the engine is back, then releases them together", async () => {
    const gate = new BatchGate(5);
    const a = gate.join();
    const b = gate.join();
    a.arrived();
    b.arrived();
    const first = [stepTracked(a), stepTracked(b)];
    await Promise.all(first.map((step) => step.done));
    // Both are in the engine now. A comes back first; B's step is still being decoded.
    a.arrived();
    const aStep = stepTracked(a);
    await settle(20); // longer than the straggler limit: a sequence in the engine is always waited for
    assert.equal(aStep.released(), false);
    b.arrived();
    const bStep = stepTracked(b);
    await settle();
    assert.equal(aStep.released(), true);
    assert.equal(bStep.released(), true);
    assert.equal(gate.stats.timedOut, 0);
  });

  it("waits for a sequence handling its token at most the straggler limit", async () => {
    // A fixed limit of 200 ms (a quarter of the last round, clamped to [min, max]), far from both checks.
    const gate = new BatchGate(200, 200);
    const [a, b] = (await decoding(gate, 2)) as [GateMember, GateMember];
    a.arrived();
    b.arrived(); // B has its token but never comes to the gate (a slow client stream, say)
    const aStep = stepTracked(a);
    await settle(20);
    assert.equal(aStep.released(), false);
    await settle(600);
    assert.equal(aStep.released(), true);
    assert.equal(gate.stats.timedOut, 1);
  });

  it("does not wait for a sequence that is still evaluating its prompt", async () => {
    const gate = new BatchGate(40);
    const [a] = (await decoding(gate, 1)) as [GateMember];
    gate.join(); // a new request, its prompt in the engine
    a.arrived();
    const aStep = stepTracked(a);
    await settle();
    assert.equal(aStep.released(), true);
  });

  it("releases nobody while a new request's KV-cache erasure waits, then everybody", async () => {
    const gate = new BatchGate(40);
    const [a] = (await decoding(gate, 1)) as [GateMember];
    let finishErasure = () => {};
    const erasure = gate.erase(
      () =>
        new Promise<string>((resolve) => {
          finishErasure = () => resolve("erased");
        }),
    );
    a.arrived();
    const aStep = stepTracked(a);
    await settle(60);
    assert.equal(aStep.released(), false);
    finishErasure();
    assert.equal(await erasure, "erased");
    await settle();
    assert.equal(aStep.released(), true);
  });

  it("releases the waiting sequences when the one they wait for leaves", async () => {
    const gate = new BatchGate(40);
    const [a, b] = (await decoding(gate, 2)) as [GateMember, GateMember];
    a.arrived();
    const aStep = stepTracked(a);
    await settle(5);
    assert.equal(aStep.released(), false);
    b.leave(); // B's evaluation failed or its request ended
    await settle();
    assert.equal(aStep.released(), true);
    b.leave(); // idempotent
    assert.equal(gate.memberCount, 1);
  });

  it("lets an erasure's error through and still releases afterwards", async () => {
    const gate = new BatchGate(40);
    const [a] = (await decoding(gate, 1)) as [GateMember];
    await assert.rejects(
      gate.erase(async () => {
        throw new Error("disposed");
      }),
      /disposed/,
    );
    a.arrived();
    await a.step();
  });
});

describe("sequenceOrderedStrategy", () => {
  const item = (tokens: number, evaluationPriority = 5): BatchItem =>
    ({
      tokens: Array.from({ length: tokens }, (_, index) => index),
      logits: Array.from({ length: tokens }, () => undefined),
      evaluationPriority,
    }) as unknown as BatchItem;
  /** A stand-in for node-llama-cpp's context: only the internal queue the strategy reads. */
  const contextWith = (items: BatchItem[], sequenceIds: number[]) =>
    ({
      _queuedDecodes: items.map((entry, index) => ({ sequenceId: sequenceIds[index], tokens: entry.tokens })),
    }) as unknown as LlamaContext;

  it("orders the batch by ascending sequence id, one token per decoding sequence", () => {
    const items = [item(1), item(1), item(1), item(1)];
    const strategy = sequenceOrderedStrategy(() => contextWith(items, [3, 1, 0, 2]));
    const batch = strategy({ items, size: 512 });
    assert.deepEqual(
      batch.map((entry) => items.indexOf(entry.item)),
      [2, 1, 3, 0],
    );
    assert.deepEqual(
      batch.map((entry) => entry.processAmount),
      [1, 1, 1, 1],
    );
  });

  it("gives decoding sequences their token first and prompts the rest of the batch, higher priority first", () => {
    const items = [item(600, 1), item(1), item(300, 9), item(1)];
    const strategy = sequenceOrderedStrategy(() => contextWith(items, [0, 1, 2, 3]));
    const batch = strategy({ items, size: 512 });
    const amounts = new Map(batch.map((entry) => [items.indexOf(entry.item), entry.processAmount]));
    assert.equal(amounts.get(1), 1);
    assert.equal(amounts.get(3), 1);
    assert.equal(amounts.get(2), 300);
    assert.equal(amounts.get(0), 512 - 2 - 300);
    assert.equal(
      batch.reduce((sum, entry) => sum + entry.processAmount, 0),
      512,
    );
  });

  it("keeps the queue's order when the internal queue does not line up with the items", () => {
    const items = [item(1), item(1)];
    const strategy = sequenceOrderedStrategy(() => contextWith([item(1)], [1]));
    const batch = strategy({ items, size: 8 });
    assert.deepEqual(
      batch.map((entry) => items.indexOf(entry.item)),
      [0, 1],
    );
  });

  it("never puts more tokens in the batch than its size", () => {
    const items = [item(1), item(1), item(1)];
    const strategy = sequenceOrderedStrategy(() => contextWith(items, [2, 0, 1]));
    const batch = strategy({ items, size: 2 });
    assert.deepEqual(
      batch.map((entry) => items.indexOf(entry.item)),
      [1, 2],
    );
  });
});

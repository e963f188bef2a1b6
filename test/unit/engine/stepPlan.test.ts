import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { OutputKind } from "../../../src/engine/native.ts";
import {
  type PrefillCandidate,
  planStep,
  SCORED_CHUNK_TOKENS,
  type StepCandidate,
} from "../../../src/engine/stepPlan.ts";

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => from + index);

function decode(key: string, seq: number, pending: number[] = [7], position = 10): StepCandidate<string> {
  return { kind: "decode", key, seq, position, pending, topN: -1 };
}

function prefill(
  key: string,
  seq: number,
  length: number,
  extra: Partial<PrefillCandidate<string>> = {},
): StepCandidate<string> {
  return {
    kind: "prefill",
    key,
    seq,
    position: extra.from ?? 0,
    prompt: range(100, 100 + length),
    from: 0,
    promptTopN: null,
    topN: -1,
    ...extra,
  };
}

/**
 * Runs the planner step after step over a simulated running set (decodes keep one pending token;
 * prompts advance by what they took) until every prompt is in; returns each step's takes.
 */
function simulate(candidates: StepCandidate<string>[], budget: number, maxSteps = 1000) {
  const state = candidates.map((candidate) => ({ ...candidate }));
  const steps: { key: string; kind: string; tokens: number }[][] = [];
  for (let step = 0; step < maxSteps; step++) {
    if (!state.some((candidate) => candidate.kind === "prefill")) break;
    const plan = planStep(state, budget);
    assert.ok(
      plan.input.tokens.length <= budget,
      `step ${step} holds ${plan.input.tokens.length} > ${budget}`,
    );
    steps.push(plan.takes);
    for (const take of plan.takes) {
      const index = state.findIndex((candidate) => candidate.key === take.key);
      const candidate = state[index] as StepCandidate<string>;
      if (candidate.kind !== "prefill") continue;
      const from = candidate.from + take.tokens;
      state[index] =
        from === candidate.prompt.length
          ? decode(candidate.key, candidate.seq)
          : { ...candidate, from, position: candidate.position + take.tokens };
    }
  }
  return steps;
}

describe("planStep", () => {
  it("puts decode rows first, by sequence id, then prompt chunks", () => {
    const plan = planStep([prefill("p", 0, 5), decode("b", 3, [41]), decode("a", 1, [40])], 64);
    assert.deepEqual(Array.from(plan.input.seqs), [1, 3, 0, 0, 0, 0, 0]);
    assert.deepEqual(Array.from(plan.input.tokens), [40, 41, 100, 101, 102, 103, 104]);
    assert.deepEqual(Array.from(plan.input.positions), [10, 10, 0, 1, 2, 3, 4]);
    // Each decode's row and the prompt's last row are sampled.
    assert.deepEqual(Array.from(plan.input.outputRows), [0, 1, 6]);
    assert.deepEqual(
      plan.outputs.map((output) => output.key),
      ["a", "b", "p"],
    );
  });

  it("fills the budget with prompt chunks and no more", () => {
    const plan = planStep([decode("a", 0), prefill("p", 1, 1000), prefill("q", 2, 1000)], 256);
    assert.equal(plan.input.tokens.length, 256);
    assert.deepEqual(plan.takes, [
      { key: "a", kind: "decode", tokens: 1 },
      { key: "p", kind: "prefill", tokens: 255 },
    ]);
    // A chunk that does not end the prompt samples nothing.
    assert.deepEqual(plan.outputs, [{ kind: "sample", key: "a" }]);
  });

  it("gives what the oldest prompt leaves to the next one in the same step", () => {
    const plan = planStep([prefill("p", 0, 10), prefill("q", 1, 100)], 64);
    assert.deepEqual(plan.takes, [
      { key: "p", kind: "prefill", tokens: 10 },
      { key: "q", kind: "prefill", tokens: 54 },
    ]);
    assert.deepEqual(plan.outputs, [{ kind: "sample", key: "p" }]);
  });

  it("serves prompts in arrival order and every one finishes (no prompt starves)", () => {
    const steps = simulate([prefill("p", 0, 300), prefill("q", 1, 50), prefill("r", 2, 120)], 64);
    const finished: string[] = [];
    const done = new Map<string, number>();
    for (const takes of steps) {
      for (const take of takes.filter((entry) => entry.kind === "prefill")) {
        done.set(take.key, (done.get(take.key) ?? 0) + take.tokens);
        const length = { p: 300, q: 50, r: 120 }[take.key] as number;
        if (done.get(take.key) === length) finished.push(take.key);
      }
    }
    assert.deepEqual(finished, ["p", "q", "r"]);
    // 470 prompt tokens plus the decodes of the finished prompts at 64 tokens a step: no step is wasted.
    assert.ok(steps.length <= Math.ceil((470 + 2 + 1) / 63) + 1, `${steps.length} steps`);
  });

  it("runs every decode in every step while a long prompt prefills (no decode starves)", () => {
    const candidates = [decode("a", 0), decode("b", 1), decode("c", 2), prefill("p", 3, 2000)];
    const steps = simulate(candidates, 128);
    assert.equal(steps.length, Math.ceil(2000 / 125));
    for (const takes of steps) {
      assert.deepEqual(
        takes.slice(0, 3).map((take) => [take.key, take.tokens]),
        [
          ["a", 1],
          ["b", 1],
          ["c", 1],
        ],
      );
    }
  });

  it("keeps one token for the prompts when a jump-forward run could take the whole budget", () => {
    const plan = planStep([decode("a", 0, range(0, 500)), prefill("p", 1, 100)], 64);
    assert.deepEqual(plan.takes, [
      { key: "a", kind: "decode", tokens: 63 },
      { key: "p", kind: "prefill", tokens: 1 },
    ]);
    // The run is not all in: its sequence is not sampled yet.
    assert.deepEqual(plan.outputs, []);
  });

  it("takes a whole jump-forward run when nothing else waits, and samples after it", () => {
    const plan = planStep([decode("a", 0, range(0, 40))], 64);
    assert.deepEqual(plan.takes, [{ key: "a", kind: "decode", tokens: 40 }]);
    assert.deepEqual(Array.from(plan.input.outputRows), [39]);
  });

  it("still moves the oldest prompt when the decodes alone fill a budget smaller than the slots", () => {
    const plan = planStep([decode("a", 0), decode("b", 1), prefill("p", 2, 10), prefill("q", 3, 10)], 2);
    assert.deepEqual(plan.takes, [
      { key: "a", kind: "decode", tokens: 1 },
      { key: "b", kind: "decode", tokens: 1 },
      { key: "p", kind: "prefill", tokens: 1 },
    ]);
  });

  it("ends a chunk before the next image and skips a prompt whose next token is an image", () => {
    const plan = planStep(
      [prefill("p", 0, 50, { imageStart: 20 }), prefill("q", 1, 50, { imageStart: 0 })],
      64,
    );
    assert.deepEqual(plan.takes, [{ key: "p", kind: "prefill", tokens: 20 }]);
  });

  it("scores every prompt row against the next prompt token, in chunks of SCORED_CHUNK_TOKENS", () => {
    const plan = planStep([prefill("p", 0, 100, { promptTopN: 2 })], 512);
    assert.equal(plan.input.tokens.length, SCORED_CHUNK_TOKENS);
    assert.equal(plan.outputs.length, SCORED_CHUNK_TOKENS);
    assert.ok(plan.outputs.every((output) => output.kind === "prompt" && output.topN === 2));
    assert.deepEqual(Array.from(plan.input.targets.subarray(0, 3)), [101, 102, 103]);
    // The last chunk scores all but the prompt's last row, then samples it.
    const last = planStep([prefill("p", 0, 100, { promptTopN: 0, from: 64 })], 512);
    assert.equal(last.input.tokens.length, 36);
    assert.deepEqual(
      last.outputs.map((output) => output.kind),
      [...Array(35).fill("prompt"), "sample"],
    );
  });

  it("outputs the pooled rows of an embedding and samples nothing", () => {
    const mean = planStep([prefill("m", 0, 100, { embed: "mean" })], 512);
    assert.equal(mean.outputs.length, SCORED_CHUNK_TOKENS);
    assert.ok(mean.outputs.every((output) => output.kind === "embed"));
    const cls = planStep([prefill("c", 0, 100, { embed: "cls" })], 512);
    assert.deepEqual(cls.outputs, [{ kind: "embed", key: "c", position: 0 }]);
    assert.deepEqual(Array.from(cls.input.kinds), [OutputKind.Embedding]);
    const last = planStep([prefill("l", 0, 100, { embed: "last" })], 512);
    assert.deepEqual(last.outputs, [{ kind: "embed", key: "l", position: 99 }]);
    assert.deepEqual(Array.from(last.input.outputRows), [99]);
  });

  it("continues a prompt from its cached prefix at its next position", () => {
    const plan = planStep([prefill("p", 0, 10, { from: 6, position: 6 })], 64);
    assert.deepEqual(Array.from(plan.input.tokens), [106, 107, 108, 109]);
    assert.deepEqual(Array.from(plan.input.positions), [6, 7, 8, 9]);
  });
});

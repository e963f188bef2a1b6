/**
 * Jump-forward (`--jump-forward`) against token-by-token guided decoding on stories260K: at temperature 0
 * the output (text and token ids) is the same whether the forced text of a schema with long fixed keys is
 * sampled token by token or appended and evaluated as one chunk, while jump-forward takes fewer steps.
 * The schema's keys use letters stories260K's 512-token vocabulary has no multi-letter tokens for, so the
 * greedy token-by-token run picks the same tokens jump-forward appends (any other tokenization would make
 * the model see different tokens; see docs/structured-output.md).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ModelHost } from "../../../src/engine/ModelHost.ts";
import { plainRequest } from "../../../src/engine/plainRequest.ts";
import { Scheduler } from "../../../src/engine/Scheduler.ts";
import { sharedModelsDir } from "../../../src/paths.ts";
import { compileConstraint } from "../../../src/structured/index.ts";

const SCHEMA = {
  type: "object",
  properties: {
    qzxqjvkq_wxyz: { type: "integer", minimum: 0, maximum: 999 },
    vkxjqz_pqzwvx: { enum: ["yes", "no"] },
    xqzv_jkqw: { type: "string", maxLength: 40 },
  },
  required: ["qzxqjvkq_wxyz", "vkxjqz_pqzwvx", "xqzv_jkqw"],
  additionalProperties: false,
};

type Run = { text: string; tokens: number[]; steps: number; jumped: number; finish: string };

const hosts: ModelHost[] = [];
const schedulers: Scheduler[] = [];

async function scheduler(jumpForward: boolean, counters: { steps: number; jumped: number }) {
  const host = await ModelHost.load({
    modelPath: join(sharedModelsDir, "stories260K.gguf"),
    sequences: 1,
    maxModelLen: 512,
    threads: 1,
    device: "cpu",
  });
  hosts.push(host);
  const events = {
    onIteration: () => {
      counters.steps++;
    },
    onJumpForward: (tokens: number) => {
      counters.jumped += tokens;
    },
  };
  const created = new Scheduler(host, { prefixCaching: false, jumpForward, events });
  schedulers.push(created);
  return { host, scheduler: created };
}

let plain: { host: ModelHost; scheduler: Scheduler };
let jumping: { host: ModelHost; scheduler: Scheduler };
const plainCounters = { steps: 0, jumped: 0 };
const jumpCounters = { steps: 0, jumped: 0 };

before(async () => {
  plain = await scheduler(false, plainCounters);
  jumping = await scheduler(true, jumpCounters);
});

after(async () => {
  for (const each of schedulers) await each.close();
});

async function run(
  target: { host: ModelHost; scheduler: Scheduler },
  counters: { steps: number; jumped: number },
  temperature: number,
  seed: number,
): Promise<Run> {
  const { gbnf } = compileConstraint("json_schema", SCHEMA);
  counters.steps = 0;
  counters.jumped = 0;
  let text = "";
  const tokens: number[] = [];
  const result = await target.scheduler.submit(
    plainRequest(target.host.tokenize("Once upon a time", true), 200, {
      sampling: { temperature, seed },
      grammar: { gbnf },
    }),
    {
      onDelta: (delta) => {
        text += delta.text;
        tokens.push(...delta.tokenIds);
      },
    },
  );
  return { text, tokens, steps: counters.steps, jumped: counters.jumped, finish: result.finishReason };
}

test("temperature 0: jump-forward gives the token-by-token output in fewer steps", async () => {
  const stepwise = await run(plain, plainCounters, 0, 0);
  const jumped = await run(jumping, jumpCounters, 0, 0);
  assert.equal(stepwise.finish, "stop", stepwise.text);
  assert.ok(stepwise.text.includes('"qzxqjvkq_wxyz"'), stepwise.text);
  assert.equal(jumped.text, stepwise.text);
  assert.deepEqual(jumped.tokens, stepwise.tokens);
  assert.equal(stepwise.jumped, 0);
  assert.ok(jumped.jumped >= 20, `forced tokens appended: ${jumped.jumped}`);
  assert.ok(
    jumped.steps < stepwise.steps,
    `steps: ${jumped.steps} with jump-forward, ${stepwise.steps} without`,
  );
});

test("temperature 1: jump-forward output stays valid and keeps its forced keys", async () => {
  for (const seed of [1, 2, 3]) {
    const jumped = await run(jumping, jumpCounters, 1, seed);
    if (jumped.finish !== "stop") continue;
    const value = JSON.parse(jumped.text) as Record<string, unknown>;
    assert.deepEqual(Object.keys(value), ["qzxqjvkq_wxyz", "vkxjqz_pqzwvx", "xqzv_jkqw"]);
    assert.ok(jumped.jumped > 0);
  }
});

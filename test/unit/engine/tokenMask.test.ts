/**
 * The guided-decoding token mask (native/src/constraint.cpp) against a brute-force reference: at random
 * grammar states of every constraint kind we compile (JSON Schema, json_object, regex, choice, GBNF, a
 * forced tool call), the set of tokens the mask engine allows must be exactly the set llama.cpp's grammar
 * check allows when every token of the vocabulary is checked on its own. States are reached by random
 * walks over allowed tokens (seeded), on stories260K's vocabulary (512 tokens, byte-fallback tokens
 * included, so partial UTF-8 states are visited too).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { toolChoiceToJsonSchema } from "../../../src/chat/toolSchema.ts";
import { ModelHost } from "../../../src/engine/ModelHost.ts";
import { plainRequest } from "../../../src/engine/plainRequest.ts";
import { Scheduler } from "../../../src/engine/Scheduler.ts";
import { projectRoot, sharedModelsDir } from "../../../src/paths.ts";
import { type ConstraintKind, compileConstraint } from "../../../src/structured/index.ts";
import { Mulberry32 } from "./Mulberry32.ts";

/** Random walks per constraint and the most steps each takes. */
const WALKS = 3;
const STEPS = 40;

let host: ModelHost;
let scheduler: Scheduler;

before(async () => {
  host = await ModelHost.load({
    modelPath: join(sharedModelsDir, "stories260K.gguf"),
    sequences: 1,
    maxModelLen: 256,
    threads: 1,
    device: "cpu",
  });
  scheduler = new Scheduler(host, { prefixCaching: false });
});

after(async () => {
  await scheduler?.close();
});

/** The tokens of one generation of `gbnf` (top-k 0: greedy). */
async function generate(
  gbnf: string,
  seed: number,
  topK: number,
  logprobs: number | null,
): Promise<number[]> {
  const tokens: number[] = [];
  await scheduler.submit(
    plainRequest(host.tokenize("Once upon a time", true), 96, {
      sampling: { seed, topK, temperature: topK === 0 ? 0 : 1 },
      grammar: { gbnf },
      logprobs,
    }),
    { onDelta: (delta) => tokens.push(...delta.tokenIds) },
  );
  return tokens;
}

const fixture = (path: string) => readFileSync(join(projectRoot, "test/fixtures", path), "utf8");

function constraints(): { label: string; kind: ConstraintKind; spec: unknown }[] {
  const schema = (name: string) =>
    (JSON.parse(fixture(`schemas/${name}.json`)) as { schema: unknown }).schema;
  const tools = [
    {
      type: "function" as const,
      function: {
        name: "get_weather",
        parameters: {
          type: "object",
          properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } },
          required: ["city"],
        },
      },
    },
  ];
  return [
    { label: "json_schema api-order", kind: "json_schema", spec: schema("api-order") },
    { label: "json_schema api-person-deep", kind: "json_schema", spec: schema("api-person-deep") },
    { label: "json_object", kind: "json_object", spec: null },
    { label: "regex", kind: "regex", spec: "[A-Z][a-z]{2,8} (is|was) [0-9]{1,3}(\\.[0-9]+)? (km|mi)" },
    { label: "choice", kind: "choice", spec: ["Once upon a time", "The end.", "café", "日本"] },
    { label: "gbnf json", kind: "grammar", spec: fixture("grammars/json.gbnf") },
    { label: "gbnf arithmetic", kind: "grammar", spec: fixture("grammars/arithmetic.gbnf") },
    // Ambiguous: several stacks at once (the pass that goes shortest tokens first, acceptance checks).
    { label: "gbnf ambiguous", kind: "grammar", spec: 'root ::= a a a a "."\na ::= [a-z ]*' },
    // Ambiguous, matched with merged stacks (native/src/grammarWalk.cpp): optional items in a row (issue 31),
    // a negated class with multi-byte characters, and alternatives that share prefixes of a token.
    {
      label: "gbnf ambiguous optional run",
      kind: "grammar",
      spec: `root ::= ${Array(40).fill('("a"|"b"|"")').join(" ")} "c"`,
    },
    {
      label: "gbnf ambiguous multi-byte",
      kind: "grammar",
      spec: 'root ::= b b b b b b b b "."\nb ::= [^.\n]* | "é"+ | "日本" b',
    },
    {
      label: "gbnf ambiguous shared prefixes",
      kind: "grammar",
      spec: 'root ::= (w | w " " w)+ (w | w " " w)+ (w | w " " w)+ "!"\nw ::= "Once" | "On" | "upon" | "up" | "a" | "a time" | [a-z]',
    },
    {
      label: "forced tool call",
      kind: "json_schema",
      spec: toolChoiceToJsonSchema(tools, "required", false),
    },
  ];
}

function allowedIds(mask: Uint8Array): number[] {
  const ids: number[] = [];
  mask.forEach((bit, id) => {
    if (bit) ids.push(id);
  });
  return ids;
}

for (const { label, kind, spec } of constraints()) {
  test(`token mask = brute force at random states: ${label}`, () => {
    const { gbnf } = compileConstraint(kind, spec);
    const { context } = host;
    let states = 0;
    for (let walk = 0; walk < WALKS; walk++) {
      const random = new Mulberry32(1000 * walk + label.length);
      const tokens: number[] = [];
      for (let step = 0; step < STEPS; step++) {
        const prefix = Int32Array.from(tokens);
        const mask = context.grammarMask(gbnf, "root", prefix, false);
        const reference = context.grammarMask(gbnf, "root", prefix, true);
        assert.ok(mask && reference, `${label}: the walk's own tokens are accepted`);
        assert.deepEqual(allowedIds(mask), allowedIds(reference), `${label}: walk ${walk}, step ${step}`);
        states++;
        const allowed = allowedIds(mask).filter((id) => !host.isEndOfGeneration(id));
        if (allowed.length === 0) break;
        tokens.push(allowed[Math.floor(random.next() * allowed.length)] as number);
      }
    }
    assert.ok(states >= WALKS, `${label}: ${states} states compared`);
  });
}

test("checking the best tokens one by one draws exactly what the full mask draws (top-k and greedy)", async () => {
  // With logprobs the sampler always applies the full mask; without, a state whose mask is not cached
  // and a top-k (or greedy) draw check single tokens instead. Same seed, same tokens.
  for (const { label, kind, spec } of constraints().slice(0, 5)) {
    const { gbnf } = compileConstraint(kind, spec);
    for (const [seed, topK] of [
      [1, 5],
      [2, 40],
      [3, 0],
    ] as const) {
      const lazy = await generate(gbnf, seed, topK, null);
      const full = await generate(gbnf, seed, topK, 0);
      assert.deepEqual(lazy, full, `${label}, seed ${seed}, top_k ${topK}`);
    }
  }
});

test("a state seen before is answered from the mask cache", () => {
  const { gbnf } = compileConstraint("choice", ["yes", "no"]);
  const { context } = host;
  context.grammarMask(gbnf, "root", new Int32Array(), false);
  const before = context.maskStats();
  context.grammarMask(gbnf, "root", new Int32Array(), false);
  const afterwards = context.maskStats();
  assert.equal(afterwards.misses, before.misses, "no new pass over the vocabulary");
  assert.ok(afterwards.hits > before.hits);
  assert.ok(afterwards.bytes >= 512 / 8);
});

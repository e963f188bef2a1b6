/**
 * Object dependencies compiled as presence constraints (`src/structured/jsonSchema/presence.ts`): random
 * dependency schemas over a few members, every member set checked against ajv, and the size of a
 * filespec-like schema whose dependencies used to expand into hundreds of objects.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ConstraintError } from "../../../src/structured/errors.ts";
import { jsonSchemaToGbnf } from "../../../src/structured/jsonSchema/compiler.ts";
import {
  dependencyPresence,
  PresenceDiagram,
  PresenceTooLarge,
} from "../../../src/structured/jsonSchema/presence.ts";
import { ajvValidator } from "../../helpers/structuredAjv.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

const NAMES = ["a", "b", "c", "d", "e"];

/** A deterministic pseudo-random generator (so a failure reproduces). */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

/** A random dependency of one of the forms the presence compiler reads. */
function randomDependency(rnd: () => number, depth = 0): unknown {
  const pick = <T>(items: T[]): T => items[Math.floor(rnd() * items.length)]!;
  const some = (): string[] => NAMES.filter(() => rnd() < 0.35).slice(0, 3);
  const required = (): unknown => ({ required: some().length > 0 ? some() : [pick(NAMES)] });
  switch (depth > 1 ? 0 : Math.floor(rnd() * 6)) {
    case 0:
      return required();
    case 1:
      return { not: required() };
    case 2:
      return { anyOf: [randomDependency(rnd, depth + 1), randomDependency(rnd, depth + 1)] };
    case 3:
      return { oneOf: [required(), required()] };
    case 4:
      return { properties: { [pick(NAMES)]: false } };
    default:
      return { allOf: [randomDependency(rnd, depth + 1), { not: { anyOf: [required(), required()] } }] };
  }
}

test("random presence dependencies agree with ajv on every member set", async () => {
  const rnd = random(19);
  for (let round = 0; round < 30; round++) {
    const dependencies: Record<string, unknown> = {};
    for (const name of NAMES) {
      if (rnd() < 0.5) continue;
      dependencies[name] = rnd() < 0.3 ? NAMES.filter(() => rnd() < 0.3) : randomDependency(rnd);
    }
    const extras = rnd() < 0.3;
    const schema = {
      type: "object",
      properties: Object.fromEntries(NAMES.map((name) => [name, { type: "integer" }])),
      required: rnd() < 0.3 ? [NAMES[Math.floor(rnd() * NAMES.length)]] : [],
      additionalProperties: extras,
      dependencies,
    };
    assert.notEqual(dependencyPresence(schema), null, JSON.stringify(schema));
    const validate = ajvValidator(schema);
    let gbnf: string | null = null;
    try {
      gbnf = jsonSchemaToGbnf(schema);
    } catch (error) {
      if (!(error instanceof ConstraintError && error.message.includes("no satisfiable instance")))
        throw error;
    }
    const matches = gbnf === null ? () => false : await nativeMatcher(gbnf);
    for (let set = 0; set < 1 << NAMES.length; set++) {
      const value: Record<string, number> = {};
      for (const [i, name] of NAMES.entries()) if (set & (1 << i)) value[name] = 1;
      if (extras && set % 3 === 0) value.z = 2;
      const text = JSON.stringify(value);
      assert.equal(matches(text), validate(value), `${text} under ${JSON.stringify(schema)}\n${gbnf}`);
    }
  }
});

test("dependencies that say more than which members are present are left to the split", () => {
  const base = { type: "object", properties: { a: {}, b: {} } };
  assert.equal(
    dependencyPresence({ ...base, dependencies: { a: { properties: { b: { type: "string" } } } } }),
    null,
  );
  assert.equal(dependencyPresence({ ...base, dependencies: { a: ["c"] } }), null); // undeclared name
  // An undeclared member named with any schema: merging would declare it (our strict default allows it then).
  assert.equal(dependencyPresence({ ...base, dependencies: { a: { properties: { c: {} } } } }), null);
  assert.notEqual(dependencyPresence({ ...base, dependencies: { a: { properties: { b: true } } } }), null);
  assert.equal(
    dependencyPresence({ ...base, dependencies: { a: { not: { not: { required: ["b"] } } } } }),
    null,
  );
  assert.notEqual(
    dependencyPresence({ ...base, dependencies: { a: { type: "object", required: ["b"] } } }),
    null,
  );
});

test("the presence diagram shares states", () => {
  const d = new PresenceDiagram(3);
  const ab = d.and(d.variable(0), d.variable(1));
  assert.equal(d.and(d.variable(1), d.variable(0)), ab);
  assert.equal(d.or(ab, d.not(ab)), PresenceDiagram.TRUE);
  assert.equal(d.and(ab, d.not(d.variable(0))), PresenceDiagram.FALSE);
  assert.equal(d.level(ab), 0);
});

test("a filespec-like object: six triggers and a not-required list stay one small object", () => {
  const names = Array.from({ length: 29 }, (_, i) => `p${i}`);
  const schema = {
    type: "object",
    additionalProperties: false,
    properties: Object.fromEntries(names.map((name) => [name, { type: "string" }])),
    anyOf: [{ required: ["p16"] }, { required: ["p1"] }, { required: ["p4"] }, { required: ["p5"] }],
    dependencies: {
      p16: { not: { required: ["p1"] } },
      p1: { not: { required: ["p16", "p8", "p17", "p24", "p7", "p18", "p19", "p3"] } },
      p4: { not: { required: ["p5", "p14", "p15"] } },
      p5: { not: { required: ["p4", "p14", "p15"] } },
      p6: { required: ["p4"] },
      p12: { required: ["p4"] },
    },
  };
  const gbnf = jsonSchemaToGbnf(schema);
  // The split into "trigger absent" / "trigger present" objects wrote about 350 KB here.
  assert.ok(gbnf.length < 40_000, `${gbnf.length} characters`);
});

test("a presence formula whose diagram is too large is a 400 naming the keyword", () => {
  // x_i present exactly when y_i is, with every x before every y: the diagram needs 2^14 states midway.
  const xs = Array.from({ length: 14 }, (_, i) => `x${i}`);
  const ys = Array.from({ length: 14 }, (_, i) => `y${i}`);
  const schema = {
    type: "object",
    properties: Object.fromEntries([...xs, ...ys].map((name) => [name, { type: "integer" }])),
    dependencies: Object.fromEntries([...xs.map((x, i) => [x, [ys[i]]]), ...ys.map((y, i) => [y, [xs[i]]])]),
  };
  assert.notEqual(dependencyPresence(schema), null);
  const d = new PresenceDiagram(28);
  assert.throws(
    () => d.of(dependencyPresence(schema)!, (name) => [...xs, ...ys].indexOf(name)),
    PresenceTooLarge,
  );
  assert.throws(
    () => jsonSchemaToGbnf(schema),
    (error) => error instanceof ConstraintError,
  );
});

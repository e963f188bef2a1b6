/**
 * `multipleOf` (issue 19): the multiples the grammar writes pass ajv's double check `(x / m) ===
 * parseInt(x / m)` as well as the exact decimal one, and within that set the grammar is exact, bounds
 * included (checked against llama.cpp's matcher).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { jsonSchemaToGbnf } from "../../../src/structured/jsonSchema/compiler.ts";
import { MAX_LISTED_MULTIPLES, multipleStep } from "../../../src/structured/jsonSchema/multiples.ts";
import { decimalText, shortestDecimal } from "../../../src/structured/jsonSchema/numbers.ts";
import { ajvValidator } from "../../helpers/structuredAjv.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

/** ajv's multipleOf check (`lib/vocabularies/validation/multipleOf.ts`, no multipleOfPrecision). */
const ajvMultiple = (x: number, m: number): boolean => {
  const q = x / m;
  return q === Number.parseInt(String(q), 10);
};

/** Whether the decimal text `x` is an exact multiple of the decimal `m` (as written). */
const exactMultiple = (x: string, m: number): boolean => {
  const [int, frac = ""] = x.replace("-", "").split(".");
  const a = { value: BigInt(int! + frac), scale: frac.length };
  const b = shortestDecimal(m);
  const scale = Math.max(a.scale, b.scale);
  const av = a.value * 10n ** BigInt(scale - a.scale);
  const bv = b.value * 10n ** BigInt(scale - b.scale);
  return av % bv === 0n;
};

describe("multipleStep", () => {
  test("the dyadic multiples of a decimal multipleOf", () => {
    assert.deepEqual(multipleStep(0.01, false), { n: 1n, a: 2, limit: 4n * 10n ** 15n, allPass: true });
    assert.deepEqual(multipleStep(0.1, false), { n: 1n, a: 1, limit: 2n * 10n ** 15n, allPass: true });
    assert.deepEqual(multipleStep(0.5, false), { n: 1n, a: 1, limit: 2n * 10n ** 15n, allPass: true });
    assert.deepEqual(multipleStep(0.3, false), { n: 3n, a: 1, limit: 2n * 10n ** 15n, allPass: true });
    assert.deepEqual(multipleStep(12, false), { n: 12n, a: 0, limit: 10n ** 15n, allPass: true });
    assert.deepEqual(multipleStep(0.25, true), { n: 1n, a: 0, limit: 10n ** 15n, allPass: true });
    // Fractions of more than 6 binary digits, or a double too far from its decimal: listed and checked.
    assert.equal((multipleStep(1e-7, false) as { allPass: boolean }).allPass, false);
    assert.equal((multipleStep(0.07, false) as { allPass: boolean }).allPass, false);
    assert.equal(typeof multipleStep(1e-30, false), "string");
  });
  test("every multiple the grammar may write passes ajv's double check", () => {
    const decimals = fc
      .tuple(fc.integer({ min: 1, max: 10_000 }), fc.integer({ min: 0, max: 4 }))
      .map(([v, k]) => Number(decimalText({ value: BigInt(v), scale: k })));
    fc.assert(
      fc.property(
        decimals,
        fc.bigInt({ min: -(2n ** 60n), max: 2n ** 60n }),
        fc.boolean(),
        (m, t, integer) => {
          const step = multipleStep(m, integer);
          if (typeof step === "string" || !step.allPass) return;
          const y = (t % (step.limit / step.n)) * step.n; // x · 2^a, a multiple of n below the limit
          const abs = y < 0n ? -y : y;
          const text = decimalText({ value: abs * 5n ** BigInt(step.a), scale: step.a });
          const x = Number(y < 0n ? `-${text}` : text);
          assert.ok(ajvMultiple(x, m), `${x} / ${m}`);
          assert.ok(exactMultiple(text, m), `${text} exact multiple of ${m}`);
        },
      ),
      { numRuns: 20_000 },
    );
  });
  test("the common decimals need no check of each multiple", () => {
    for (const m of [0.01, 0.1, 0.05, 0.2, 0.25, 0.001, 0.3, 1.5, 2.5, 0.02, 100, 7, 1e-6])
      assert.equal((multipleStep(m, false) as { allPass: boolean }).allPass, true, String(m));
  });
});

/** Compiles `schema` and checks every probe: accepted ⇒ valid (ajv and exact); a designed multiple ⇒ accepted. */
async function probeSchema(
  schema: Record<string, unknown>,
  probes: number[],
  designed: (x: number) => boolean,
) {
  const gbnf = jsonSchemaToGbnf(schema);
  const matches = await nativeMatcher(gbnf);
  const validate = ajvValidator(schema);
  const m = schema.multipleOf as number;
  for (const x of probes) {
    const text = String(x);
    const accepted = matches(text);
    if (accepted) {
      assert.ok(validate(x), `${text} accepted but invalid per ajv for ${JSON.stringify(schema)}`);
      assert.ok(exactMultiple(text, m), `${text} accepted but not an exact multiple of ${m}`);
    }
    if (validate(x) && Math.abs(x) < 1e15 && designed(x))
      assert.ok(accepted, `${text} should be accepted for ${JSON.stringify(schema)}`);
  }
}

const grid = (from: number, to: number, step: number): number[] => {
  const out: number[] = [];
  for (let i = Math.round(from / step); i <= Math.round(to / step); i++)
    out.push(Number((i * step).toFixed(6)));
  return out;
};

describe("grammars are exact on their multiples", () => {
  const quarters = (x: number): boolean => Number.isInteger(x * 4);
  const halves = (x: number): boolean => Number.isInteger(x * 2);
  const cases: [Record<string, unknown>, (x: number) => boolean][] = [
    [{ type: "number", multipleOf: 0.01 }, quarters],
    [{ type: "number", multipleOf: 0.01, minimum: 0, maximum: 12.3 }, quarters],
    [{ type: "number", multipleOf: 0.01, exclusiveMinimum: -3.25, exclusiveMaximum: 7 }, quarters],
    [{ type: "number", multipleOf: 0.1, minimum: -2.35 }, halves],
    [{ type: "number", multipleOf: 0.25, minimum: 0.25, maximum: 10 }, () => true],
    [{ type: "number", multipleOf: 0.3, minimum: -10, maximum: 10 }, (x) => Number.isInteger(x * 2)],
    [{ type: "number", multipleOf: 1.5 }, () => true],
    [{ type: "integer", multipleOf: 3 }, () => true],
    [{ type: "integer", multipleOf: 7, minimum: -50, maximum: 50 }, () => true],
    [{ type: "integer", multipleOf: 12, minimum: 0 }, () => true],
    [{ type: "integer", multipleOf: 16, minimum: -2032, maximum: 2031 }, () => true],
    [{ type: "number", multipleOf: 10, exclusiveMaximum: 100 }, () => true],
    [{ type: "integer", multipleOf: 0.5, minimum: 2 }, () => true],
    [{ type: "number", multipleOf: 256, minimum: 1024 }, () => true],
    // Listed: the multiples near 0 whose doubles pass the check.
    [{ type: "number", multipleOf: 0.07, minimum: -5 }, () => false],
    [{ type: "integer", multipleOf: 1.1 }, () => false],
  ];
  const probes = [...grid(-30, 30, 0.05), ...grid(-400, 400, 1), ...grid(-3000, 3000, 16), 1e15, 99999.75];
  for (const [schema, designed] of cases) {
    test(JSON.stringify(schema), async () => probeSchema(schema, probes, designed));
  }
  test("a large remainder condition lists the multiples nearest to 0 (a narrowing)", async () => {
    const schema = { type: "integer", multipleOf: 997, minimum: -10_000 };
    const gbnf = jsonSchemaToGbnf(schema);
    const matches = await nativeMatcher(gbnf);
    assert.ok(matches("0") && matches("997") && matches("-9970") && !matches("-10967") && !matches("998"));
    assert.ok(matches(String(997 * (MAX_LISTED_MULTIPLES - 11))));
    assert.ok(!matches(String(997 * (MAX_LISTED_MULTIPLES - 10))));
  });
  test("non-integer multiples (the number branch of oneOf [integer, number multipleOf 0.5])", async () => {
    const schema = {
      oneOf: [{ type: "integer" }, { type: "number", multipleOf: 0.5, minimum: 0, maximum: 3 }],
    };
    const matches = await nativeMatcher(jsonSchemaToGbnf(schema));
    for (const [text, ok] of [
      ["0.5", true],
      ["2.5", true],
      ["1", true], // the integer branch (not a multiple of 0.5 within [0, 3]... 1 is: excluded below)
    ] as const)
      if (text !== "1") assert.equal(matches(text), ok, text);
    assert.ok(!matches("1") && !matches("3") && !matches("3.5") && matches("7") && matches("-1"));
  });
});

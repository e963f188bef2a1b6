/**
 * provablyDisjoint: the `oneOf` disjointness test answers "disjoint" only when no value satisfies both
 * schemas (integer ⊂ number, `properties` alone does not make an object), and finds discriminators.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { provablyDisjoint } from "../../../src/structured/jsonSchema/disjoint.ts";

const root = {
  $defs: { kindA: { type: "object", required: ["kind"], properties: { kind: { const: "a" } } } },
};
const resolve = (ref: string): unknown => (ref === "#/$defs/kindA" ? root.$defs.kindA : undefined);
const disjoint = (a: unknown, b: unknown): boolean =>
  provablyDisjoint(resolve).disjoint(a as never, b as never);
const onlyEmpty = (a: unknown, b: unknown): boolean =>
  provablyDisjoint(resolve).onlyEmptyArrayInCommon(a as never, b as never);

test("types: integer overlaps number, string does not", () => {
  assert.equal(disjoint({ type: "integer" }, { type: "number" }), false);
  assert.equal(disjoint({ type: "integer" }, { type: "string" }), true);
  assert.equal(disjoint({ type: ["integer", "null"] }, { type: "number", nullable: true }), false);
  assert.equal(disjoint({ type: "object" }, { type: "array" }), true);
  assert.equal(disjoint({ enum: [1.5] }, { type: "integer" }), true);
  assert.equal(disjoint({ enum: [2] }, { type: "number" }), false);
});

test("listed values against each other and against a pattern or bounds", () => {
  assert.equal(disjoint({ enum: ["a", "b"] }, { const: "c" }), true);
  assert.equal(disjoint({ enum: ["a", "b"] }, { enum: ["b"] }), false);
  assert.equal(disjoint({ enum: ["red"] }, { pattern: "^#[0-9a-f]{6}$" }), true);
  assert.equal(disjoint({ enum: ["#ffffff"] }, { pattern: "^#[0-9a-f]{6}$" }), false);
  assert.equal(disjoint({ enum: [5] }, { maximum: 3 }), true);
});

test("objects: a required discriminator, only when both are objects", () => {
  const b = { type: "object", required: ["kind"], properties: { kind: { const: "b" } } };
  assert.equal(disjoint({ $ref: "#/$defs/kindA" }, b), true);
  // Without `type: object`, a string satisfies both.
  const untyped = (k: string) => ({ required: ["kind"], properties: { kind: { const: k } } });
  assert.equal(disjoint(untyped("a"), untyped("b")), false);
  assert.equal(disjoint({ type: "object", ...untyped("a") }, { type: "object", ...untyped("b") }), true);
  // Optional on both sides: {} satisfies both.
  assert.equal(
    disjoint(
      { type: "object", properties: { kind: { const: "a" } } },
      { type: "object", properties: { kind: { const: "b" } } },
    ),
    false,
  );
  // One side forbids what the other requires.
  assert.equal(
    disjoint(
      { type: "object", required: ["x"] },
      { type: "object", properties: { y: {} }, additionalProperties: false },
    ),
    true,
  );
});

test("arrays: disjoint items only count with minItems ≥ 1", () => {
  const strings = { type: "array", items: { type: "string" } };
  const numbers = { type: "array", items: { type: "number" } };
  assert.equal(disjoint(strings, numbers), false);
  assert.equal(disjoint({ ...strings, minItems: 1 }, numbers), true);
  assert.equal(onlyEmpty(strings, numbers), true);
  assert.equal(onlyEmpty(strings, { type: "array" }), false);
  // Without a type on either side, "x" satisfies both.
  assert.equal(onlyEmpty({ items: { type: "string" } }, { items: { type: "number" } }), false);
});

test("union branches: every branch disjoint from the other side", () => {
  assert.equal(disjoint({ anyOf: [{ type: "string" }, { type: "null" }] }, { type: "object" }), true);
  assert.equal(disjoint({ anyOf: [{ type: "string" }, { type: "object" }] }, { type: "object" }), false);
});

test("patterns that list exact strings act as listed values for strings", () => {
  const t = (p: string) => ({ type: "string", pattern: p });
  assert.equal(disjoint(t("^Abs$"), t("^Add$")), true);
  assert.equal(disjoint(t("^(a|b)$"), t("^(?:c|d\\.)$")), true);
  assert.equal(disjoint(t("^(a|b)$"), t("^(?:b|c)$")), false);
  assert.equal(disjoint(t("^a\\.b$"), { type: "string", enum: ["a.b"] }), false);
  assert.equal(disjoint(t("^a.b$"), t("^axb$")), false); // `.` is not a literal
  // Without `type: string` a number satisfies both patterns.
  assert.equal(disjoint({ pattern: "^Abs$" }, { pattern: "^Add$" }), false);
});

test("the internal non-integer keyword: disjoint from integers, not from numbers", () => {
  const fraction = { type: "number", "$lmserve:nonInteger": true };
  assert.equal(disjoint(fraction, { type: "integer" }), true);
  assert.equal(disjoint(fraction, { type: "number" }), false);
  assert.equal(disjoint(fraction, { const: 2 }), true);
});

test("numbers: ranges with no number (or no integer) in common", () => {
  const num = (bounds: object) => ({ type: "number", ...bounds });
  const int = (bounds: object) => ({ type: "integer", ...bounds });
  assert.equal(disjoint(num({ maximum: 0 }), num({ exclusiveMinimum: 0 })), true);
  assert.equal(disjoint(num({ maximum: 0 }), num({ minimum: 0 })), false);
  assert.equal(disjoint(num({ exclusiveMaximum: 0 }), num({ minimum: 0 })), true);
  assert.equal(disjoint(num({ minimum: 0, maximum: 10 }), num({ minimum: 11 })), true);
  assert.equal(disjoint(num({ minimum: 0, maximum: 10 }), num({ minimum: 10.5 })), true);
  assert.equal(disjoint(num({ maximum: 10.5 }), num({ minimum: 10.2 })), false);
  // Draft-4 boolean exclusive bounds.
  assert.equal(disjoint(num({ maximum: 5, exclusiveMaximum: true }), num({ minimum: 5 })), true);
  assert.equal(disjoint(num({ maximum: 5, exclusiveMaximum: false }), num({ minimum: 5 })), false);
  // Integers: no integer in (10, 11).
  assert.equal(disjoint(int({ maximum: 10.5 }), int({ minimum: 10.2 })), true);
  assert.equal(disjoint(num({ maximum: 10.5 }), int({ minimum: 10.2 })), true);
  assert.equal(disjoint(int({ exclusiveMaximum: 11 }), num({ exclusiveMinimum: 10 })), true);
  assert.equal(disjoint(num({ exclusiveMaximum: 11 }), num({ exclusiveMinimum: 10 })), false);
  // A value of another type may satisfy both: bounds say nothing about it.
  assert.equal(disjoint({ maximum: 0 }, { exclusiveMinimum: 0 }), false);
  assert.equal(disjoint({ type: ["number", "null"], maximum: 0 }, num({ exclusiveMinimum: 0 })), true);
  assert.equal(
    disjoint({ type: ["number", "null"], maximum: 0 }, { type: ["number", "null"], minimum: 1 }),
    false,
  );
  // Bounds from allOf branches count.
  assert.equal(disjoint({ allOf: [num({}), { maximum: -1 }] }, int({ minimum: 0 })), true);
});

test("acceptsEveryNonObject: only object keywords (through allOf and $ref) hold for every non-object", () => {
  const defs: Record<string, unknown> = {
    "#/$defs/named": { properties: { name: { type: "string" } }, required: ["name"] },
    "#/$defs/typed": { type: "object" },
  };
  const test = provablyDisjoint((ref) => defs[ref]);
  assert.ok(test.acceptsEveryNonObject({ properties: { kind: { const: "a" } }, required: ["kind"] }));
  assert.ok(test.acceptsEveryNonObject({ allOf: [{ $ref: "#/$defs/named" }], title: "x", minProperties: 1 }));
  assert.ok(test.acceptsEveryNonObject(true));
  assert.ok(!test.acceptsEveryNonObject({ $ref: "#/$defs/typed" }));
  assert.ok(!test.acceptsEveryNonObject({ properties: {}, minLength: 1 }));
  assert.ok(!test.acceptsEveryNonObject({ anyOf: [{ required: ["a"] }] }));
  assert.ok(!test.acceptsEveryNonObject({ $ref: "#/$defs/missing" }));
  assert.ok(!test.acceptsEveryNonObject(false));
});

test("not: a schema is disjoint from one that implies what it negates (the same property schemas, required names)", () => {
  const nullA = { properties: { a: { const: null } } };
  assert.ok(disjoint({ not: nullA }, { properties: { a: { const: null }, b: { type: "string" } } }));
  assert.ok(disjoint({ allOf: [{ not: { required: ["x"] } }, {}] }, { required: ["x", "y"] }));
  assert.ok(disjoint({ not: {} }, {}));
  assert.ok(!disjoint({ not: nullA }, { properties: { a: { type: "null" } } })); // equal in meaning, not in JSON
  assert.ok(!disjoint({ not: nullA }, { properties: { b: { const: null } } }));
  assert.ok(!disjoint({ not: { required: ["x"], minProperties: 2 } }, { required: ["x"] }));
});

test("strings: patterns whose automata share no string, only when every common value is a string", () => {
  assert.equal(disjoint({ type: "string", pattern: "\\.js$" }, { type: "string", pattern: "\\.css$" }), true);
  assert.equal(disjoint({ type: "string", pattern: "\\.js$" }, { type: "string", pattern: "^a" }), false);
  // Without a type, 5 satisfies both.
  assert.equal(disjoint({ pattern: "\\.js$" }, { pattern: "\\.css$" }), false);
  // The type on one conjunct, the pattern on another.
  assert.equal(
    disjoint({ allOf: [{ type: "string" }, { pattern: "^x-" }] }, { type: "string", pattern: "^y-" }),
    true,
  );
  // A pattern the automata cannot read proves nothing.
  assert.equal(disjoint({ type: "string", pattern: "\\bjs$" }, { type: "string", pattern: "^c" }), false);
});

test("objects: a required property's schemas on each side count together", () => {
  // bundleconfig's shape: the base says `outputFileName` is a string, each branch gives only a pattern.
  const base = { type: "object", required: ["file"], properties: { file: { type: "string" } } };
  const js = { allOf: [base, { properties: { file: { pattern: "\\.js$" } } }] };
  const css = { allOf: [base, { properties: { file: { pattern: "\\.css$" } } }] };
  assert.equal(disjoint(js, css), true);
  const any = { allOf: [base, { properties: { file: { pattern: "\\." } } }] };
  assert.equal(disjoint(js, any), false);
  // Optional: {} satisfies both.
  const open = { type: "object", properties: { file: { type: "string" } } };
  assert.equal(
    disjoint(
      { allOf: [open, { properties: { file: { pattern: "\\.js$" } } }] },
      { allOf: [open, { properties: { file: { pattern: "\\.css$" } } }] },
    ),
    false,
  );
});

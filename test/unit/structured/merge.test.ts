/**
 * mergeSchemas (allOf): two `anyOf` lists combine pairwise, exactly, without building the combinations that
 * cannot hold (equal alternatives, mirrored pairs, alternatives of no common type).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MergeError, mergeSchemas } from "../../../src/structured/jsonSchema/merge.ts";

const anyOf = (s: unknown): unknown[] => (s as { anyOf: unknown[] }).anyOf;

test("equal alternatives combine to themselves, mirrored pairs count once", () => {
  const a = { $ref: "#/$defs/a" };
  const b = { $ref: "#/$defs/b" };
  const merged = mergeSchemas({ anyOf: [a, b] }, { anyOf: [{ $ref: "#/$defs/b" }, { $ref: "#/$defs/a" }] });
  assert.deepEqual(anyOf(merged), [{ allOf: [a, b] }, a, b]);
  // The same list on both sides is that list.
  assert.deepEqual(anyOf(mergeSchemas({ anyOf: [a, b] }, { anyOf: [{ ...a }, { ...b }] })), [a, b]);
  // oneOf[X] ∧ oneOf[X] is oneOf[X].
  assert.deepEqual(mergeSchemas({ oneOf: [a, b] }, { oneOf: [a, { ...b }] }), { oneOf: [a, b] });
});

test("alternatives with no type in common (with the merged type) are never built", () => {
  const typed = (...types: string[]) => types.map((type) => ({ type }));
  const merged = mergeSchemas(
    { type: ["string", "integer", "null"], anyOf: typed("string", "number", "boolean") },
    { anyOf: typed("integer", "string", "object") },
  );
  assert.deepEqual(anyOf(merged), [
    { type: "string" }, // string ∧ string
    { allOf: [{ type: "number" }, { type: "integer" }] },
  ]);
  assert.throws(
    () => mergeSchemas({ anyOf: typed("string", "null") }, { anyOf: typed("integer", "array") }),
    (error: unknown) => error instanceof MergeError && error.unsatisfiable,
  );
});

test("a property named __proto__ keeps its merged schema as an own member", () => {
  const a = JSON.parse(
    '{"properties":{"__proto__":{"type":"integer"}},"dependentRequired":{"__proto__":["a"]}}',
  );
  const b = JSON.parse('{"properties":{"__proto__":{"minimum":3}},"dependentRequired":{"__proto__":["b"]}}');
  const merged = mergeSchemas(a, b) as Record<string, Record<string, unknown>>;
  const properties = merged.properties!;
  assert.ok(Object.hasOwn(properties, "__proto__"));
  assert.deepEqual(Object.getOwnPropertyDescriptor(properties, "__proto__")?.value, {
    allOf: [{ type: "integer" }, { minimum: 3 }],
  });
  assert.equal(Object.getPrototypeOf(properties), Object.prototype);
  assert.deepEqual(Object.getOwnPropertyDescriptor(merged.dependentRequired, "__proto__")?.value, ["a", "b"]);
  const patterns = mergeSchemas(
    JSON.parse(
      '{"patternProperties":{"__proto__":{"type":"integer"}},"additionalProperties":{"type":"string"}}',
    ),
    { properties: { a: { type: "string" } } },
  ) as Record<string, Record<string, unknown>>;
  assert.ok(Object.hasOwn(patterns.patternProperties!, "__proto__"));
});

/**
 * `pattern` together with `minLength`/`maxLength`: the pattern is intersected with the length bounds when
 * that can be done exactly (issue 19c), checked with llama.cpp's own grammar engine and against JavaScript's
 * RegExp plus the lengths.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ConstraintError } from "../../../src/structured/errors.ts";
import { jsonSchemaToGbnf } from "../../../src/structured/jsonSchema/compiler.ts";
import { parseRegex, restrictLength } from "../../../src/structured/regex/regexParser.ts";
import { stringsUpTo } from "../../helpers/strings.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

/** Asserts that the grammar of `schema` accepts exactly the strings of `samples` that the schema allows. */
async function assertExact(
  schema: { pattern: string; minLength?: number; maxLength?: number },
  samples: string[],
) {
  const matches = await nativeMatcher(jsonSchemaToGbnf({ type: "string", ...schema }));
  const re = new RegExp(schema.pattern, "u");
  for (const text of samples) {
    const length = [...text].length;
    const valid =
      re.test(text) &&
      length >= (schema.minLength ?? 0) &&
      length <= (schema.maxLength ?? Number.POSITIVE_INFINITY);
    assert.equal(
      matches(JSON.stringify(text)),
      valid,
      `${JSON.stringify(schema)} on ${JSON.stringify(text)}`,
    );
  }
}

describe("pattern with minLength/maxLength", () => {
  it("bounds the single variable part of an anchored pattern", async () => {
    const samples = stringsUpTo(["a", "B", "1", "_", "-"], 6);
    await assertExact({ pattern: "^[A-Za-z0-9_]+$", minLength: 2, maxLength: 4 }, samples);
    await assertExact({ pattern: "^[a-z][a-z0-9_]*$", minLength: 3 }, samples);
    await assertExact({ pattern: "^[a-z][a-z0-9_]*$", maxLength: 2 }, samples);
    await assertExact({ pattern: "^([a-z_-]|[a-z-][a-z_-]*[a-z-])$", maxLength: 3 }, samples);
  });

  it("restricts each top-level alternative and drops those without a match of an allowed length", async () => {
    const samples = stringsUpTo(["a", "1", "-"], 5);
    await assertExact({ pattern: "^$|^[a-z][a-z0-9]*$", minLength: 1, maxLength: 3 }, samples);
    await assertExact(
      { pattern: "^-(ab)*$|^1{2,9}$", minLength: 3, maxLength: 4 },
      stringsUpTo(["a", "b", "1", "-"], 5),
    );
  });

  it("handles an end left open (search semantics) when the rest has a fixed length", async () => {
    await assertExact({ pattern: "^ab", maxLength: 4 }, stringsUpTo(["a", "b", "c"], 5));
    await assertExact({ pattern: "z$", minLength: 2, maxLength: 3 }, stringsUpTo(["y", "z"], 4));
  });

  it("keeps compiling patterns whose lengths are already implied", async () => {
    await assertExact({ pattern: "^[0-9]{3}$", minLength: 3, maxLength: 3 }, stringsUpTo(["1", "a"], 4));
  });

  it("gives no instance when no match has an allowed length", () => {
    assert.throws(
      () => jsonSchemaToGbnf({ type: "string", pattern: "^[a-z]{2}$", minLength: 3 }),
      (e: unknown) => e instanceof ConstraintError && /no satisfiable instance/.test(e.message),
    );
    assert.throws(
      () => jsonSchemaToGbnf({ type: "string", pattern: "^a{5}b*$", maxLength: 4 }),
      (e: unknown) => e instanceof ConstraintError && /no satisfiable instance/.test(e.message),
    );
  });

  it("narrows what it cannot intersect exactly: every string the grammar takes is allowed", async () => {
    const samples = stringsUpTo(["a", "1", ":", " "], 6);
    for (const schema of [
      { pattern: "^[a-z]+:[0-9]+$", maxLength: 5 },
      { pattern: "^(?:\\S+\\s+){0,9}\\S+$", maxLength: 5 },
      { pattern: "[a-z]", maxLength: 4 },
      { pattern: "^a+1+$", minLength: 4 },
    ]) {
      const matches = await nativeMatcher(jsonSchemaToGbnf({ type: "string", ...schema }));
      const re = new RegExp(schema.pattern, "u");
      let accepted = 0;
      for (const text of samples) {
        if (!matches(JSON.stringify(text))) continue;
        accepted++;
        const length = [...text].length;
        assert.ok(re.test(text), `${schema.pattern} took ${JSON.stringify(text)}`);
        assert.ok(length >= (schema.minLength ?? 0) && length <= (schema.maxLength ?? 1e9), text);
      }
      assert.ok(accepted > 0, `${schema.pattern}: some instance remains`);
    }
  });

  it("restrictLength is exact on the tree or says it cannot", () => {
    assert.equal(restrictLength(parseRegex("[a-z]+"), 3, 5)?.type, "repeat");
    assert.equal(restrictLength(parseRegex("[a-z]{2}"), 3, 5), null);
    assert.equal(restrictLength(parseRegex("a+b+"), 3, 5), undefined);
    assert.equal(restrictLength(parseRegex("(ab)+"), 3, 5)?.type, "repeat");
  });
});

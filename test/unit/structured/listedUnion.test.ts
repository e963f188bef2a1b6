/**
 * An `anyOf`/`oneOf` whose branches only list values compiles as one `enum` (one step instead of one per
 * branch): the same instances as the branches, checked against ajv.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { jsonSchemaToGbnf } from "../../../src/structured/jsonSchema/compiler.ts";
import { ajvValidator } from "../../helpers/structuredAjv.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

const CASES: { schema: unknown; samples: unknown[] }[] = [
  {
    // Sibling keywords apply to every listed value.
    schema: {
      type: "string",
      pattern: "^a",
      anyOf: [{ enum: ["ab", "b"], description: "x" }, { const: "ac" }, { enum: ["ab", 1] }],
    },
    samples: ["ab", "ac", "b", 1, "ad"],
  },
  {
    // A value two oneOf branches list matches both: it is no instance.
    schema: { oneOf: [{ enum: ["a", "b"] }, { enum: ["b", "c"] }, { const: null }, false] },
    samples: ["a", "b", "c", null, "d"],
  },
  {
    // Equal as JSON, written with other key orders.
    schema: { oneOf: [{ const: { x: 1, y: 2 } }, { enum: [{ y: 2, x: 1 }, [1]] }] },
    samples: [{ x: 1, y: 2 }, [1]],
  },
  {
    schema: { type: "object", properties: { k: { anyOf: [{ const: 1 }, { const: 2 }] } }, required: ["k"] },
    samples: [{ k: 1 }, { k: 2 }, { k: 3 }],
  },
];

test("unions of listed values accept exactly what ajv accepts", async () => {
  for (const { schema, samples } of CASES) {
    const gbnf = jsonSchemaToGbnf(schema);
    const matches = await nativeMatcher(gbnf);
    const validate = ajvValidator(schema);
    for (const sample of samples) {
      const text = JSON.stringify(sample);
      assert.equal(matches(text), validate(sample), `${text} under ${JSON.stringify(schema)}\n${gbnf}`);
    }
  }
});

test("a union of listed values with no instance left is unsatisfiable", () => {
  assert.throws(
    () => jsonSchemaToGbnf({ oneOf: [{ const: "a" }, { enum: ["a"] }] }),
    /no satisfiable instance/,
  );
});

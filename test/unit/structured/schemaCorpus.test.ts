/**
 * The JSON Schema corpus (test/fixtures/schemas): every accepting schema compiles to GBNF that llama.cpp's
 * grammar engine loads, accepts each `valid` sample (compact and pretty-printed) and rejects each `invalid`
 * and `grammarRejects` sample; every `refuse` schema is a 400 naming the keyword and its JSON pointer.
 * Samples are cross-checked with ajv so the fixtures themselves stay honest.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { projectRoot } from "../../../src/paths.ts";
import { ConstraintError } from "../../../src/structured/errors.ts";
import { compileConstraint } from "../../../src/structured/index.ts";
import { ajvValidator } from "../../helpers/structuredAjv.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

type Fixture = {
  schema: unknown;
  refuse?: boolean;
  keyword?: string;
  path?: string;
  valid?: unknown[];
  invalid?: unknown[];
  grammarRejects?: string[];
};

const dir = join(projectRoot, "test/fixtures/schemas");
const fixtures = readdirSync(dir)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((file) => ({ file, fixture: JSON.parse(readFileSync(join(dir, file), "utf8")) as Fixture }));

test("the corpus has at least 60 accepting schemas and refusal cases", () => {
  assert.ok(fixtures.filter((f) => !f.fixture.refuse).length >= 60);
  assert.ok(fixtures.filter((f) => f.fixture.refuse).length >= 15);
});

describe("accepting schemas", () => {
  for (const { file, fixture } of fixtures.filter((f) => !f.fixture.refuse)) {
    test(file, async () => {
      const { gbnf } = compileConstraint("json_schema", fixture.schema);
      const matches = await nativeMatcher(gbnf);
      const validate = ajvValidator(fixture.schema);
      for (const sample of fixture.valid ?? []) {
        assert.ok(validate(sample), `fixture sample should be valid per ajv: ${JSON.stringify(sample)}`);
        assert.ok(
          matches(JSON.stringify(sample)),
          `grammar should accept ${JSON.stringify(sample)}\n${gbnf}`,
        );
        const pretty = JSON.stringify(sample, null, 2);
        assert.ok(matches(pretty), `grammar should accept pretty-printed ${pretty}`);
      }
      for (const sample of fixture.invalid ?? []) {
        assert.ok(!validate(sample), `fixture sample should be invalid per ajv: ${JSON.stringify(sample)}`);
        assert.ok(
          !matches(JSON.stringify(sample)),
          `grammar should reject ${JSON.stringify(sample)}\n${gbnf}`,
        );
      }
      for (const text of fixture.grammarRejects ?? []) {
        assert.ok(!matches(text), `grammar should reject ${text}\n${gbnf}`);
      }
    });
  }
});

describe("refused schemas", () => {
  for (const { file, fixture } of fixtures.filter((f) => f.fixture.refuse)) {
    test(file, () => {
      assert.throws(
        () => compileConstraint("json_schema", fixture.schema),
        (error: { status?: number; message?: string; param?: string }) => {
          assert.ok(error instanceof ConstraintError, String(error));
          assert.equal(error.param, "guided_json");
          assert.ok(
            error.message?.includes(fixture.keyword!),
            `message names '${fixture.keyword}': ${error.message}`,
          );
          assert.ok(
            error.message?.includes(fixture.path!),
            `message names path '${fixture.path}': ${error.message}`,
          );
          return true;
        },
      );
    });
  }
});

/** docs/errors.md lists exactly the error types and codes the code can produce (`API_ERROR_TYPES`, `API_ERROR_CODES`). */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { API_ERROR_CODES, API_ERROR_TYPES } from "../../../src/errors.ts";

const doc = readFileSync(new URL("../../../docs/errors.md", import.meta.url), "utf8");

/** The first column's backticked names of the table under `## heading` (its header row left out). */
function tableNames(heading: string): string[] {
  const section = doc.split(`\n## ${heading}\n`)[1]?.split("\n## ")[0] ?? "";
  return [...section.matchAll(/^\| `([^`]+)` \|/gm)].map((match) => match[1] as string).slice(1);
}

describe("docs/errors.md", () => {
  it("lists every error type, and no other", () => {
    assert.deepEqual(tableNames("Types").sort(), [...API_ERROR_TYPES].sort());
  });

  it("lists every error code, and no other", () => {
    const documented = tableNames("Codes").filter((code) => code !== "fst_err_*");
    assert.deepEqual(documented.sort(), [...API_ERROR_CODES].sort());
    assert.ok(tableNames("Codes").includes("fst_err_*"));
  });
});

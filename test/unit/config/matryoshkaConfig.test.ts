/** --matryoshka-dimensions, server-wide and per model in a config file (issue 27). */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ConfigError, loadServeConfig } from "../../../src/config/serveConfig.ts";

describe("--matryoshka-dimensions", () => {
  it("is absent by default, and parses comma-separated widths sorted without repeats", () => {
    assert.equal(loadServeConfig(["m.gguf"], {}, {}).matryoshkaDimensions, undefined);
    const config = loadServeConfig(["m.gguf"], { matryoshkaDimensions: "256, 64,128,64" }, {});
    assert.deepEqual(config.matryoshkaDimensions, [64, 128, 256]);
  });

  it("refuses a width that is not a positive integer, naming the flag", () => {
    for (const value of ["0", "64,abc", "1.5", ""]) {
      assert.throws(
        () => loadServeConfig(["m.gguf"], { matryoshkaDimensions: value }, {}),
        (error) => error instanceof ConfigError && /--matryoshka-dimensions/.test(error.message),
        value,
      );
    }
  });

  it("takes a model's own widths from a config file entry", () => {
    const dir = mkdtempSync(join(tmpdir(), "lmserve-matryoshka-"));
    const file = join(dir, "config.yaml");
    writeFileSync(file, "models:\n  - model: a.gguf\n    matryoshka-dimensions: 32,16\n  - model: b.gguf\n");
    const config = loadServeConfig([], { config: file }, {});
    assert.deepEqual(config.models[0]?.matryoshkaDimensions, [16, 32]);
    assert.equal(config.models[1]?.matryoshkaDimensions, undefined);
  });
});

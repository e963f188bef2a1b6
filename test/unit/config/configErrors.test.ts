/** Configuration errors name the flag and the config key, never the internal field (issue 31). */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ConfigError, loadServeConfig } from "../../../src/config/serveConfig.ts";

const dir = mkdtempSync(join(tmpdir(), "lmserve-config-errors-"));

/** The message of the ConfigError `run` throws. */
function messageOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.message;
  }
  assert.fail("no ConfigError");
}

describe("configuration errors", () => {
  it("name the flag and the config key of a server-wide value", () => {
    const message = messageOf(() => loadServeConfig(["m.gguf"], { maxModelLen: "8" }, {}));
    assert.match(message, /--max-model-len \(config key 'max-model-len'\)/);
    assert.doesNotMatch(message, /maxModelLen/);
  });

  it("name a config file's model entry and its key", () => {
    const path = join(dir, "models.yaml");
    writeFileSync(path, "models:\n  - model: m.gguf\n    max-model-len: 8\n");
    const message = messageOf(() => loadServeConfig([], { config: path }, {}));
    assert.match(message, /models\[0\]\.max-model-len/);
    assert.doesNotMatch(message, /maxModelLen/);
  });
});

/** --lora NAME=PATH[:SCALE], --max-loras, --enable-lora, and per-model `lora` in a config file (issue 28). */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ConfigError, loadServeConfig } from "../../../src/config/serveConfig.ts";

const dir = mkdtempSync(join(tmpdir(), "lmserve-lora-config-"));
const adapter = join(dir, "sql.gguf");
const other = join(dir, "chat:v2.gguf");
writeFileSync(adapter, "GGUF");
writeFileSync(other, "GGUF");

describe("--lora", () => {
  it("is off by default: no adapters, LoRA not enabled", () => {
    const config = loadServeConfig(["m.gguf"], {}, {});
    assert.equal(config.models[0]?.loras, undefined);
    assert.equal(config.enableLora, false);
    assert.equal(config.maxLoras, undefined);
  });

  it("gives the first model its adapters with their scales (a path may hold ':'), and enables LoRA", () => {
    const config = loadServeConfig(
      ["a.gguf", "b.gguf"],
      { lora: [`sql=${adapter}`, `chat=${other}:0.5`], maxLoras: "2" },
      {},
    );
    assert.deepEqual(config.models[0]?.loras, [
      { name: "sql", path: adapter, scale: 1 },
      { name: "chat", path: other, scale: 0.5 },
    ]);
    assert.equal(config.models[1]?.loras, undefined);
    assert.equal(config.enableLora, true);
    assert.equal(config.maxLoras, 2);
    assert.equal(loadServeConfig(["m.gguf"], { enableLora: true }, {}).enableLora, true);
  });

  it("refuses a spec without NAME=PATH, a missing file, two adapters of one name, naming the flag", () => {
    for (const lora of [
      ["sql"],
      ["=x.gguf"],
      ["sql="],
      [`sql=${join(dir, "none.gguf")}`],
      [`a=${adapter}`, `a=${other}`],
    ]) {
      assert.throws(
        () => loadServeConfig(["m.gguf"], { lora }, {}),
        (error) => error instanceof ConfigError && /--lora/.test(error.message),
        lora.join(" "),
      );
    }
    for (const [tail, message] of [
      [":abc", /SCALE 'abc' is not a number/],
      [":1e400", /SCALE 1e400 is not a finite number/],
    ] as const) {
      assert.throws(
        () => loadServeConfig(["m.gguf"], { lora: [`sql=${adapter}${tail}`] }, {}),
        (error) => error instanceof ConfigError && message.test(error.message),
        tail,
      );
    }
    assert.throws(
      () => loadServeConfig([], { lora: [`sql=${adapter}`], modelsDir: dir }, {}),
      (error) => error instanceof ConfigError && /--lora needs a MODEL/.test(error.message),
    );
  });

  it("takes a model's own adapters from its config file entry", () => {
    const file = join(dir, "config.yaml");
    writeFileSync(file, `models:\n  - model: a.gguf\n  - model: b.gguf\n    lora: [sql=${adapter}]\n`);
    const config = loadServeConfig([], { config: file }, {});
    assert.equal(config.models[0]?.loras, undefined);
    assert.deepEqual(config.models[1]?.loras, [{ name: "sql", path: adapter, scale: 1 }]);
    assert.equal(config.enableLora, true);
  });
});

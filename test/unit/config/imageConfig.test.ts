/**
 * The image flags of `lmserve serve`: `--mmproj` (also per model in a config file), `--max-image-bytes`
 * and `--allow-private-image-urls`, parsed into the frozen config.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { ConfigError, loadServeConfig } from "../../../src/config/serveConfig.ts";

const dir = mkdtempSync(join(tmpdir(), "lmserve-image-config-"));
const projector = join(dir, "mmproj.gguf");
writeFileSync(projector, "GGUF");

describe("image flags", () => {
  it("default to no projector, 20,000,000-byte images and public addresses only", () => {
    const config = loadServeConfig(["m.gguf"], {}, {});
    assert.equal(config.mmproj, undefined);
    assert.equal(config.models[0]?.mmproj, undefined);
    assert.equal(config.maxImageBytes, 20_000_000);
    assert.equal(config.allowPrivateImageUrls, false);
  });

  it("take a projector path (kept absolute), a size with a unit and the private-address switch", () => {
    const config = loadServeConfig(
      ["m.gguf"],
      { mmproj: relative(process.cwd(), projector), maxImageBytes: "16mb", allowPrivateImageUrls: true },
      {},
    );
    assert.equal(config.mmproj, projector);
    assert.equal(config.maxImageBytes, 16 * 1024 * 1024);
    assert.equal(config.allowPrivateImageUrls, true);
    assert.equal(loadServeConfig(["m.gguf"], { maxImageBytes: "1000" }, {}).maxImageBytes, 1000);
  });

  it("refuse a missing projector file, a folder and a bad size", () => {
    for (const [flags, message] of [
      [{ mmproj: join(dir, "missing.gguf") }, /--mmproj: cannot read the projector file .*ENOENT/],
      [{ mmproj: dir }, /--mmproj: .* is not a file/],
      [{ maxImageBytes: "0" }, /--max-image-bytes must be a size/],
      [{ maxImageBytes: "big" }, /--max-image-bytes must be a size/],
    ] as const) {
      assert.throws(
        () => loadServeConfig(["m.gguf"], flags, {}),
        (error: unknown) => error instanceof ConfigError && message.test(error.message),
        JSON.stringify(flags),
      );
    }
  });

  it("read a config file's top-level and per-model mmproj", () => {
    const path = join(dir, "config.yaml");
    writeFileSync(
      path,
      `mmproj: ${projector}
max-image-bytes: 5mb
allow-private-image-urls: true
models:
  - model: a.gguf
    mmproj: ${projector}
  - model: b.gguf
`,
    );
    const known = new Set(["mmproj", "maxImageBytes", "allowPrivateImageUrls", "config"]);
    const config = loadServeConfig([], { config: path }, {}, { knownFlags: known });
    assert.equal(config.mmproj, projector);
    assert.equal(config.models[0]?.mmproj, projector);
    assert.equal(config.models[1]?.mmproj, undefined, "b.gguf takes the top-level --mmproj");
    assert.equal(config.maxImageBytes, 5 * 1024 * 1024);
    assert.equal(config.allowPrivateImageUrls, true);

    writeFileSync(path, `models:\n  - model: a.gguf\n    mmproj: ${join(dir, "nope.gguf")}\n`);
    assert.throws(
      () => loadServeConfig([], { config: path }, {}, { knownFlags: known }),
      /models\[0\]\.mmproj: cannot read the projector file/,
    );
  });
});

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { projectRoot } from "../../src/paths.ts";

/** Runs `lmserve ARGS` to completion and returns its exit status and output. */
function lmserve(args: string[]) {
  const result = spawnSync(process.execPath, [resolve(projectRoot, "bin/lmserve.js"), ...args], {
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: result.status, stderr: result.stderr.trim(), stdout: result.stdout };
}

describe("lmserve CLI", () => {
  it("a missing model file is a one-line error and exit code 2", () => {
    const { status, stderr } = lmserve(["serve", "/nonexistent/model.gguf", "--port", "0"]);
    assert.equal(status, 2);
    assert.equal(stderr.split("\n").length, 1, stderr);
    assert.match(stderr, /^lmserve: error: .*\/nonexistent\/model\.gguf/);
  });

  it("a corrupt model file is a one-line error and exit code 2", () => {
    const path = join(mkdtempSync(join(tmpdir(), "lmserve-cli-")), "broken.gguf");
    writeFileSync(path, "this is not a gguf file at all");
    const { status, stderr } = lmserve(["serve", path, "--port", "0"]);
    assert.equal(status, 2);
    assert.equal(stderr.split("\n").length, 1, stderr);
    // The magic-byte check of src/models/resolveModel.ts refuses it before node-llama-cpp parses it.
    assert.match(stderr, /^lmserve: error: Not a GGUF model file: .*broken\.gguf/);
  });

  it("--max-model-len above the model's training context is refused with exit code 2", () => {
    const { status, stderr } = lmserve(["serve", "--max-model-len", "999999", "--port", "0"]);
    assert.equal(status, 2);
    assert.match(stderr, /training context \(2048 tokens\)/);
  });

  it("an invalid flag value is a one-line error and exit code 2", () => {
    const { status, stderr } = lmserve(["serve", "--port", "eighty"]);
    assert.equal(status, 2);
    assert.match(stderr, /--port must be an integer/);
  });

  it("--help lists the serve flags", () => {
    const { status, stdout } = lmserve(["serve", "--help"]);
    assert.equal(status, 0);
    for (const flag of [
      "--host",
      "--port",
      "--served-model-name",
      "--max-model-len",
      "--max-num-seqs",
      "--threads",
      "--seed",
      "--chat-template",
    ]) {
      assert.ok(stdout.includes(flag), flag);
    }
  });
});

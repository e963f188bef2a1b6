import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { defaultModelPath, projectRoot } from "../../src/paths.ts";
import { serverVersion } from "../../src/version.ts";
import { startTestServer } from "../helpers/testServer.ts";

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

  it("--version prints the version and exits 0", () => {
    for (const flag of ["--version", "-V"]) {
      const { status, stdout } = lmserve([flag]);
      assert.equal(status, 0);
      assert.equal(stdout.trim(), serverVersion);
    }
  });

  it("an unknown flag is one line suggesting the nearest known flag (exit 2), not the whole usage", () => {
    const near = lmserve(["serve", "--prot", "1"]);
    assert.equal(near.status, 2);
    assert.equal(near.stderr, "lmserve: error: unknown option '--prot' (did you mean --port?)");
    const far = lmserve(["serve", "--frobnicate"]);
    assert.equal(far.status, 2);
    assert.equal(far.stderr.split("\n").length, 1, far.stderr);
  });

  it("duplicate model ids and leftover --served-model-name values are one-line errors (exit 2) naming them", () => {
    const twice = lmserve(["serve", defaultModelPath, defaultModelPath, "--port", "0"]);
    assert.equal(twice.status, 2);
    assert.equal(twice.stderr.split("\n").length, 1, twice.stderr);
    assert.match(twice.stderr, /Two models are served as 'stories260K'/);
    // -m / --model is one more MODEL.
    const flag = lmserve(["serve", defaultModelPath, "-m", defaultModelPath, "--port", "0"]);
    assert.match(flag.stderr, /Two models are served as 'stories260K'/);
    const named = lmserve(["serve", defaultModelPath, defaultModelPath, "--served-model-name", "a", "a"]);
    assert.match(named.stderr, /Two models are served as 'a'/);
    const leftover = lmserve([
      "serve",
      defaultModelPath,
      defaultModelPath,
      "--served-model-name",
      "a",
      "b",
      "c",
    ]);
    assert.equal(leftover.status, 2);
    assert.match(leftover.stderr, /^lmserve: error: --served-model-name 'c' names no model/);
    const dir = mkdtempSync(join(tmpdir(), "lmserve-cli-"));
    const config = join(dir, "two.yaml");
    writeFileSync(
      config,
      [
        "models:",
        ...[1, 2].flatMap(() => [`  - model: ${defaultModelPath}`, "    served-model-name: same"]),
      ].join("\n"),
    );
    const file = lmserve(["serve", "--config", config, "--port", "0"]);
    assert.equal(file.status, 2);
    assert.match(file.stderr, /Two models are served as 'same'/);
  });

  it("--device cuda on a machine without a CUDA GPU is refused with one line (exit 2)", (t) => {
    const probe = spawnSync("nvidia-smi", ["-L"], { encoding: "utf8" });
    if (probe.status === 0 && /GPU/.test(probe.stdout)) {
      t.skip("this machine has an NVIDIA GPU");
      return;
    }
    const { status, stderr } = lmserve(["serve", defaultModelPath, "--device", "cuda", "--port", "0"]);
    assert.equal(status, 2, stderr);
    assert.equal(stderr.split("\n").length, 1, stderr);
    assert.match(stderr, /^lmserve: error: --device cuda: /);
  });

  it("--device cpu, --n-gpu-layers 0 and -ngl 0 serve on the CPU; the startup log names the backend", async () => {
    for (const args of [
      ["--device", "cpu", "--n-gpu-layers", "0"],
      ["-ngl", "0"],
    ]) {
      const server = await startTestServer(args);
      try {
        const done = await server.client.completions.create({
          model: "stories260K",
          prompt: "Once upon a time",
          max_tokens: 4,
          temperature: 0,
        });
        assert.ok(done.choices[0]?.text);
        const loaded = server.logs.find((line) => line.msg === "model loaded");
        assert.equal(loaded?.backend, "CPU");
        assert.equal(loaded?.offloadedLayers, "0/6");
      } finally {
        await server.stop();
      }
    }
  });

  it("vLLM / llama-server aliases: -m, --ctx-size=N, -c, -np, --parallel, --enable-auto-tool-choice", async () => {
    for (const args of [
      ["-m", defaultModelPath, "--ctx-size=512", "-np", "2", "--enable-auto-tool-choice"],
      ["--model", defaultModelPath, "-c", "256", "--parallel", "1"],
    ]) {
      const server = await startTestServer(args);
      try {
        const models = await server.client.models.list();
        const [model] = models.data as unknown as { id: string; max_model_len: number }[];
        assert.equal(model?.id, "stories260K");
        assert.equal(model?.max_model_len, args.includes("-c") ? 256 : 512);
      } finally {
        await server.stop();
      }
    }
  });
});

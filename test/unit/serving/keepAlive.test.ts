/** `keep_alive` parsing (Ollama's semantics) and the `--models-dir` layout (llama-server's router). */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ApiError } from "../../../src/errors.ts";
import { listModelsDir } from "../../../src/models/modelsDir.ts";
import { MAX_KEEP_ALIVE_MS, parseKeepAlive } from "../../../src/serving/request/keepAlive.ts";

describe("parseKeepAlive", () => {
  it("reads seconds, Go durations, 0 and negatives", () => {
    assert.equal(parseKeepAlive(undefined), undefined);
    assert.equal(parseKeepAlive(null), undefined);
    assert.equal(parseKeepAlive(0), 0);
    assert.equal(parseKeepAlive("0"), 0);
    assert.equal(parseKeepAlive(30), 30_000);
    assert.equal(parseKeepAlive(1.5), 1_500);
    assert.equal(parseKeepAlive("5m"), 300_000);
    assert.equal(parseKeepAlive("1h30m"), 5_400_000);
    assert.equal(parseKeepAlive("90s"), 90_000);
    assert.equal(parseKeepAlive("250ms"), 250);
    assert.equal(parseKeepAlive("1.5h"), 5_400_000);
    assert.equal(parseKeepAlive(-1), null);
    assert.equal(parseKeepAlive("-1m"), null);
    assert.equal(parseKeepAlive("1000h"), null, "past the longest timer: forever");
    assert.equal(parseKeepAlive(MAX_KEEP_ALIVE_MS / 1000), MAX_KEEP_ALIVE_MS);
  });

  it("refuses anything else with a 400 on keep_alive", () => {
    for (const bad of [
      "",
      "5",
      "5 m",
      "m",
      "5x",
      "forever",
      true,
      {},
      [],
      Number.NaN,
      Number.POSITIVE_INFINITY,
    ]) {
      assert.throws(
        () => parseKeepAlive(bad),
        (error: unknown) => error instanceof ApiError && error.status === 400 && error.param === "keep_alive",
        JSON.stringify(bad),
      );
    }
  });
});

describe("listModelsDir", () => {
  it("lists top-level GGUFs and model subfolders (projector, first shard); skips projectors and later shards", async () => {
    const dir = await mkdtemp(join(tmpdir(), "lmserve-dir-"));
    try {
      await writeFile(join(dir, "b.gguf"), "12345");
      await writeFile(join(dir, "mmproj-x.gguf"), "1");
      await writeFile(join(dir, "big-00001-of-00002.gguf"), "12");
      await writeFile(join(dir, "big-00002-of-00002.gguf"), "34");
      await writeFile(join(dir, "notes.txt"), "no model");
      await mkdir(join(dir, "vision"));
      await writeFile(join(dir, "vision", "model.gguf"), "123");
      await writeFile(join(dir, "vision", "mmproj-F16.gguf"), "45");
      await mkdir(join(dir, "empty"));
      const found = await listModelsDir(dir);
      assert.deepEqual(found, [
        { id: "b", path: join(dir, "b.gguf"), sizeBytes: 5 },
        { id: "big", path: join(dir, "big-00001-of-00002.gguf"), sizeBytes: 4 },
        {
          id: "vision",
          path: join(dir, "vision", "model.gguf"),
          mmproj: join(dir, "vision", "mmproj-F16.gguf"),
          sizeBytes: 5,
        },
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("follows symbolic links to model files and folders; skips broken ones", async () => {
    const store = await mkdtemp(join(tmpdir(), "lmserve-store-"));
    const dir = await mkdtemp(join(tmpdir(), "lmserve-dir-"));
    try {
      await writeFile(join(store, "blob"), "123456");
      await mkdir(join(store, "vision"));
      await writeFile(join(store, "vision", "model.gguf"), "12");
      await symlink(join(store, "blob"), join(dir, "linked.gguf"));
      await symlink(join(store, "vision"), join(dir, "seeing"));
      await symlink(join(store, "missing"), join(dir, "broken.gguf"));
      assert.deepEqual(await listModelsDir(dir), [
        { id: "linked", path: join(dir, "linked.gguf"), sizeBytes: 6 },
        { id: "seeing", path: join(dir, "seeing", "model.gguf"), sizeBytes: 2 },
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(store, { recursive: true, force: true });
    }
  });
});

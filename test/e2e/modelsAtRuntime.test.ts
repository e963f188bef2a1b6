/**
 * Models at run time (issue 28) end to end: `lmserve serve stories260K --models-dir DIR --models-max 2`
 * where DIR holds a copy of stories260K (`tiny`), a random-weight Llama from `bench/make-model.ts`
 * (`random`, generated here) and a file that is no model (`broken`). Checks the states in `/v1/models`,
 * autoload, least-recently-used eviction, an unload while a stream runs (it finishes), a request racing
 * an unload, a failed load (others keep serving), `keep_alive: 0`, and the `/metrics` counters.
 */
import assert from "node:assert/strict";
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { defaultModelPath } from "../../src/paths.ts";
import type { ModelObject } from "../../src/protocol/models.ts";
import { runProcess } from "../helpers/runProcess.ts";
import { readSse, TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

let dir: string;
let server: TestServer;

async function models(): Promise<Map<string, ModelObject>> {
  const response = await fetch(`${server.url}/v1/models`);
  assert.equal(response.status, 200);
  const body = (await response.json()) as { data: ModelObject[] };
  return new Map(body.data.map((model) => [model.id, model]));
}

const stateOf = async (name: string) => (await models()).get(name)?.status?.value;

const complete = (model: string, extra: object = {}) =>
  server.post("/v1/completions", { model, prompt: "Once upon a time", max_tokens: 8, ...extra });

describe("models at run time (real server, --models-dir)", () => {
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "lmserve-models-dir-"));
    await copyFile(defaultModelPath, join(dir, "tiny.gguf"));
    await writeFile(join(dir, "broken.gguf"), "GGUFjunk");
    const made = await runProcess(process.execPath, [
      "--import",
      "tsx",
      "bench/make-model.ts",
      "--arch",
      "llama",
      "--hidden",
      "64",
      "--layers",
      "1",
      "--heads",
      "2",
      "--kv-heads",
      "1",
      "--ffn",
      "128",
      "--context",
      "512",
      "--out",
      join(dir, "random.gguf"),
      "--quiet",
    ]);
    assert.equal(made.status, 0, made.stderr);
  });
  server = useTestServer(() => [
    "--models-dir",
    dir,
    "--models-max",
    "2",
    "--max-model-len",
    "256",
    "--download-dir",
    join(dir, "cache"),
  ]);
  after(() => rm(dir, { recursive: true, force: true }));

  it("lists every servable model with its state; the configured model is loaded at startup", async () => {
    const listed = await models();
    assert.equal(listed.get(TEST_MODEL)?.status?.value, "loaded");
    for (const name of ["tiny", "random", "broken"]) {
      const model = listed.get(name);
      assert.equal(model?.object, "model", name);
      assert.equal(model?.status?.value, "unloaded", name);
      assert.equal(model?.path, join(dir, `${name}.gguf`));
    }
  });

  it("autoloads on request, evicts the least recently used idle model past --models-max", async () => {
    const tiny = await complete("tiny");
    assert.equal(tiny.status, 200, await tiny.clone().text());
    assert.equal(((await tiny.json()) as { model: string }).model, "tiny");
    assert.equal(await stateOf("tiny"), "loaded");
    const random = await complete("random");
    assert.equal(random.status, 200);
    const listed = await models();
    assert.equal(listed.get("random")?.status?.value, "loaded");
    assert.ok((listed.get("random")?.status?.memory_bytes ?? 0) > 0);
    assert.equal(listed.get(TEST_MODEL)?.status?.value, "unloaded"); // least recently used
    assert.equal(listed.get("tiny")?.status?.value, "loaded");
  });

  it("unload while a stream runs: the stream finishes; a racing request is refused or served, never hung", async () => {
    const stream = await complete("tiny", { stream: true, max_tokens: 200 });
    assert.equal(stream.status, 200);
    const unload = server.post("/models/unload", { model: "tiny" });
    const racing = complete("tiny");
    const events = await readSse(stream);
    assert.equal(events.at(-1), "[DONE]");
    assert.ok(!events.some((event) => typeof event === "object" && event !== null && "error" in event));
    assert.equal((await unload).status, 200);
    const raced = await racing;
    // Before the unload began it was served; during it, 503 model_unloading.
    if (raced.status !== 200) {
      assert.equal(raced.status, 503);
      assert.equal(((await raced.json()) as { error: { code: string } }).error.code, "model_unloading");
    }
    assert.equal(await stateOf("tiny"), "unloaded");
  });

  it("a model that fails to load is failed with its reason; the others keep serving", async () => {
    const response = await complete("broken");
    assert.equal(response.status, 503);
    const body = (await response.json()) as { error: { code: string } };
    assert.equal(body.error.code, "model_load_failed");
    const broken = (await models()).get("broken");
    assert.equal(broken?.status?.value, "failed");
    assert.match(broken?.status?.reason ?? "", /broken\.gguf/);
    assert.equal((await complete("random")).status, 200);
  });

  it("keep_alive 0 unloads the model once its request ends; /metrics counts loads and unloads", async () => {
    assert.equal((await complete("tiny", { keep_alive: 0 })).status, 200);
    for (let attempt = 0; attempt < 1000 && (await stateOf("tiny")) !== "unloaded"; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal(await stateOf("tiny"), "unloaded");
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /lmserve:model_loads_total\{model_name="broken",outcome="failure"\} 1/);
    assert.match(metrics, /lmserve:model_unloads_total\{model_name="tiny",reason="keep_alive"\} 1/);
    assert.match(metrics, /lmserve:model_unloads_total\{model_name="tiny",reason="request"\} 1/);
    assert.match(metrics, /lmserve:model_unloads_total\{model_name="stories260K",reason="evicted"\} 1/);
    assert.match(metrics, /lmserve:model_load_seconds_count\{model_name="random"\} 1/);
  });
});

describe("a Matryoshka width too wide for a model loaded at run time", () => {
  let narrowDir: string;

  before(async () => {
    narrowDir = await mkdtemp(join(tmpdir(), "lmserve-models-narrow-"));
    const made = await runProcess(process.execPath, [
      "--import",
      "tsx",
      "bench/make-model.ts",
      ...["--arch", "llama", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1"],
      ...["--ffn", "64", "--context", "256", "--out", join(narrowDir, "narrow.gguf"), "--quiet"],
    ]);
    assert.equal(made.status, 0, made.stderr);
  });
  // 48 fits stories260K (64 wide), loaded at startup; not the 32-wide model of the directory.
  const narrowServer = useTestServer(() => ["--models-dir", narrowDir, "--matryoshka-dimensions", "48"]);
  after(() => rm(narrowDir, { recursive: true, force: true }));

  it("fails that load with the numbers (503 model_load_failed, status failed); the startup model keeps its width", async () => {
    const response = await narrowServer.post("/v1/embeddings", {
      model: "narrow",
      input: "Once upon a time",
    });
    assert.equal(response.status, 503);
    const body = (await response.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "model_load_failed");
    const listed = (await (await fetch(`${narrowServer.url}/v1/models`)).json()) as { data: ModelObject[] };
    const narrow = listed.data.find((model) => model.id === "narrow");
    assert.equal(narrow?.status?.value, "failed");
    assert.match(
      narrow?.status?.reason ?? "",
      /--matryoshka-dimensions 48: wider than narrow's embeddings \(32 dimensions\)/,
    );
    const fits = await narrowServer.post("/v1/embeddings", {
      model: TEST_MODEL,
      input: "Hi",
      dimensions: 48,
    });
    assert.equal(fits.status, 200);
    const vector = ((await fits.json()) as { data: { embedding: number[] }[] }).data[0]?.embedding ?? [];
    assert.equal(vector.length, 48);
  });
});

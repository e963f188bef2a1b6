/**
 * vLLM's run-time LoRA routes in-process, on a fake engine that takes adapters (it records them and the
 * requests that run under them): POST /v1/load_lora_adapter and /v1/unload_lora_adapter with vLLM's
 * bodies and plain-text answers, the adapter in /v1/models with `parent` and `root`, a request naming
 * it carrying it to its base, and the 400 / 404 answers in the documented error shape.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import type { LoraAdapter } from "../../src/engine/LoraAdapter.ts";
import type { NativeLora } from "../../src/engine/native.ts";
import type { ModelList } from "../../src/protocol/models.ts";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { assertErrorResponse } from "../helpers/apiErrors.ts";
import { useFakeApp } from "../helpers/fakeApp.ts";
import { FakeEngine } from "../helpers/fakeEngine.ts";

/** A fake engine that serves LoRA adapters as the scheduler does (by name, freed on unload). */
class FakeLoraEngine extends FakeEngine {
  private readonly adapters = new Map<string, LoraAdapter>();
  private nextId = 1;

  async loadAdapter(name: string, path: string, scale = 1): Promise<LoraAdapter> {
    if (this.adapters.has(name)) throw new Error(`The LoRA adapter '${name}' is already loaded.`);
    if (path.endsWith(".txt"))
      throw new Error(`The LoRA adapter '${name}' could not be loaded: not a GGUF file`);
    const adapter = { id: this.nextId++, name, path, scale, native: {} as NativeLora };
    this.adapters.set(name, adapter);
    return adapter;
  }

  async unloadAdapter(name: string): Promise<void> {
    if (!this.adapters.delete(name)) throw new Error(`No LoRA adapter '${name}' is loaded.`);
  }

  adapter(name: string): LoraAdapter | undefined {
    return this.adapters.get(name);
  }

  adapterList(): LoraAdapter[] {
    return [...this.adapters.values()];
  }
}

describe("LoRA adapters at run time (in-process, vLLM's routes)", () => {
  const dir = mkdtempSync(join(tmpdir(), "lmserve-lora-http-"));
  const adapterPath = join(dir, "sql.gguf");
  writeFileSync(adapterPath, "GGUF");
  writeFileSync(join(dir, "notes.txt"), "no adapter");
  after(() => rmSync(dir, { recursive: true, force: true }));
  const base = new FakeLoraEngine({ names: ["fake-base"], text: "hello" });
  const fake = useFakeApp({ engines: [base, new FakeEngine({ names: ["plain"] })] });

  it("loads an adapter onto the first model: 200 in plain text, listed with parent and root, requests carry it", async () => {
    const loaded = await fake.post("/v1/load_lora_adapter", { lora_name: "sql", lora_path: adapterPath });
    assert.equal(loaded.statusCode, 200, loaded.body);
    assert.match(String(loaded.headers["content-type"]), /^text\/plain/);
    assert.equal(loaded.body, "Success: LoRA adapter 'sql' added successfully.");

    const models = (await fake.get("/v1/models")).json() as ModelList;
    const listed = models.data.find((model) => model.id === "sql");
    assert.equal(listed?.parent, "fake-base");
    assert.equal(listed?.root, adapterPath);

    const before = base.submitted.length;
    const completion = await fake.post("/v1/completions", { model: "sql", prompt: "hi", max_tokens: 3 });
    assert.equal(completion.statusCode, 200, completion.body);
    assert.equal((completion.json() as { model: string }).model, "sql");
    assert.equal(base.submitted.length, before + 1);
    assert.equal(base.submitted.at(-1)?.adapter?.name, "sql");
    // An unknown name's 404 lists the adapters beside the models.
    const unknown = await fake.post("/v1/completions", { model: "nope", prompt: "hi", max_tokens: 3 });
    assert.equal(unknown.statusCode, 404);
    assert.match((unknown.json() as ErrorBody).message, /Available models: fake-base, plain, sql\./);
    const plain = await fake.post("/v1/completions", { model: "fake-base", prompt: "hi", max_tokens: 3 });
    assert.equal(plain.statusCode, 200);
    assert.equal(base.submitted.at(-1)?.adapter, undefined);
  });

  it("refuses a second adapter of the same name, a missing field, a path with no file and a file that is no adapter", async () => {
    assertErrorResponse(
      await fake.post("/v1/load_lora_adapter", { lora_name: "sql", lora_path: adapterPath }),
      400,
      "lora_name",
      /already been loaded/,
    );
    assertErrorResponse(
      await fake.post("/v1/load_lora_adapter", { lora_path: adapterPath }),
      400,
      "lora_name",
      /must be provided/,
    );
    assertErrorResponse(
      await fake.post("/v1/load_lora_adapter", { lora_name: "x" }),
      400,
      "lora_path",
      /must be provided/,
    );
    assertErrorResponse(
      await fake.post("/v1/load_lora_adapter", { lora_name: "x", lora_path: join(dir, "absent.gguf") }),
      404,
      "lora_path",
      /No adapter found/,
    );
    const failed = await fake.post("/v1/load_lora_adapter", {
      lora_name: "x",
      lora_path: join(dir, "notes.txt"),
    });
    assert.equal(failed.statusCode, 400, failed.body);
    assert.equal((failed.json() as ErrorBody).error.code, "lora_load_failed");
    assertErrorResponse(
      await fake.post("/v1/load_lora_adapter", {
        lora_name: "x",
        lora_path: adapterPath,
        base_model_name: "plain",
      }),
      400,
      "base_model_name",
      /does not take LoRA adapters/,
    );
  });

  it("unloads it: 200 in plain text, then its name is unknown; an unknown adapter is a 404", async () => {
    const unloaded = await fake.post("/v1/unload_lora_adapter", { lora_name: "sql" });
    assert.equal(unloaded.statusCode, 200, unloaded.body);
    assert.equal(unloaded.body, "Success: LoRA adapter 'sql' removed successfully.");
    const gone = await fake.post("/v1/completions", { model: "sql", prompt: "hi", max_tokens: 3 });
    assert.equal(gone.statusCode, 404);
    assert.match((gone.json() as ErrorBody).message, /Available models: fake-base, plain\.$/);
    const again = await fake.post("/v1/unload_lora_adapter", { lora_name: "sql" });
    assert.equal(again.statusCode, 404);
    assert.equal((again.json() as ErrorBody).error.code, "lora_not_found");
    assertErrorResponse(
      await fake.post("/v1/unload_lora_adapter", {}),
      400,
      "lora_name",
      /needs to be provided/,
    );
  });
});

/**
 * Models at run time (issue 28) on the in-process app over fake engines: `GET /v1/models` states,
 * `POST /models/load` / `POST /models/unload` (llama-server's router bodies) and their 4xx, autoload,
 * least-recently-used eviction under `maxModels` and `memoryBudget`, `keep_alive` (0, a duration, -1, bad
 * values), a model that fails to load, and an unload while a stream runs (it finishes first; past the
 * drain timeout it ends with `model_unloaded`).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { FastifyInstance } from "fastify";
import type { GenerationObserver, GenerationRequest, GenerationResult } from "../../src/engine/types.ts";
import type { ModelObject } from "../../src/protocol/models.ts";
import { buildApp } from "../../src/server/app.ts";
import { ModelRegistry, type ResidencyOptions } from "../../src/serving/ModelRegistry.ts";
import { SeedSource } from "../../src/serving/request/generationParams.ts";
import { FakeEngine } from "../helpers/fakeEngine.ts";

/** A fake engine whose generations wait for {@link open} (or their abort) before they start. */
class GatedEngine extends FakeEngine {
  private release: (() => void) | undefined;
  private gate: Promise<void> | undefined;

  /** Holds every later generation until {@link open}. */
  close(): void {
    this.gate = new Promise((resolve) => {
      this.release = resolve;
    });
  }

  /** Lets the held generations run. */
  open(): void {
    this.release?.();
    this.gate = undefined;
  }

  override async submit(
    request: GenerationRequest,
    observer: GenerationObserver,
    signal?: AbortSignal,
  ): Promise<GenerationResult> {
    if (this.gate) {
      const aborted = new Promise<void>((resolve) => signal?.addEventListener("abort", () => resolve()));
      await Promise.race([this.gate, aborted]);
    }
    return super.submit(request, observer, signal);
  }
}

type Fixture = {
  app: FastifyInstance;
  registry: ModelRegistry<FakeEngine>;
  engines: Map<string, GatedEngine>;
  loads: string[];
  closes: string[];
  /** Loads of `name` fail while this holds it. */
  failing: Set<string>;
};

/** An app serving models `names` (unloaded at first, each `bytes` big) under the residency `options`. */
async function fixture(
  names: readonly string[],
  options: ResidencyOptions<FakeEngine>,
  bytes = 100,
): Promise<Fixture> {
  const registry = new ModelRegistry<FakeEngine>(options);
  const engines = new Map<string, GatedEngine>();
  const loads: string[] = [];
  const closes: string[] = [];
  const failing = new Set<string>();
  for (const name of names) {
    registry.addServable({
      names: [name],
      path: `/models/${name}.gguf`,
      origin: "models-dir",
      estimatedBytes: bytes,
      load: async () => {
        loads.push(name);
        if (failing.has(name)) throw new Error(`bad file ${name}.gguf: no tokenizer\nsecond line`);
        const engine = new GatedEngine({ names: [name] });
        engines.set(name, engine);
        return {
          scheduler: engine,
          memoryBytes: bytes,
          close: async () => {
            closes.push(name);
          },
        };
      },
    });
  }
  const app = buildApp({ registry, seeds: new SeedSource(0), isReady: () => true }, { logger: false });
  await app.ready();
  return { app, registry, engines, loads, closes, failing };
}

const post = (app: FastifyInstance, url: string, payload: object) =>
  app.inject({ method: "POST", url, payload });

const complete = (app: FastifyInstance, model: string, extra: object = {}) =>
  post(app, "/v1/completions", { model, prompt: "hi", max_tokens: 3, ...extra });

async function models(app: FastifyInstance): Promise<Map<string, ModelObject>> {
  const response = await app.inject({ method: "GET", url: "/v1/models" });
  assert.equal(response.statusCode, 200);
  const list = response.json() as { object: string; data: ModelObject[] };
  assert.equal(list.object, "list");
  return new Map(list.data.map((model) => [model.id, model]));
}

async function stateOf(app: FastifyInstance, name: string): Promise<string | undefined> {
  return (await models(app)).get(name)?.status?.value;
}

/** Waits (event-loop turns, no clock) until `check` holds. */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let turn = 0; turn < 100_000; turn++) {
    if (await check()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.fail("condition never held");
}

describe("models at run time (in-process, fake engine)", () => {
  it("lists unloaded models in the OpenAI shape, then loads and unloads them on request", async () => {
    const { app, closes } = await fixture(["a", "b"], {});
    const listed = await models(app);
    const a = listed.get("a") as ModelObject;
    assert.equal(a.object, "model");
    assert.equal(a.owned_by, "lmserve");
    assert.equal(a.root, "a");
    assert.equal(a.parent, null);
    assert.equal(a.path, "/models/a.gguf");
    assert.deepEqual(a.status, { value: "unloaded" });
    assert.equal(a.max_model_len, undefined);

    const loaded = await post(app, "/models/load", { model: "a" });
    assert.equal(loaded.statusCode, 200);
    assert.deepEqual(loaded.json(), { success: true });
    const now = (await models(app)).get("a") as ModelObject;
    assert.equal(now.status?.value, "loaded");
    assert.equal(now.status?.memory_bytes, 100);
    assert.equal(now.status?.expires_at, null);
    assert.equal(now.max_model_len, 256);

    const again = await post(app, "/models/load", { model: "a" });
    assert.equal(again.statusCode, 400);
    assert.match(again.json().message, /already loaded/);

    const unloaded = await post(app, "/models/unload", { model: "a" });
    assert.equal(unloaded.statusCode, 200);
    assert.deepEqual(unloaded.json(), { success: true });
    assert.equal(await stateOf(app, "a"), "unloaded");
    assert.deepEqual(closes, ["a"]);
    const twice = await post(app, "/models/unload", { model: "a" });
    assert.equal(twice.statusCode, 400);
    assert.match(twice.json().message, /not loaded/);
    await app.close();
  });

  it("refuses bad load/unload bodies: unknown model 404, missing or non-string model 422", async () => {
    const { app } = await fixture(["a"], {});
    const unknown = await post(app, "/models/load", { model: "nope" });
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().error.code, "model_not_found");
    assert.equal((await post(app, "/models/unload", { model: "nope" })).statusCode, 404);
    assert.equal((await post(app, "/models/load", {})).statusCode, 422);
    assert.equal((await post(app, "/models/unload", { model: 3 })).statusCode, 422);
    await app.close();
  });

  it("without autoload a request for an unloaded model is a 503 model_not_loaded, and keep_alive is refused", async () => {
    const { app } = await fixture(["a"], { autoload: false });
    const response = await complete(app, "a");
    assert.equal(response.statusCode, 503);
    assert.equal(response.json().error.code, "model_not_loaded");
    assert.ok(response.headers["retry-after"]);
    await post(app, "/models/load", { model: "a" });
    assert.equal((await complete(app, "a")).statusCode, 200);
    const keep = await complete(app, "a", { keep_alive: "5m" });
    assert.equal(keep.statusCode, 400);
    assert.equal(keep.json().error.param, "keep_alive");
    await app.close();
  });

  it("autoloads the named model (two requests share one load) and serves it", async () => {
    const { app, loads } = await fixture(["a", "b"], { autoload: true });
    const [first, second] = await Promise.all([complete(app, "a"), complete(app, "a")]);
    assert.equal(first.statusCode, 200);
    assert.equal(second.statusCode, 200);
    assert.equal(first.json().model, "a");
    assert.deepEqual(loads, ["a"]);
    assert.equal(await stateOf(app, "a"), "loaded");
    assert.equal(await stateOf(app, "b"), "unloaded");
    // Every endpoint that takes `model` autoloads: embeddings, tokenize.
    const embedded = await post(app, "/v1/embeddings", { model: "b", input: "x" });
    assert.equal(embedded.statusCode, 200);
    assert.deepEqual(loads, ["a", "b"]);
    await app.close();
  });

  it("evicts the least recently used idle model under maxModels", async () => {
    const { app, closes } = await fixture(["a", "b", "c"], { autoload: true, maxModels: 2 });
    assert.equal((await complete(app, "a")).statusCode, 200);
    assert.equal((await complete(app, "b")).statusCode, 200);
    assert.equal((await complete(app, "a")).statusCode, 200); // b is now the least recently used
    assert.equal((await complete(app, "c")).statusCode, 200);
    assert.deepEqual(closes, ["b"]);
    const listed = await models(app);
    assert.equal(listed.get("a")?.status?.value, "loaded");
    assert.equal(listed.get("b")?.status?.value, "unloaded");
    assert.equal(listed.get("c")?.status?.value, "loaded");
    await app.close();
  });

  it("evicts under memoryBudget, never a busy model, and answers 503 model_capacity with the numbers", async () => {
    const { app, engines, closes } = await fixture(
      ["a", "b", "c"],
      { autoload: true, memoryBudget: 250 },
      100,
    );
    assert.equal((await complete(app, "a")).statusCode, 200);
    assert.equal((await complete(app, "b")).statusCode, 200);
    // a is busy (a stream held at its gate): c evicts b, the idle one, though a is older.
    (engines.get("a") as GatedEngine).close();
    const running = complete(app, "a", { stream: true });
    await until(async () => (await models(app)).get("a")?.status?.in_flight === 1);
    assert.equal((await complete(app, "c")).statusCode, 200);
    assert.deepEqual(closes, ["b"]);
    // Now a (busy) and c hold 200 of 250: b needs 100 and c is idle, so c goes.
    (engines.get("c") as GatedEngine).close();
    const alsoRunning = complete(app, "c", { stream: true });
    await until(async () => (await models(app)).get("c")?.status?.in_flight === 1);
    const refused = await complete(app, "b");
    assert.equal(refused.statusCode, 503);
    assert.equal(refused.json().error.code, "model_capacity");
    assert.match(refused.json().message, /100 bytes.*200 of the --memory-budget of 250 bytes/);
    assert.equal(await stateOf(app, "b"), "unloaded");
    (engines.get("a") as GatedEngine).open();
    (engines.get("c") as GatedEngine).open();
    assert.equal((await running).statusCode, 200);
    assert.equal((await alsoRunning).statusCode, 200);
    assert.equal((await complete(app, "b")).statusCode, 200);
    await app.close();
  });

  it("keep_alive: 0 unloads after the request, a duration sets expires_at, -1 keeps it; bad values are 400", async () => {
    const { app } = await fixture(["a"], { autoload: true });
    assert.equal((await complete(app, "a", { keep_alive: 0 })).statusCode, 200);
    await until(async () => (await stateOf(app, "a")) === "unloaded");

    const before = Date.now();
    assert.equal((await complete(app, "a", { keep_alive: "1h" })).statusCode, 200);
    const expires = (await models(app)).get("a")?.status?.expires_at;
    assert.equal(typeof expires, "string");
    const at = Date.parse(expires as string);
    assert.ok(at >= before + 3_600_000 && at <= Date.now() + 3_600_000, `expires_at ${expires}`);

    assert.equal((await complete(app, "a", { keep_alive: -1 })).statusCode, 200);
    assert.equal((await models(app)).get("a")?.status?.expires_at, null);
    assert.equal(await stateOf(app, "a"), "loaded");

    for (const bad of ["5 minutes", "", true, [1], "1x"]) {
      const response = await complete(app, "a", { keep_alive: bad });
      assert.equal(response.statusCode, 400, JSON.stringify(bad));
      assert.equal(response.json().error.param, "keep_alive");
    }
    await app.close();
  });

  it("idle unload: a model idle past idleUnloadMs unloads (reason idle)", async () => {
    const reasons: string[] = [];
    const { app } = await fixture(["a"], {
      autoload: true,
      idleUnloadMs: 1,
      events: { onUnloaded: (_id, _scheduler, reason) => reasons.push(reason) },
    });
    assert.equal((await complete(app, "a")).statusCode, 200);
    await until(async () => (await stateOf(app, "a")) === "unloaded");
    assert.deepEqual(reasons, ["idle"]);
    await app.close();
  });

  it("a model that fails to load is failed with its reason, others keep serving, the next load retries", async () => {
    const outcomes: string[] = [];
    const { app, failing, loads } = await fixture(["a", "bad"], {
      autoload: true,
      events: { onLoad: (id, outcome) => outcomes.push(`${id}:${outcome}`) },
    });
    failing.add("bad");
    const response = await complete(app, "bad");
    assert.equal(response.statusCode, 503);
    assert.equal(response.json().error.code, "model_load_failed");
    assert.match(response.json().message, /bad file bad\.gguf: no tokenizer$/);
    const bad = (await models(app)).get("bad");
    assert.deepEqual(bad?.status, { value: "failed", reason: "bad file bad.gguf: no tokenizer" });
    assert.equal((await complete(app, "a")).statusCode, 200);
    const explicit = await post(app, "/models/load", { model: "bad" });
    assert.equal(explicit.statusCode, 503);
    failing.delete("bad");
    assert.equal((await post(app, "/models/load", { model: "bad" })).statusCode, 200);
    assert.equal(await stateOf(app, "bad"), "loaded");
    assert.deepEqual(loads, ["bad", "a", "bad", "bad"]);
    assert.deepEqual(outcomes, ["bad:failure", "a:success", "bad:failure", "bad:success"]);
    await app.close();
  });

  it("unload while a stream runs: new requests get 503 model_unloading, the stream finishes, then the model is freed", async () => {
    const { app, engines, closes } = await fixture(["a"], { autoload: true });
    assert.equal((await complete(app, "a")).statusCode, 200);
    const engine = engines.get("a") as GatedEngine;
    engine.close();
    const stream = complete(app, "a", { stream: true });
    await until(async () => (await models(app)).get("a")?.status?.in_flight === 1);
    const unload = post(app, "/models/unload", { model: "a" });
    await until(async () => (await stateOf(app, "a")) === "unloading");
    const racing = await complete(app, "a");
    assert.equal(racing.statusCode, 503);
    assert.equal(racing.json().error.code, "model_unloading");
    assert.deepEqual(closes, []);
    engine.open();
    const streamed = await stream;
    assert.equal(streamed.statusCode, 200);
    assert.match(streamed.body, /data: \[DONE\]/);
    assert.doesNotMatch(streamed.body, /error/);
    assert.equal((await unload).statusCode, 200);
    assert.deepEqual(closes, ["a"]);
    // Once unloaded, a request loads it again.
    assert.equal((await complete(app, "a")).statusCode, 200);
    assert.equal(await stateOf(app, "a"), "loaded");
    await app.close();
  });

  it("a request that names no model goes to a loaded one, else to one that has not failed", async () => {
    const { app, failing, loads } = await fixture(["broken", "good"], { autoload: true });
    failing.add("broken");
    const unnamed = () => post(app, "/v1/completions", { prompt: "hi", max_tokens: 3 });
    // Nothing loaded, nothing failed yet: the first model, which fails.
    assert.equal((await unnamed()).statusCode, 503);
    // Then the next one that has not failed, loaded on demand; then the loaded one.
    const second = await unnamed();
    assert.equal(second.statusCode, 200, second.body);
    assert.equal(second.json().model, "good");
    assert.equal((await unnamed()).json().model, "good");
    assert.deepEqual(loads, ["broken", "good"]);
    await app.close();
  });

  it("a LoRA adapter onto a base being unloaded is a 503 model_unloading; an unloaded base autoloads first", async () => {
    const { app, engines, loads } = await fixture(["a", "b"], { autoload: true });
    const adapter = { lora_name: "x", lora_path: "/nonexistent/x.gguf", base_model_name: "b" };
    // b is not loaded: it loads, then the adapter is checked (the fake engine takes none).
    const onUnloaded = await post(app, "/v1/load_lora_adapter", adapter);
    assert.equal(onUnloaded.statusCode, 400, onUnloaded.body);
    assert.match(onUnloaded.json().message, /does not take LoRA adapters/);
    assert.deepEqual(loads, ["b"]);
    // A model's own name is no adapter name.
    const clash = await post(app, "/v1/load_lora_adapter", { ...adapter, lora_name: "a" });
    assert.equal(clash.statusCode, 400);
    assert.match(clash.json().message, /name of a served model/);
    const long = await post(app, "/v1/load_lora_adapter", { ...adapter, lora_name: "n".repeat(257) });
    assert.equal(long.statusCode, 400);
    assert.equal(long.json().error.param, "lora_name");
    // b unloading (a stream holds it): the adapter load is refused as requests are.
    const engine = engines.get("b") as GatedEngine;
    engine.close();
    const stream = complete(app, "b", { stream: true });
    await until(async () => (await models(app)).get("b")?.status?.in_flight === 1);
    const unload = post(app, "/models/unload", { model: "b" });
    await until(async () => (await stateOf(app, "b")) === "unloading");
    const refused = await post(app, "/v1/load_lora_adapter", adapter);
    assert.equal(refused.statusCode, 503);
    assert.equal(refused.json().error.code, "model_unloading");
    engine.open();
    await stream;
    assert.equal((await unload).statusCode, 200);
    await app.close();
  });

  it("an unload past its drain timeout ends the running stream with model_unloaded", async () => {
    const { app, engines, closes } = await fixture(["a"], { autoload: true, drainTimeoutMs: 1 });
    assert.equal((await complete(app, "a")).statusCode, 200);
    (engines.get("a") as GatedEngine).close();
    const stream = complete(app, "a", { stream: true });
    await until(async () => (await models(app)).get("a")?.status?.in_flight === 1);
    assert.equal((await post(app, "/models/unload", { model: "a" })).statusCode, 200);
    const streamed = await stream;
    assert.match(streamed.body, /model_unloaded/);
    assert.deepEqual(closes, ["a"]);
    await app.close();
  });
});

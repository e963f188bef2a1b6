/**
 * LoRA adapters end to end (issue 28 item 4): `lmserve serve stories260K --lora a=A.gguf --lora b=B.gguf`
 * with random-weight adapters written by `bench/gguf/syntheticLora.ts`. An adapter changes its base's
 * greedy text and not the text of requests without it; adapters interleaved under concurrency each give
 * their text alone (steps run one adapter set at a time); cached prompt cells never cross adapters;
 * `/v1/load_lora_adapter` and `/v1/unload_lora_adapter` at run time (vLLM's bodies, answers and errors),
 * an unload while a stream runs under the adapter (it finishes); `/v1/models` lists adapters with
 * `parent` and `root`; `vllm:lora_requests_info` parsed as the gateway's LoRA-affinity scorer reads it.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { writeSyntheticLora } from "../../bench/gguf/syntheticLora.ts";
import { defaultModelPath } from "../../src/paths.ts";
import type { ModelObject } from "../../src/protocol/models.ts";
import { readSse, startTestServer, TEST_MODEL, type TestServer } from "../helpers/testServer.ts";

const KEY = "test-key";
const auth = { authorization: `Bearer ${KEY}` };
let dir: string;
let server: TestServer;
const paths: Record<string, string> = {};

type Completion = {
  model: string;
  choices: { text: string; finish_reason: string }[];
  usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
};

/** A greedy completion on `model`; the whole response body. */
async function complete(model: string, prompt = "The little dog", maxTokens = 24): Promise<Completion> {
  const response = await server.post(
    "/v1/completions",
    { model, prompt, max_tokens: maxTokens, temperature: 0 },
    auth,
  );
  assert.equal(response.status, 200, await response.clone().text());
  return (await response.json()) as Completion;
}

const textOf = async (model: string, prompt?: string) => (await complete(model, prompt)).choices[0]?.text;

/** A series of the Prometheus text exposition: its labels and value. */
type Series = { labels: Record<string, string>; value: number };

/** Every series of metric `name` in a `/metrics` scrape (the text format's `name{a="x",b="y"} value` lines). */
async function scrape(name: string): Promise<Series[]> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const series: Series[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const close = line.lastIndexOf("}");
    const labels: Record<string, string> = {};
    for (const match of line.slice(name.length + 1, close).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[match[1] as string] = match[2] as string;
    }
    series.push({ labels, value: Number(line.slice(close + 1).trim()) });
  }
  return series;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "lmserve-lora-"));
  // Strengths and seeds whose greedy texts differ from the base's and each other's while every step's
  // top two candidates stay apart (a margin of at least 0.05 nats over 24 tokens, measured): what shares
  // a batch moves a logit by ~1e-4, which must not flip a near tie.
  for (const [name, seed, std] of [
    ["a", 2, 0.08],
    ["b", 1, 0.08],
    ["c", 4, 0.1],
  ] as const) {
    paths[name] = join(dir, `${name}.gguf`);
    await writeSyntheticLora({ basePath: defaultModelPath, outPath: paths[name], seed, std });
  }
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("LoRA adapters (real server, --lora)", () => {
  before(async () => {
    server = await startTestServer([
      "--lora",
      `a=${paths.a}`,
      "--lora",
      `b=${paths.b}:1`,
      "--max-num-seqs",
      "4",
      "--max-model-len",
      "512",
      "--api-key",
      KEY,
    ]);
  });
  after(async () => {
    await server?.stop();
  });

  it("lists each adapter in /v1/models with its base as parent and its file as root", async () => {
    const response = await fetch(`${server.url}/v1/models`, { headers: auth });
    const models = new Map(((await response.json()) as { data: ModelObject[] }).data.map((m) => [m.id, m]));
    assert.equal(models.get(TEST_MODEL)?.parent, null);
    for (const name of ["a", "b"]) {
      assert.equal(models.get(name)?.parent, TEST_MODEL);
      assert.equal(models.get(name)?.root, paths[name]);
      assert.equal(models.get(name)?.object, "model");
    }
    const one = await fetch(`${server.url}/v1/models/a`, { headers: auth });
    assert.equal(((await one.json()) as ModelObject).parent, TEST_MODEL);
  });

  it("an adapter changes its base's output, and not the output of requests without it", async () => {
    assert.match(
      (await textOf(TEST_MODEL, "Once upon a time")) ?? "",
      /^, there was a little girl named Lily/,
    );
    const base = await textOf(TEST_MODEL);
    const a = await complete("a");
    assert.equal(a.model, "a", "the response names the adapter, as vLLM");
    const b = await textOf("b");
    assert.notEqual(a.choices[0]?.text, base);
    assert.notEqual(b, base);
    assert.notEqual(a.choices[0]?.text, b);
    assert.equal(await textOf(TEST_MODEL), base, "the base's text after adapter requests");
  });

  it("two adapters and the base interleaved under concurrency each give the text they give alone", async () => {
    const prompts = ["Once upon a time", "The little dog", "Lily and Ben"];
    const models = ["a", "b", TEST_MODEL];
    const alone = new Map<string, string | undefined>();
    for (const model of models)
      for (const prompt of prompts) alone.set(`${model}|${prompt}`, await textOf(model, prompt));
    const jobs = prompts.flatMap((prompt) => models.map((model) => ({ model, prompt })));
    const together = await Promise.all([...jobs, ...jobs].map(({ model, prompt }) => textOf(model, prompt)));
    [...jobs, ...jobs].forEach(({ model, prompt }, index) => {
      assert.equal(together[index], alone.get(`${model}|${prompt}`), `${model} on "${prompt}"`);
    });
  });

  it("never reuses cached prompt cells computed under another adapter set", async () => {
    // A first word no earlier prompt has: an adapter's own earlier cells share BOS at most.
    const prompt = `Zebra went to the park. ${"She saw a big red ball and a little dog. ".repeat(8)}`;
    const cachedOf = (completion: Completion) => completion.usage.prompt_tokens_details?.cached_tokens ?? -1;
    const base = await complete(TEST_MODEL, prompt, 2);
    const tokens = base.usage.prompt_tokens;
    assert.ok(tokens > 50, `the prompt has ${tokens} tokens`);
    assert.equal(
      cachedOf(await complete(TEST_MODEL, prompt, 2)),
      tokens - 1,
      "the base reuses its own cells",
    );
    assert.ok(cachedOf(await complete("a", prompt, 2)) <= 1, "adapter a never reuses the base's cells");
    assert.equal(cachedOf(await complete("a", prompt, 2)), tokens - 1, "a reuses its own cells");
    assert.ok(cachedOf(await complete("b", prompt, 2)) <= 1, "b never reuses a's or the base's");
    assert.equal(cachedOf(await complete(TEST_MODEL, prompt, 2)), tokens - 1, "the base's copy survives");
  });

  it("loads and unloads an adapter at run time (vLLM's routes and answers)", async () => {
    const before = await textOf(TEST_MODEL);
    const loaded = await server.post("/v1/load_lora_adapter", { lora_name: "c", lora_path: paths.c }, auth);
    assert.equal(loaded.status, 200);
    assert.equal(await loaded.text(), "Success: LoRA adapter 'c' added successfully.");
    const c = await textOf("c");
    assert.notEqual(c, before);
    assert.notEqual(c, await textOf("a"));
    const listed = (await (await fetch(`${server.url}/v1/models`, { headers: auth })).json()) as {
      data: ModelObject[];
    };
    assert.equal(listed.data.find((model) => model.id === "c")?.parent, TEST_MODEL);

    const unloaded = await server.post("/v1/unload_lora_adapter", { lora_name: "c" }, auth);
    assert.equal(unloaded.status, 200);
    assert.equal(await unloaded.text(), "Success: LoRA adapter 'c' removed successfully.");
    const gone = await server.post("/v1/completions", { model: "c", prompt: "Hi", max_tokens: 2 }, auth);
    assert.equal(gone.status, 404);
    assert.equal(await textOf(TEST_MODEL), before);
    // Loaded again under the same name: the same text (and none of the old adapter's cached cells).
    assert.equal(
      (await server.post("/v1/load_lora_adapter", { lora_name: "c", lora_path: paths.c }, auth)).status,
      200,
    );
    assert.equal(await textOf("c"), c);
    assert.equal((await server.post("/v1/unload_lora_adapter", { lora_name: "c" }, auth)).status, 200);
  });

  it("lets a stream running under an adapter finish when the adapter is unloaded", async () => {
    const load = await server.post("/v1/load_lora_adapter", { lora_name: "d", lora_path: paths.c }, auth);
    assert.equal(load.status, 200);
    const alone = (await complete("d", "Once upon a time", 120)).choices[0]?.text;
    const stream = await server.post(
      "/v1/completions",
      { model: "d", prompt: "Once upon a time", max_tokens: 120, temperature: 0, stream: true },
      auth,
    );
    assert.equal(stream.status, 200);
    const unload = await server.post("/v1/unload_lora_adapter", { lora_name: "d" }, auth);
    assert.equal(unload.status, 200);
    const events = await readSse(stream);
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1) as { choices: { text: string; finish_reason: string | null }[] }[];
    assert.ok(
      chunks.every((chunk) => !("error" in chunk)),
      JSON.stringify(chunks.at(-1)),
    );
    assert.equal(chunks.map((chunk) => chunk.choices[0]?.text ?? "").join(""), alone);
    const after = await server.post("/v1/completions", { model: "d", prompt: "Hi", max_tokens: 2 }, auth);
    assert.equal(after.status, 404);
  });

  it("refuses bad bodies with vLLM's statuses in the documented error shape", async () => {
    const load = (body: unknown, headers: Record<string, string> = auth) =>
      server.post("/v1/load_lora_adapter", body, headers);
    const unload = (body: unknown) => server.post("/v1/unload_lora_adapter", body, auth);
    const expect = async (response: Response, status: number, code: string) => {
      const body = (await response.json()) as { error: { code: string; message: string }; object: string };
      assert.equal(response.status, status, JSON.stringify(body));
      assert.equal(body.error.code, code, JSON.stringify(body));
      assert.equal(body.object, "error");
      return body.error.message;
    };
    assert.equal((await load({ lora_name: "x", lora_path: paths.c }, {})).status, 401);
    assert.match(
      await expect(await load({ lora_name: "x" }), 400, "invalid_value"),
      /Both 'lora_name' and 'lora_path'/,
    );
    await expect(await load({ lora_name: "", lora_path: paths.c }), 400, "invalid_value");
    await expect(await load({ lora_name: 5, lora_path: paths.c }), 422, "validation_error");
    assert.match(
      await expect(await load({ lora_name: "a", lora_path: paths.c }), 400, "invalid_value"),
      /already been loaded/,
    );
    await expect(await load({ lora_name: TEST_MODEL, lora_path: paths.c }), 400, "invalid_value");
    await expect(await load({ lora_name: "x", lora_path: join(dir, "missing.gguf") }), 404, "lora_not_found");
    // The base model's own file is no adapter: llama.cpp's reason comes back.
    assert.match(
      await expect(await load({ lora_name: "x", lora_path: defaultModelPath }), 400, "lora_load_failed"),
      /adapter/,
    );
    await expect(
      await load({ lora_name: "x", lora_path: paths.c, base_model_name: "nope" }),
      404,
      "model_not_found",
    );
    assert.match(await expect(await unload({ lora_name: "nope" }), 404, "lora_not_found"), /cannot be found/);
    await expect(await unload({}), 400, "invalid_value");
    await expect(await unload([1]), 422, "validation_error");
    // Nothing was left loaded by the refusals.
    const listed = (await (await fetch(`${server.url}/v1/models`, { headers: auth })).json()) as {
      data: ModelObject[];
    };
    assert.deepEqual(listed.data.map((model) => model.id).sort(), ["a", "b", TEST_MODEL].sort());
  });

  it("exports vllm:lora_requests_info as vLLM does, parsed as the gateway's LoRA-affinity scorer reads it", async () => {
    await Promise.all([textOf("a"), textOf("b")]);
    const series = await scrape("vllm:lora_requests_info");
    assert.ok(series.length > 0, "the gauge is exported");
    for (const { labels, value } of series) {
      assert.deepEqual(Object.keys(labels), ["max_lora", "waiting_lora_adapters", "running_lora_adapters"]);
      assert.equal(labels.max_lora, "4", "--max-loras defaults to the slots");
      assert.ok(value > 1.7e9 && value <= Date.now() / 1000 + 1, `a Unix time in seconds: ${value}`);
    }
    // The scorer takes the newest series: nothing runs or waits now.
    const newest = series.reduce((latest, entry) => (entry.value > latest.value ? entry : latest));
    assert.equal(newest.labels.running_lora_adapters, "");
    assert.equal(newest.labels.waiting_lora_adapters, "");
    // Earlier series keep the adapters that ran (comma-separated names), with their last time.
    const ran = new Set(series.flatMap((entry) => entry.labels.running_lora_adapters?.split(",") ?? []));
    assert.ok(ran.has("a") && ran.has("b"), [...ran].join(" "));
  });
});

describe("LoRA adapters under --max-loras 1", () => {
  let one: TestServer;
  before(async () => {
    one = await startTestServer(["--lora", `a=${paths.a}`, "--lora", `b=${paths.b}`, "--max-loras", "1"]);
  });
  after(async () => {
    await one?.stop();
  });

  it("runs one adapter at a time, each request giving its text alone, and says max_lora 1", async () => {
    const text = async (model: string) => {
      const response = await one.post("/v1/completions", {
        model,
        prompt: "The little dog",
        max_tokens: 24,
        temperature: 0,
      });
      assert.equal(response.status, 200);
      return ((await response.json()) as Completion).choices[0]?.text;
    };
    const alone = { a: await text("a"), b: await text("b"), base: await text(TEST_MODEL) };
    const models = ["a", "b", TEST_MODEL, "b", "a", TEST_MODEL];
    const together = await Promise.all(models.map(text));
    models.forEach((model, index) => {
      assert.equal(together[index], model === TEST_MODEL ? alone.base : alone[model as "a" | "b"], model);
    });
    const metrics = await (await fetch(`${one.url}/metrics`)).text();
    assert.match(metrics, /^vllm:lora_requests_info\{max_lora="1",/m);
  });
});

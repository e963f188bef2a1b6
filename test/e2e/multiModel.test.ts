/**
 * Several models in one server, each with its own settings and slot pool: from a `--config` YAML file
 * (per-model max-model-len, max-num-seqs, served names, chat template; command-line flags win over the
 * file), and from several MODEL arguments. stories260K is served twice under different names.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import OpenAI from "openai";
import { defaultModelPath } from "../../src/paths.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

type Model = { id: string; root: string; max_model_len: number };

describe("multi-model from a config file", () => {
  let config: string;
  before(() => {
    const dir = mkdtempSync(join(tmpdir(), "lmserve-multi-"));
    const template = join(dir, "plain.jinja");
    writeFileSync(template, "{% for message in messages %}{{ message.content }}{% endfor %}");
    config = join(dir, "lmserve.yaml");
    writeFileSync(
      config,
      [
        "port: 9 # the command line's --port 0 wins",
        "max-num-seqs: 3",
        "api-key: file-key",
        "models:",
        `  - model: ${defaultModelPath}`,
        "    served-model-name: [story-a, alias-a]",
        "    max-model-len: 256",
        "    max-num-seqs: 1",
        `  - model: ${defaultModelPath}`,
        "    served-model-name: story-b",
        "    max-model-len: 512",
        `    chat-template: ${template}`,
        "",
      ].join("\n"),
    );
  });
  const server = useTestServer(() => ["--config", config], { exitCode: 0 });
  // The file's api-key: the helper's client has none.
  let client: OpenAI;
  before(() => {
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "file-key", maxRetries: 0 });
  });

  it("lists every served name with its own context length", async () => {
    const models = (await client.models.list()).data as unknown as Model[];
    const byId = Object.fromEntries(models.map((model) => [model.id, model]));
    assert.deepEqual(Object.keys(byId).sort(), ["alias-a", "story-a", "story-b"]);
    assert.equal(byId["story-a"]?.max_model_len, 256);
    assert.equal(byId["alias-a"]?.root, "story-a");
    assert.equal(byId["story-b"]?.max_model_len, 512);
  });

  it("serves each name, with the same weights giving the same greedy text", async () => {
    const texts: string[] = [];
    for (const model of ["alias-a", "story-b"]) {
      const completion = await client.completions.create({
        model,
        prompt: "Once upon a time",
        max_tokens: 16,
        temperature: 0,
      });
      assert.equal(completion.model, model);
      texts.push(completion.choices[0]?.text ?? "");
    }
    assert.ok(texts[0]?.startsWith(", there was"), texts[0]);
    assert.equal(texts[0], texts[1]);
  });

  it("applies each model's own max-model-len", async () => {
    await assert.rejects(
      client.completions.create({ model: "story-a", prompt: "Once", max_tokens: 300 }),
      (error: unknown) => error instanceof OpenAI.BadRequestError && /256/.test(error.message),
    );
    const fits = await client.completions.create({
      model: "story-b",
      prompt: "Once",
      max_tokens: 300,
    });
    assert.ok((fits.usage?.completion_tokens ?? 0) > 0);
  });

  it("applies each model's own chat template", async () => {
    const messages = [{ role: "user", content: "Once upon a time" }];
    const tokenize = async (body: object) =>
      (
        (await (await server.post("/tokenize", body, { authorization: "Bearer file-key" })).json()) as {
          count: number;
        }
      ).count;
    const plain = await tokenize({ model: "story-b", prompt: "Once upon a time", add_special_tokens: false });
    assert.equal(await tokenize({ model: "story-b", messages }), plain, "story-b renders only the content");
    assert.ok((await tokenize({ model: "story-a", messages })) > plain, "story-a renders ChatML");
  });

  it("loads each model with its own slot count: the entry's, else the file's over the CLI default", () => {
    const loaded = server.logs.filter((line) => line.msg === "model loaded");
    assert.deepEqual(
      loaded.map((line) => [line.model, line.slots, line.contextSize]),
      [
        ["story-a", 1, 256],
        ["story-b", 3, 512],
      ],
    );
  });

  it("gives each model its own slot pool (one scheduler per model)", async () => {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    for (const model of ["story-a", "story-b"]) {
      assert.match(metrics, new RegExp(`vllm:num_requests_running\\{model_name="${model}"\\} 0`));
    }
    const results = await Promise.all(
      ["story-a", "story-a", "story-b", "story-b", "story-b"].map((model) =>
        client.completions.create({ model, prompt: "The dog", max_tokens: 8 }),
      ),
    );
    assert.deepEqual(
      results.map((result) => result.usage?.completion_tokens),
      [8, 8, 8, 8, 8],
    );
  });
});

describe("multi-model from MODEL arguments", () => {
  const server = useTestServer(
    [defaultModelPath, defaultModelPath, "--served-model-name", "first", "second"],
    {
      exitCode: 0,
    },
  );

  it("serves one model per argument, named in order", async () => {
    const models = (await server.client.models.list()).data.map((model) => model.id).sort();
    assert.deepEqual(models, ["first", "second"]);
    for (const model of models) {
      const chat = await server.client.chat.completions.create({
        model,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 3,
      });
      assert.equal(chat.model, model);
      assert.equal(chat.usage?.completion_tokens, 3);
    }
  });
});

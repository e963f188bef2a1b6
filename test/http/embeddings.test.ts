/**
 * POST /v1/embeddings in-process on the fake engine (its pooled vector is [1, 2, 2, 0], so every
 * embedding normalized is [1/3, 2/3, 2/3, 0]): the four input forms, base64 output, and the 400 / 422 answers.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { ModelRegistry } from "../../src/serving/ModelRegistry.ts";
import { SeedSource } from "../../src/serving/request/generationParams.ts";
import { useFakeApp, withFakeApp } from "../helpers/fakeApp.ts";
import { FakeEngine, fakeDetokenize } from "../helpers/fakeEngine.ts";

type EmbeddingList = {
  object: string;
  model: string;
  data: { object: string; index: number; embedding: number[] | string }[];
  usage: { prompt_tokens: number; total_tokens: number };
};

/** The fake engine's embedding, L2-normalized, rounded to float32 as the server computes it. */
const UNIT = Array.from(Float32Array.of(1 / 3, 2 / 3, 2 / 3, 0));

describe("POST /v1/embeddings (in-process, fake engine)", () => {
  const fake = useFakeApp();

  for (const [form, input, prompts] of [
    ["a string", "abc", ["abc"]],
    ["strings", ["abc", "de"], ["abc", "de"]],
    ["token ids", [97, 98], ["ab"]],
    ["lists of token ids", [[97], [98, 99]], ["a", "bc"]],
  ] as const) {
    it(`embeds ${form}: one normalized vector per input, in order, with the prompt tokens`, async () => {
      const before = fake.engine.submitted.length;
      const response = await fake.post("/v1/embeddings", { model: "fake-model", input });
      assert.equal(response.statusCode, 200);
      const body = response.json() as EmbeddingList;
      assert.equal(body.object, "list");
      assert.equal(body.model, "fake-model");
      assert.deepEqual(
        body.data.map((item) => [item.object, item.index]),
        prompts.map((_, index) => ["embedding", index]),
      );
      for (const item of body.data) assert.deepEqual(item.embedding, UNIT);
      const submitted = fake.engine.submitted.slice(before);
      assert.ok(submitted.every((request) => request.embed));
      assert.deepEqual(
        submitted.map((request) => fakeDetokenize(request.promptTokens)).sort(),
        [...prompts].sort(),
      );
      const tokens = prompts.reduce((sum, prompt) => sum + prompt.length, 0);
      assert.deepEqual(body.usage, { prompt_tokens: tokens, total_tokens: tokens });
    });
  }

  it("encodes each vector as base64 little-endian float32 under encoding_format: base64", async () => {
    const response = await fake.post("/v1/embeddings", { input: ["abc", "d"], encoding_format: "base64" });
    assert.equal(response.statusCode, 200);
    const body = response.json() as EmbeddingList;
    assert.equal(body.data.length, 2);
    for (const item of body.data) {
      assert.equal(typeof item.embedding, "string");
      const bytes = Buffer.from(item.embedding as string, "base64");
      assert.equal(bytes.length, 4 * UNIT.length);
      const floats = Array.from({ length: UNIT.length }, (_, k) => bytes.readFloatLE(4 * k));
      assert.deepEqual(floats, UNIT);
    }
  });

  it("400 naming input for an empty input and a token outside the vocabulary, and dimensions it cannot give", async () => {
    for (const [payload, param, message] of [
      [{ input: "" }, "input", /empty/],
      [{ input: [] }, "input", /empty/],
      [{ input: [300] }, "input[0]", /300.*outside the vocabulary/],
      [{ input: "abc", dimensions: 2 }, "dimensions", /4 dimensions/],
    ] as const) {
      const response = await fake.post("/v1/embeddings", payload);
      assert.equal(response.statusCode, 400, JSON.stringify(payload));
      const body = response.json() as ErrorBody;
      assert.equal(body.error.type, "invalid_request_error");
      assert.equal(body.error.param, param);
      assert.match(body.message, message);
    }
  });

  it("dimensions on a model declared Matryoshka: the prefix renormalised, and a 400 naming the widths it gives", async () => {
    const registry = new ModelRegistry<FakeEngine>();
    registry.add(new FakeEngine(), { matryoshkaDimensions: [2, 3, 9] });
    await withFakeApp({ registry, seeds: new SeedSource(0), isReady: () => true }, async (app) => {
      const post = (payload: object) => app.inject({ method: "POST", url: "/v1/embeddings", payload });
      for (const [dimensions, expected] of [
        [2, [1 / Math.sqrt(5), 2 / Math.sqrt(5)]],
        [3, [1 / 3, 2 / 3, 2 / 3]],
        [4, [1 / 3, 2 / 3, 2 / 3, 0]],
      ] as const) {
        const response = await post({ input: ["abc", "de"], dimensions });
        assert.equal(response.statusCode, 200, response.body);
        for (const item of (response.json() as EmbeddingList).data)
          assert.deepEqual(item.embedding, Array.from(Float32Array.from(expected)));
      }
      const base64 = await post({ input: "abc", dimensions: 2, encoding_format: "base64" });
      const bytes = Buffer.from((base64.json() as EmbeddingList).data[0]?.embedding as string, "base64");
      assert.equal(bytes.length, 8);
      for (const dimensions of [1, 5, 9]) {
        const refused = await post({ input: "abc", dimensions });
        assert.equal(refused.statusCode, 400);
        const body = refused.json() as ErrorBody;
        assert.equal(body.error.param, "dimensions");
        assert.match(body.message, new RegExp(`2, 3, 4 dimensions, not ${dimensions}`));
      }
    });
  });

  it("422 with FastAPI's detail for an unknown encoding_format or an input of the wrong type", async () => {
    for (const [payload, field] of [
      [{ input: "abc", encoding_format: "hex" }, "encoding_format"],
      [{ input: { text: "abc" } }, "input"],
    ] as const) {
      const response = await fake.post("/v1/embeddings", payload);
      assert.equal(response.statusCode, 422, JSON.stringify(payload));
      assert.deepEqual((response.json() as ErrorBody).detail?.[0]?.loc, ["body", field]);
    }
  });
});

/**
 * Encoder-only models end to end: random-weight `bert` GGUFs written by the project's GGUF writer from
 * llama.cpp's real bge tokenizer (an embedding model with cls pooling, and a cross-encoder reranker with
 * a classification head), served beside stories260K. Embeddings (shape, norm, order, base64, batch equal
 * to one by one, determinism, the 400s), every rerank and score route through plain HTTP (top_n,
 * return_documents, sort order, the 400s), the task checks, and both beside a running generation stream.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { before, describe, it } from "node:test";
import { writeSyntheticEncoder } from "../../bench/gguf/syntheticEncoder.ts";
import { projectRoot } from "../../src/paths.ts";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const VOCAB = resolve(projectRoot, "native/build/llama.cpp/models/ggml-vocab-bert-bge.gguf");
const SHAPE = { hidden: 64, layers: 2, heads: 4, ffn: 128, context: 128 };
const WIDTH = 64;

function norm(vector: number[]): number {
  return Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
}

function cosine(a: number[], b: number[]): number {
  return a.reduce((sum, value, index) => sum + value * (b[index] as number), 0) / (norm(a) * norm(b));
}

describe("encoder models (bert embeddings, cross-encoder rerank)", { skip: !existsSync(VOCAB) }, () => {
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "lmserve-encoders-"));
    await writeSyntheticEncoder({
      shape: SHAPE,
      vocabPath: VOCAB,
      outPath: join(dir, "bge-tiny.gguf"),
      seed: 1,
    });
    await writeSyntheticEncoder({
      shape: SHAPE,
      vocabPath: VOCAB,
      outPath: join(dir, "reranker-tiny.gguf"),
      seed: 2,
      rerank: true,
    });
  });
  const server = useTestServer(() => [
    resolve(projectRoot, "../shared/models/stories260K.gguf"),
    join(dir, "bge-tiny.gguf"),
    join(dir, "reranker-tiny.gguf"),
    "--max-num-seqs",
    "2",
    "--matryoshka-dimensions",
    "16,32",
  ]);

  it("lists each model's task", async () => {
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {
      data: { id: string; capabilities: { task: string } }[];
    };
    const task = (id: string) => models.data.find((model) => model.id === id)?.capabilities.task;
    assert.equal(task(TEST_MODEL), "generate");
    assert.equal(task("bge-tiny"), "embed");
    assert.equal(task("reranker-tiny"), "rerank");
  });

  it("embeds: unit vectors in order, usage, batch equal to one by one, deterministic, base64", async () => {
    const inputs = [
      "hello world",
      "the quick brown fox jumps over the lazy dog",
      "a",
      "embeddings are vectors",
    ];
    const batch = await server.client.embeddings.create({ model: "bge-tiny", input: inputs });
    assert.deepEqual(
      batch.data.map((entry) => entry.index),
      [0, 1, 2, 3],
    );
    assert.ok(batch.usage.prompt_tokens >= inputs.length * 3, `usage ${batch.usage.prompt_tokens}`);
    for (const [index, entry] of batch.data.entries()) {
      assert.equal(entry.embedding.length, WIDTH);
      assert.ok(Math.abs(norm(entry.embedding) - 1) < 1e-5, `norm ${norm(entry.embedding)}`);
      const alone = await server.client.embeddings.create({
        model: "bge-tiny",
        input: inputs[index] as string,
      });
      const same = cosine(alone.data[0]?.embedding as number[], entry.embedding);
      assert.ok(same > 0.99999, `input ${index}: cosine ${same} alone against in the batch`);
    }
    const distinct = cosine(batch.data[0]?.embedding as number[], batch.data[1]?.embedding as number[]);
    assert.ok(distinct < 0.999999, `two inputs gave one vector (cosine ${distinct})`);
    const again = await server.client.embeddings.create({ model: "bge-tiny", input: inputs });
    assert.deepEqual(
      again.data.map((entry) => entry.embedding),
      batch.data.map((entry) => entry.embedding),
    );
    const response = await server.post("/v1/embeddings", {
      model: "bge-tiny",
      input: "hello world",
      encoding_format: "base64",
    });
    const body = (await response.json()) as { data: { embedding: string }[] };
    const bytes = Buffer.from(body.data[0]?.embedding as string, "base64");
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
    assert.ok(cosine(decoded, batch.data[0]?.embedding as number[]) > 0.99999);
  });

  it("shortens to a declared Matryoshka width: the full vector's prefix renormalised, unit length; other widths a 400", async () => {
    const input = ["the quick brown fox", "matryoshka dolls nest"];
    const full = await server.client.embeddings.create({ model: "bge-tiny", input });
    for (const dimensions of [16, 32, WIDTH]) {
      const short = await server.client.embeddings.create({ model: "bge-tiny", input, dimensions });
      for (const [index, entry] of short.data.entries()) {
        assert.equal(entry.embedding.length, dimensions);
        assert.ok(Math.abs(norm(entry.embedding) - 1) < 1e-5, `norm ${norm(entry.embedding)}`);
        const prefix = (full.data[index] as { embedding: number[] }).embedding.slice(0, dimensions);
        const scale = norm(prefix);
        for (const [k, value] of entry.embedding.entries())
          assert.ok(Math.abs(value - (prefix[k] as number) / scale) < 1e-6, `[${k}] ${value}`);
      }
    }
    const refused = await server.post("/v1/embeddings", { model: "bge-tiny", input: "a", dimensions: 20 });
    assert.equal(refused.status, 400);
    const error = ((await refused.json()) as { error: { message: string; param: string } }).error;
    assert.equal(error.param, "dimensions");
    assert.match(error.message, /16, 32, 64 dimensions, not 20/);
  });

  it("refuses an input longer than the window, with the numbers, and generation on an embedding model", async () => {
    const long = await server.post("/v1/embeddings", { model: "bge-tiny", input: "word ".repeat(400) });
    assert.equal(long.status, 400);
    assert.match(((await long.json()) as { error: { message: string } }).error.message, /\d+ tokens.*128/);
    const chat = await server.post("/v1/chat/completions", {
      model: "bge-tiny",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(chat.status, 400);
    assert.match(((await chat.json()) as { error: { message: string } }).error.message, /generation/);
    const completion = await server.post("/v1/completions", { model: "reranker-tiny", prompt: "hi" });
    assert.equal(completion.status, 400);
    const embedReranker = await server.post("/v1/embeddings", { model: "reranker-tiny", input: "hi" });
    assert.equal(embedReranker.status, 400);
  });

  const documents = ["paris is the capital of france", "bananas are yellow", "the eiffel tower", "tokyo"];

  it("reranks on every route: sorted scores with indices, top_n, return_documents, usage", async () => {
    let reference: { index: number; relevance_score: number }[] | undefined;
    for (const path of ["/v1/rerank", "/rerank", "/v2/rerank"]) {
      const response = await server.post(path, {
        model: "reranker-tiny",
        query: "capital of france",
        documents: [documents[0], { text: documents[1] }, documents[2], documents[3]],
      });
      assert.equal(response.status, 200, path);
      const body = (await response.json()) as {
        results: { index: number; relevance_score: number; document?: unknown }[];
        usage: { prompt_tokens: number };
        meta?: unknown;
      };
      assert.equal(body.results.length, 4);
      assert.deepEqual(body.results.map((entry) => entry.index).sort(), [0, 1, 2, 3]);
      for (let i = 1; i < body.results.length; i++) {
        assert.ok(
          (body.results[i - 1]?.relevance_score as number) >= (body.results[i]?.relevance_score as number),
        );
      }
      assert.equal(body.results[0]?.document, undefined);
      assert.ok(body.usage.prompt_tokens > 8);
      assert.equal(body.meta !== undefined, path === "/v2/rerank");
      if (reference) assert.deepEqual(body.results, reference);
      reference = body.results;
    }
    const top = await server.post("/v1/rerank", {
      model: "reranker-tiny",
      query: "capital of france",
      documents,
      top_n: 2,
      return_documents: true,
    });
    const topBody = (await top.json()) as {
      results: { index: number; relevance_score: number; document: { text: string } }[];
    };
    assert.equal(topBody.results.length, 2);
    assert.deepEqual(
      topBody.results.map(({ index, relevance_score }) => ({ index, relevance_score })),
      reference?.slice(0, 2),
    );
    for (const entry of topBody.results) assert.equal(entry.document.text, documents[entry.index]);
    // One document alone scores what it scored among the others.
    const alone = await server.post("/rerank", {
      model: "reranker-tiny",
      query: "capital of france",
      documents: [documents[2]],
    });
    const aloneScore = ((await alone.json()) as { results: { relevance_score: number }[] }).results[0]
      ?.relevance_score as number;
    assert.ok(
      Math.abs(aloneScore - (reference?.find((entry) => entry.index === 2)?.relevance_score as number)) <
        1e-4,
    );
  });

  it("scores text_1 against one or many text_2 (vLLM), and refuses the bad ones", async () => {
    for (const path of ["/score", "/v1/score"]) {
      const response = await server.post(path, {
        model: "reranker-tiny",
        text_1: "capital of france",
        text_2: documents,
      });
      assert.equal(response.status, 200);
      const body = (await response.json()) as { data: { index: number; object: string; score: number }[] };
      assert.deepEqual(
        body.data.map((entry) => entry.index),
        [0, 1, 2, 3],
      );
      assert.ok(body.data.every((entry) => entry.object === "score" && Number.isFinite(entry.score)));
    }
    const one = await server.post("/score", { model: "reranker-tiny", text_1: "a", text_2: "b" });
    assert.equal(((await one.json()) as { data: unknown[] }).data.length, 1);
    const empty = await server.post("/v1/rerank", { model: "reranker-tiny", query: "q", documents: [] });
    assert.equal(empty.status, 400);
    const wrongKind = await server.post("/v1/rerank", { model: "bge-tiny", query: "q", documents: ["d"] });
    assert.equal(wrongKind.status, 400);
    assert.match(((await wrongKind.json()) as { error: { message: string } }).error.message, /reranker/);
    const onDecoder = await server.post("/score", { model: TEST_MODEL, text_1: "q", text_2: "d" });
    assert.equal(onDecoder.status, 400);
    const tooLong = await server.post("/v1/rerank", {
      model: "reranker-tiny",
      query: "q",
      documents: ["word ".repeat(400)],
    });
    assert.equal(tooLong.status, 400);
    assert.match(
      ((await tooLong.json()) as { error: { message: string } }).error.message,
      /documents\[0\].*128/,
    );
  });

  it("embeds and reranks beside a running generation stream on another model", async () => {
    const stream = await server.client.completions.create({
      model: TEST_MODEL,
      prompt: "Once upon a time",
      max_tokens: 200,
      stream: true,
      ignore_eos: true,
    } as never);
    let text = "";
    let side = false;
    for await (const chunk of stream as unknown as AsyncIterable<{ choices: { text: string }[] }>) {
      text += chunk.choices[0]?.text ?? "";
      if (!side) {
        side = true;
        const [embedding, rerank] = await Promise.all([
          server.client.embeddings.create({ model: "bge-tiny", input: ["hello world", "tokyo"] }),
          server.post("/v1/rerank", { model: "reranker-tiny", query: "q", documents }),
        ]);
        assert.equal(embedding.data.length, 2);
        assert.equal(rerank.status, 200);
      }
    }
    assert.ok(side);
    assert.ok(text.length > 0);
  });
});

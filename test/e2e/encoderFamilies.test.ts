/**
 * Encoder families beyond `bert`, end to end: random-weight GGUFs written by the project's GGUF writer
 * as llama.cpp's `nomic-bert` (rotary positions, fused QKV, SwiGLU; over the XLM-RoBERTa sentencepiece
 * tokenizer of nomic-embed-text-v2's vocabulary), `nomic-bert-moe` (nomic-embed-text-v2-moe: the same
 * attention, GELU FFNs and a mixture-of-experts layer every second layer; same tokenizer) and `jina-bert-v2` (ALiBi, GEGLU; over the bge
 * WordPiece tokenizer), an embedding model of each and a jina-reranker-v1-style reranker (one-row `cls`
 * head). Each loads, reports its task and pooling in `/v1/models`, and serves: unit vectors of the
 * model's width, a batch equal to one by one, word order that changes the vector (the positions are
 * in effect), and the Jina (`/v1/rerank`) and Cohere (`/v2/rerank`) rerank shapes.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { before, describe, it } from "node:test";
import { writeSyntheticEncoder } from "../../bench/gguf/syntheticEncoder.ts";
import { projectRoot } from "../../src/paths.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const MODELS = resolve(projectRoot, "native/build/llama.cpp/models");
const BGE_VOCAB = join(MODELS, "ggml-vocab-bert-bge.gguf");
const NOMIC_VOCAB = join(MODELS, "ggml-vocab-nomic-bert-moe.gguf");
/** nomic's vocabulary has 250k tokens: a narrow model keeps its embedding table at 32 MB. */
const NOMIC_SHAPE = { hidden: 32, layers: 2, heads: 4, ffn: 64, context: 128 };
const JINA_SHAPE = { hidden: 64, layers: 2, heads: 4, ffn: 128, context: 128 };
/**
 * The embedding models' weight spread: at the writer's default 0.02 attention is near uniform and word
 * order moves a vector by under 1e-7; at 0.3 it moves it by a cosine of 0.93 (nomic) and 0.993 (jina).
 */
const STD = 0.3;

function norm(vector: number[]): number {
  return Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
}

function cosine(a: number[], b: number[]): number {
  return a.reduce((sum, value, index) => sum + value * (b[index] as number), 0) / (norm(a) * norm(b));
}

describe("encoder families: nomic-bert, nomic-bert-moe and jina-bert-v2", {
  skip: !existsSync(BGE_VOCAB) || !existsSync(NOMIC_VOCAB),
}, () => {
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "lmserve-encoder-families-"));
    await writeSyntheticEncoder({
      architecture: "nomic-bert",
      shape: NOMIC_SHAPE,
      vocabPath: NOMIC_VOCAB,
      outPath: join(dir, "nomic-tiny.gguf"),
      seed: 11,
      std: STD,
    });
    await writeSyntheticEncoder({
      architecture: "nomic-bert-moe",
      shape: { ...NOMIC_SHAPE, experts: 4, expertsUsed: 2, moeEvery: 2 },
      vocabPath: NOMIC_VOCAB,
      outPath: join(dir, "nomic-moe-tiny.gguf"),
      seed: 14,
      std: STD,
    });
    await writeSyntheticEncoder({
      architecture: "jina-bert-v2",
      shape: JINA_SHAPE,
      vocabPath: BGE_VOCAB,
      outPath: join(dir, "jina-tiny.gguf"),
      seed: 12,
      std: STD,
    });
    await writeSyntheticEncoder({
      architecture: "jina-bert-v2",
      shape: JINA_SHAPE,
      vocabPath: BGE_VOCAB,
      outPath: join(dir, "jina-reranker-tiny.gguf"),
      seed: 13,
      rerank: true,
    });
  });
  const server = useTestServer(() => [
    join(dir, "nomic-tiny.gguf"),
    join(dir, "nomic-moe-tiny.gguf"),
    join(dir, "jina-tiny.gguf"),
    join(dir, "jina-reranker-tiny.gguf"),
  ]);

  it("lists each model's task and pooling", async () => {
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {
      data: { id: string; capabilities: { task: string; pooling: string } }[];
    };
    const capabilities = (id: string) => models.data.find((model) => model.id === id)?.capabilities;
    assert.deepEqual(capabilities("nomic-tiny"), { vision: false, task: "embed", pooling: "mean" });
    assert.deepEqual(capabilities("nomic-moe-tiny"), { vision: false, task: "embed", pooling: "mean" });
    assert.deepEqual(capabilities("jina-tiny"), { vision: false, task: "embed", pooling: "mean" });
    assert.deepEqual(capabilities("jina-reranker-tiny"), { vision: false, task: "rerank", pooling: "rank" });
  });

  for (const [model, width] of [
    ["nomic-tiny", NOMIC_SHAPE.hidden],
    ["nomic-moe-tiny", NOMIC_SHAPE.hidden],
    ["jina-tiny", JINA_SHAPE.hidden],
  ] as const) {
    it(`${model}: unit vectors of width ${width}, a batch equal to one by one, word order matters`, async () => {
      const inputs = [
        "hello world",
        "naïve café in Zürich",
        "a",
        "the dog bites the man",
        "the man bites the dog",
      ];
      const batch = await server.client.embeddings.create({ model, input: inputs });
      assert.deepEqual(
        batch.data.map((entry) => entry.index),
        [0, 1, 2, 3, 4],
      );
      assert.ok(batch.usage.prompt_tokens >= inputs.length * 3, `usage ${batch.usage.prompt_tokens}`);
      for (const [index, entry] of batch.data.entries()) {
        assert.equal(entry.embedding.length, width);
        assert.ok(Math.abs(norm(entry.embedding) - 1) < 1e-5, `norm ${norm(entry.embedding)}`);
        const alone = await server.client.embeddings.create({ model, input: inputs[index] as string });
        const same = cosine(alone.data[0]?.embedding as number[], entry.embedding);
        assert.ok(same > 0.99999, `input ${index}: cosine ${same} alone against in the batch`);
      }
      // Without positions, attention and mean pooling would not see word order: these two would be one vector.
      const order = cosine(batch.data[3]?.embedding as number[], batch.data[4]?.embedding as number[]);
      assert.ok(order < 0.9999, `word order changed nothing (cosine ${order})`);
      const long = await server.post("/v1/embeddings", { model, input: "word ".repeat(400) });
      assert.equal(long.status, 400);
    });
  }

  const documents = ["paris is the capital of france", "bananas are yellow", "the eiffel tower", "tokyo"];

  it("jina-reranker-tiny reranks in Jina's shape (/v1/rerank) and Cohere's (/v2/rerank)", async () => {
    const jina = await server.post("/v1/rerank", {
      model: "jina-reranker-tiny",
      query: "capital of france",
      documents,
      top_n: 3,
      return_documents: true,
    });
    assert.equal(jina.status, 200);
    const jinaBody = (await jina.json()) as {
      results: { index: number; relevance_score: number; document: { text: string } }[];
      usage: { total_tokens: number };
    };
    assert.equal(jinaBody.results.length, 3);
    for (let i = 1; i < jinaBody.results.length; i++) {
      assert.ok(
        (jinaBody.results[i - 1]?.relevance_score as number) >=
          (jinaBody.results[i]?.relevance_score as number),
      );
    }
    for (const entry of jinaBody.results) assert.equal(entry.document.text, documents[entry.index]);
    assert.ok(jinaBody.usage.total_tokens > 8);
    const cohere = await server.post("/v2/rerank", {
      model: "jina-reranker-tiny",
      query: "capital of france",
      documents,
    });
    const cohereBody = (await cohere.json()) as {
      results: { index: number; relevance_score: number }[];
      meta: unknown;
    };
    assert.ok(cohereBody.meta !== undefined);
    assert.deepEqual(
      cohereBody.results.slice(0, 3),
      jinaBody.results.map(({ index, relevance_score }) => ({ index, relevance_score })),
    );
    const scores = new Set(cohereBody.results.map((entry) => entry.relevance_score));
    assert.ok(scores.size > 1, "every document scored the same");
    // One document alone scores what it scored among the others.
    const alone = await server.post("/v1/rerank", {
      model: "jina-reranker-tiny",
      query: "capital of france",
      documents: [documents[1]],
    });
    const aloneScore = ((await alone.json()) as { results: { relevance_score: number }[] }).results[0]
      ?.relevance_score as number;
    const inBatch = cohereBody.results.find((entry) => entry.index === 1)?.relevance_score as number;
    assert.ok(Math.abs(aloneScore - inBatch) < 1e-4, `${aloneScore} alone, ${inBatch} among others`);
    const embedOnReranker = await server.post("/v1/embeddings", { model: "jina-reranker-tiny", input: "hi" });
    assert.equal(embedOnReranker.status, 400);
  });
});

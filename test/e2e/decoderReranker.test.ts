/**
 * A decoder reranker (Qwen3-Reranker as llama.cpp converts one: arch qwen3, rank pooling, a two-row
 * `cls.output` head, the `tokenizer.chat_template.rerank` prompt) written with random weights by the
 * project's GGUF writer from the qwen2 tokenizer: listed as a reranker, reranked on /v1/rerank with
 * scores in (0, 1) (the softmax's "yes"), and those scores equal llama-server's `--rerank` on the same
 * file when its binary is at hand (`LLAMA_SERVER`, else bench/.peer/build/bin/llama-server).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { before, describe, it } from "node:test";
import { writeSyntheticModel } from "../../bench/gguf/syntheticModel.ts";
import { projectRoot } from "../../src/paths.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const VOCAB = resolve(projectRoot, "../shared/models/ggml-vocab-qwen2.gguf");
const LLAMA_SERVER = process.env.LLAMA_SERVER ?? resolve(projectRoot, "bench/.peer/build/bin/llama-server");

type RerankBody = {
  results: { index: number; relevance_score: number; document?: { text: string } }[];
  usage?: { prompt_tokens: number };
};

const query = "what is the capital of france";
const documents = ["paris is the capital of france", "bananas are yellow", "tokyo", "the eiffel tower"];

describe("decoder reranker (qwen3, rank pooling, rerank prompt)", { skip: !existsSync(VOCAB) }, () => {
  let modelPath: string;
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), "lmserve-qwen3-rerank-"));
    modelPath = join(dir, "qwen3-reranker-tiny.gguf");
    await writeSyntheticModel({
      shape: { arch: "qwen3", hidden: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 128, context: 512 },
      vocabPath: VOCAB,
      outPath: modelPath,
      weightType: "f32",
      seed: 3,
      std: 0.2,
      rerank: true,
    });
  });
  const server = useTestServer(() => [modelPath, "--max-model-len", "512"]);

  it("is listed as a reranker and refuses generation", async () => {
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {
      data: { id: string; capabilities: { task: string } }[];
    };
    assert.equal(models.data[0]?.capabilities.task, "rerank");
    const chat = await server.post("/v1/chat/completions", {
      model: "qwen3-reranker-tiny",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(chat.status, 400);
  });

  it("reranks with the GGUF's prompt: probabilities sorted, top_n, return_documents, usage", async () => {
    const response = await server.post("/v1/rerank", {
      model: "qwen3-reranker-tiny",
      query,
      documents,
      return_documents: true,
    });
    assert.equal(response.status, 200);
    const body = (await response.json()) as RerankBody;
    assert.deepEqual(body.results.map((r) => r.index).sort(), [0, 1, 2, 3]);
    for (const [k, result] of body.results.entries()) {
      assert.ok(result.relevance_score > 0 && result.relevance_score < 1, `score ${result.relevance_score}`);
      assert.equal(result.document?.text, documents[result.index]);
      if (k > 0) assert.ok((body.results[k - 1]?.relevance_score as number) >= result.relevance_score);
    }
    // The rerank prompt (system, instruct, query, document, assistant think block) is far longer than the texts.
    assert.ok((body.usage?.prompt_tokens ?? 0) > 4 * 40, `usage ${body.usage?.prompt_tokens}`);
    const top = (await (
      await server.post("/v1/rerank", { model: "qwen3-reranker-tiny", query, documents, top_n: 2 })
    ).json()) as RerankBody;
    assert.deepEqual(
      top.results,
      body.results.slice(0, 2).map(({ index, relevance_score }) => ({ index, relevance_score })),
    );
  });

  it("gives llama-server --rerank's scores on the same file", {
    skip: !existsSync(LLAMA_SERVER),
  }, async () => {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const peer: ChildProcess = spawn(
      LLAMA_SERVER,
      ["-m", modelPath, "--rerank", "--port", String(port), "-t", "1", "-c", "2048", "-np", "1"],
      { stdio: "ignore" },
    );
    try {
      let answer: RerankBody | undefined;
      for (let attempt = 0; attempt < 600 && !answer; attempt++) {
        try {
          const peerResponse = await fetch(`http://127.0.0.1:${port}/v1/rerank`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ query, documents }),
          });
          if (peerResponse.status === 200) answer = (await peerResponse.json()) as RerankBody;
        } catch {
          // not listening yet
        }
        if (!answer) await new Promise((done) => setTimeout(done, 100));
      }
      assert.ok(answer, "llama-server did not answer");
      const ours = (await (
        await server.post("/v1/rerank", { model: "qwen3-reranker-tiny", query, documents })
      ).json()) as RerankBody;
      for (const theirs of answer.results) {
        const mine = ours.results.find((result) => result.index === theirs.index);
        assert.ok(mine, `document ${theirs.index} missing`);
        assert.ok(
          Math.abs(mine.relevance_score - theirs.relevance_score) < 1e-5,
          `document ${theirs.index}: ${mine.relevance_score} against llama-server's ${theirs.relevance_score}`,
        );
      }
    } finally {
      peer.kill();
    }
  });
});

/**
 * Reranking in-process on the fake engine: POST /v1/rerank and /rerank (Jina's and llama-server's
 * shape), /v2/rerank (Cohere's, with `meta`), /score and /v1/score (vLLM's). The fake reranker scores a
 * pair by its token count (query + document, one token per character), so the order is known; the 404,
 * 400, 422 and 503 answers.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { RerankResponse, ScoreResponse } from "../../src/protocol/rerank.ts";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { assertErrorResponse } from "../helpers/apiErrors.ts";
import { useFakeApp, withFakeApp } from "../helpers/fakeApp.ts";
import { FakeEngine, fakeContext, fakeDetokenize } from "../helpers/fakeEngine.ts";

const DOCUMENTS = ["bb", "dddd", "a", "ccc"];

describe("rerank and score (in-process, fake reranker)", () => {
  const reranker = new FakeEngine({ names: ["fake-reranker"], task: "rerank", contextSize: 16 });
  const fake = useFakeApp({ engines: [reranker, new FakeEngine({ names: ["fake-generator"] })] });

  /** Asserts an error body: status, OpenAI type (not_found_error for 404), param, and the message's words. */
  const assertError = (
    response: { statusCode: number; json(): unknown },
    status: number,
    param: string | null,
    message: RegExp,
  ) =>
    assertErrorResponse(
      response,
      status,
      param,
      message,
      status === 404 ? "not_found_error" : "invalid_request_error",
    );

  for (const path of ["/v1/rerank", "/rerank"]) {
    it(`${path}: every document's index and score, best first, the pairs' tokens as usage`, async () => {
      const before = reranker.submitted.length;
      const response = await fake.post(path, { model: "fake-reranker", query: "q", documents: DOCUMENTS });
      assert.equal(response.statusCode, 200, response.body);
      const body = response.json() as RerankResponse;
      assert.match(body.id, /^rerank-[0-9a-f]{32}$/);
      assert.equal(body.model, "fake-reranker");
      assert.equal(body.object, "list");
      assert.deepEqual(body.results, [
        { index: 1, relevance_score: 5 },
        { index: 3, relevance_score: 4 },
        { index: 0, relevance_score: 3 },
        { index: 2, relevance_score: 2 },
      ]);
      assert.deepEqual(body.usage, { prompt_tokens: 14, total_tokens: 14 });
      assert.equal(body.meta, undefined);
      // One rank-pooled input per pair: the query, then the document (the fake adds no special tokens).
      const submitted = reranker.submitted.slice(before);
      assert.ok(submitted.every((request) => request.embed === "rank"));
      assert.deepEqual(
        submitted.map((request) => fakeDetokenize(request.promptTokens)),
        DOCUMENTS.map((document) => `q${document}`),
      );
    });
  }

  it("top_n keeps the best N; return_documents adds each text; documents may be objects with text", async () => {
    const response = await fake.post("/v1/rerank", {
      query: "q",
      documents: [{ text: "bb" }, "dddd", { text: "a", id: "kept-aside" }],
      top_n: 2,
      return_documents: true,
    });
    assert.equal(response.statusCode, 200, response.body);
    const body = response.json() as RerankResponse;
    // `model` absent: the first served model.
    assert.equal(body.model, "fake-reranker");
    assert.deepEqual(body.results, [
      { index: 1, relevance_score: 5, document: { text: "dddd" } },
      { index: 0, relevance_score: 3, document: { text: "bb" } },
    ]);
  });

  it("ties keep the documents' order", async () => {
    const response = await fake.post("/v1/rerank", { query: "q", documents: ["x", "y", "zz"] });
    assert.deepEqual(
      (response.json() as RerankResponse).results.map((result) => result.index),
      [2, 0, 1],
    );
  });

  it("/v2/rerank: Cohere's meta (one search unit, the input tokens)", async () => {
    const response = await fake.post("/v2/rerank", {
      model: "fake-reranker",
      query: "q",
      documents: ["bb", "a"],
      max_tokens_per_doc: 512,
    });
    assert.equal(response.statusCode, 200, response.body);
    const body = response.json() as RerankResponse;
    assert.deepEqual(body.meta, { billed_units: { search_units: 1 }, tokens: { input_tokens: 5 } });
    assert.deepEqual(body.usage, { prompt_tokens: 5, total_tokens: 5 });
  });

  for (const path of ["/score", "/v1/score"]) {
    it(`${path}: text_1 against each text_2, or pairwise, one score per pair in order`, async () => {
      const one = await fake.post(path, { model: "fake-reranker", text_1: "q", text_2: ["bb", "a", "ccc"] });
      assert.equal(one.statusCode, 200, one.body);
      const body = one.json() as ScoreResponse;
      assert.match(body.id, /^score-[0-9a-f]{32}$/);
      assert.equal(body.object, "list");
      assert.ok(Number.isInteger(body.created));
      assert.equal(body.model, "fake-reranker");
      assert.deepEqual(body.data, [
        { index: 0, object: "score", score: 3 },
        { index: 1, object: "score", score: 2 },
        { index: 2, object: "score", score: 4 },
      ]);
      assert.deepEqual(body.usage, { prompt_tokens: 9, total_tokens: 9 });
      const pairwise = await fake.post(path, { text_1: ["qq", "q"], text_2: ["a", "bbb"] });
      assert.deepEqual(
        (pairwise.json() as ScoreResponse).data.map((item) => item.score),
        [3, 4],
      );
      const single = await fake.post(path, { text_1: "q", text_2: "a" });
      assert.deepEqual(
        (single.json() as ScoreResponse).data.map((item) => item.score),
        [2],
      );
    });
  }

  it("404 for an unknown model; 400 naming model for one that does not rerank", async () => {
    for (const path of ["/v1/rerank", "/v2/rerank", "/score"]) {
      const body = path === "/score" ? { text_1: "q", text_2: "a" } : { query: "q", documents: ["a"] };
      const unknown = await fake.post(path, { ...body, model: "nope" });
      assertError(unknown, 404, "model", /nope/);
      assert.equal((unknown.json() as ErrorBody).error.code, "model_not_found");
      assertError(
        await fake.post(path, { ...body, model: "fake-generator" }),
        400,
        "model",
        /fake-generator is a generative model .* does not serve reranking/,
      );
    }
  });

  it("400 for empty documents or texts, lists of different lengths, and a pair past the window", async () => {
    for (const [path, payload, param, message] of [
      ["/v1/rerank", { query: "q", documents: [] }, "documents", /documents must not be empty/],
      ["/score", { text_1: [], text_2: ["a"] }, "text_1", /text_1 must not be empty/],
      ["/score", { text_1: "q", text_2: [] }, "text_2", /text_2 must not be empty/],
      ["/score", { text_1: ["a", "b"], text_2: ["a", "b", "c"] }, "text_1", /2 texts and text_2 3/],
      [
        "/v1/rerank",
        { query: "q", documents: ["a", "x".repeat(16)] },
        "documents[1]",
        /documents\[1\] with the query has 17 tokens, more than the model's window of 16/,
      ],
      ["/v1/score", { text_1: "q", text_2: ["x".repeat(20)] }, "text_2[0]", /21 tokens/],
    ] as const) {
      assertError(await fake.post(path, payload), 400, param, message);
    }
  });

  it("400 naming the field for a value out of range (top_n, max_tokens_per_doc)", async () => {
    for (const field of ["top_n", "max_tokens_per_doc"]) {
      const response = await fake.post("/v1/rerank", { query: "q", documents: ["a"], [field]: 0 });
      assertError(response, 400, field, new RegExp(field));
      assert.equal((response.json() as ErrorBody).error.code, "invalid_value");
    }
  });

  it("422 with FastAPI's detail for a missing field or one of the wrong type", async () => {
    for (const [path, payload, loc] of [
      ["/v1/rerank", { documents: ["a"] }, ["body", "query"]],
      ["/v1/rerank", { query: "q" }, ["body", "documents"]],
      ["/rerank", { query: "q", documents: [1] }, ["body", "documents", 0]],
      ["/v2/rerank", { query: "q", documents: ["a"], return_documents: "yes" }, ["body", "return_documents"]],
      ["/score", { text_1: "q" }, ["body", "text_2"]],
      ["/v1/score", { text_1: 5, text_2: "a" }, ["body", "text_1"]],
    ] as const) {
      const response = await fake.post(path, payload);
      assert.equal(response.statusCode, 422, `${path} ${JSON.stringify(payload)}`);
      assert.deepEqual((response.json() as ErrorBody).detail?.[0]?.loc, loc);
    }
    const notObject = await fake.app.inject({
      method: "POST",
      url: "/v1/rerank",
      payload: "[1]",
      headers: { "content-type": "application/json" },
    });
    assert.equal(notObject.statusCode, 422);
  });

  it("503 with Retry-After when the reranker's queue is full", async () => {
    const full = new FakeEngine({ names: ["full-reranker"], task: "rerank", full: true });
    await withFakeApp(fakeContext(full), async (app) => {
      for (const [url, payload] of [
        ["/v1/rerank", { query: "q", documents: ["a", "b"] }],
        ["/score", { text_1: "q", text_2: "a" }],
      ] as const) {
        const response = await app.inject({ method: "POST", url, payload });
        assert.equal(response.statusCode, 503, url);
        assert.ok(response.headers["retry-after"], url);
        assert.equal((response.json() as ErrorBody).code, 503);
      }
    });
  });
});

/**
 * vLLM's POST /tokenize (a prompt, or messages through the chat template) and POST /detokenize
 * in-process on the fake engine, whose tokenizer maps each character to its code (`fakeTokenize`).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { useFakeApp } from "../helpers/fakeApp.ts";
import { FakeEngine, fakeDetokenize, fakeTokenize } from "../helpers/fakeEngine.ts";

type Tokenized = { count: number; max_model_len: number; tokens: number[]; token_strs?: string[] };

describe("POST /tokenize and /detokenize (in-process, fake engine)", () => {
  const fake = useFakeApp({ engines: [new FakeEngine({ contextSize: 128 })] });

  it("tokenizes a prompt: the ids, their count and the context length; token_strs on request", async () => {
    const plain = await fake.post("/tokenize", { prompt: "abc" });
    assert.equal(plain.statusCode, 200);
    assert.deepEqual(plain.json(), { count: 3, max_model_len: 128, tokens: [97, 98, 99] });
    const withStrings = (
      await fake.post("/tokenize", { model: "fake-model", prompt: "Hé!", return_token_strs: true })
    ).json() as Tokenized;
    assert.deepEqual(withStrings.tokens, fakeTokenize("Hé!"));
    assert.deepEqual(withStrings.token_strs, ["H", "é", "!"]);
  });

  it("tokenizes messages as the chat completion would prompt them", async () => {
    const messages = [{ role: "user", content: "Hi there" }];
    const tokenized = (await fake.post("/tokenize", { messages })).json() as Tokenized;
    assert.equal(tokenized.count, tokenized.tokens.length);
    assert.match(fakeDetokenize(tokenized.tokens), /Hi there/);
    await fake.post("/v1/chat/completions", { messages, max_tokens: 1 });
    assert.deepEqual(tokenized.tokens, fake.engine.submitted.at(-1)?.promptTokens);
    const bare = (
      await fake.post("/tokenize", { messages, add_generation_prompt: false })
    ).json() as Tokenized;
    assert.ok(bare.count < tokenized.count, "the generation prompt adds tokens");
  });

  it("detokenizes ids back to the text, round-tripping /tokenize", async () => {
    const text = "Once upon a time";
    const { tokens } = (await fake.post("/tokenize", { prompt: text })).json() as Tokenized;
    const response = await fake.post("/detokenize", { tokens });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), { prompt: text });
  });

  it("400 naming the token for a negative id, 404 for an unknown model, 422 for a prompt of the wrong type", async () => {
    const negative = await fake.post("/detokenize", { tokens: [72, -1] });
    assert.equal(negative.statusCode, 400);
    assert.equal((negative.json() as ErrorBody).error.param, "tokens[1]");
    const unknown = await fake.post("/tokenize", { model: "nope", prompt: "abc" });
    assert.equal(unknown.statusCode, 404);
    assert.equal((unknown.json() as ErrorBody).error.code, "model_not_found");
    const wrongType = await fake.post("/tokenize", { prompt: 7 });
    assert.equal(wrongType.statusCode, 422);
    assert.deepEqual((wrongType.json() as ErrorBody).detail?.[0]?.loc, ["body", "prompt"]);
  });
});

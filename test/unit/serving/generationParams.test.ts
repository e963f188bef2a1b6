import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CompletionRequestSchema } from "../../../src/protocol/completions.ts";
import {
  generationRequest,
  resolveMaxTokens,
  SeedSource,
  stopStrings,
} from "../../../src/serving/request/generationParams.ts";
import { requestFields } from "../../../src/serving/request/requestFields.ts";
import { thrownApiError } from "../../helpers/apiErrors.ts";
import { FakeHost } from "../../helpers/fakeEngine.ts";

const host = new FakeHost(["fake-model"], 64);
const counts = { logprobs: null, promptLogprobs: null };
const grammar = { gbnf: 'root ::= "a"' };

/** The engine request of choice `choice` for a completion body (`prompt` added). */
function resolve(
  fields: Record<string, unknown>,
  options: { choice?: number; grammar?: typeof grammar } = {},
) {
  const body = CompletionRequestSchema.parse({ prompt: "p", ...fields });
  return generationRequest(
    body,
    requestFields(body),
    host,
    [1, 2],
    8,
    options.choice ?? 0,
    new SeedSource(42),
    counts,
    options.grammar ?? null,
  );
}

describe("generationRequest (the request-to-engine mapping)", () => {
  it("defaults every engine parameter", () => {
    const request = resolve({});
    assert.deepEqual(request.promptTokens, [1, 2]);
    assert.equal(request.maxTokens, 8);
    assert.deepEqual(
      { ...request.sampling, seed: 0 },
      {
        temperature: 1,
        topP: 1,
        topK: 0,
        minP: 0,
        seed: 0,
        frequencyPenalty: 0,
        presencePenalty: 0,
        repetitionPenalty: 1,
        logitBias: new Map(),
      },
    );
    assert.deepEqual(request.stop, []);
    assert.equal(request.minTokens, 0);
    assert.equal(request.ignoreEos, false);
    assert.equal(request.priority, 0);
    assert.equal(request.grammar, null);
    assert.equal(request.batchInvariant, false);
  });

  it("maps the sampling fields, a seed per choice, and logit_bias keys to token ids", () => {
    const request = resolve(
      { temperature: 0.5, top_p: 0.9, top_k: 5, seed: 7, logit_bias: { "65": 3 }, stop: "x", priority: 2 },
      { choice: 2 },
    );
    assert.equal(request.sampling.temperature, 0.5);
    assert.equal(request.sampling.topP, 0.9);
    assert.equal(request.sampling.topK, 5);
    assert.equal(request.sampling.seed, 9);
    assert.deepEqual([...request.sampling.logitBias], [[65, 3]]);
    assert.deepEqual(request.stop, ["x"]);
    assert.equal(request.priority, 2);
  });

  it("reads nvext's spellings where the top-level field is absent, the top-level one first", () => {
    const fromNvext = resolve({
      nvext: { top_k: 3, min_p: 0.1, repetition_penalty: 1.2, min_tokens: 2, ignore_eos: true },
    });
    assert.equal(fromNvext.sampling.topK, 3);
    assert.equal(fromNvext.sampling.minP, 0.1);
    assert.equal(fromNvext.sampling.repetitionPenalty, 1.2);
    assert.equal(fromNvext.minTokens, 2);
    assert.equal(fromNvext.ignoreEos, true);
    assert.equal(resolve({ top_k: 4, nvext: { top_k: 3 } }).sampling.topK, 4);
  });

  it("runs the checks that need the model: stop token ids, logit_bias keys, min_tokens against max_tokens", () => {
    assert.equal(thrownApiError(() => resolve({ stop_token_ids: [300] })).param, "stop_token_ids");
    assert.equal(thrownApiError(() => resolve({ min_tokens: 9 })).param, "min_tokens");
    assert.equal(thrownApiError(() => resolve({ logit_bias: { "256": 1 } })).param, "logit_bias.256");
    assert.deepEqual(resolve({}, { grammar }).grammar, grammar);
  });

  it("runs a seeded request batch-invariant only under --batch-invariant-seeds", () => {
    const body = CompletionRequestSchema.parse({ prompt: "p", seed: 1 });
    const strict = generationRequest(
      body,
      requestFields(body),
      host,
      [1],
      4,
      0,
      new SeedSource(0, true),
      counts,
      null,
    );
    assert.equal(strict.batchInvariant, true);
    assert.equal(resolve({ seed: 1 }).batchInvariant, false);
  });
});

describe("resolveMaxTokens and stopStrings", () => {
  it("fits max_tokens to the context, or fills it up to the cap", () => {
    assert.equal(resolveMaxTokens(undefined, 10, 64), 54);
    assert.equal(resolveMaxTokens(null, 10, 64, 16), 16);
    assert.equal(resolveMaxTokens(5, 10, 64), 5);
    const tooLong = thrownApiError(() => resolveMaxTokens(60, 10, 64));
    assert.equal(tooLong.code, "context_length_exceeded");
    assert.equal(tooLong.param, "max_tokens");
    assert.equal(thrownApiError(() => resolveMaxTokens(undefined, 64, 64)).param, "prompt");
  });

  it("lists the stop strings", () => {
    assert.deepEqual(stopStrings(undefined), []);
    assert.deepEqual(stopStrings("a"), ["a"]);
    assert.deepEqual(stopStrings(["a", "b"]), ["a", "b"]);
  });
});

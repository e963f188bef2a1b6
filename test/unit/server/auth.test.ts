import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import { keyMatches, requiresApiKey } from "../../../src/server/auth.ts";

describe("requiresApiKey", () => {
  it("protects the API and the tokenizer, not the probes, documents or UI", () => {
    for (const path of [
      "/v1/models",
      "/v1/models/x?y=1",
      "/v1/chat/completions",
      "/v1/nope",
      "/v1",
      "/v1/healthz",
      "/tokenize",
      "/detokenize?x",
      "/models",
      "/models/load",
      "/models/unload",
    ]) {
      assert.equal(requiresApiKey(path, false), true, path);
    }
    for (const path of [
      "/health",
      "/v1/health/live",
      "/v1/health/ready",
      "/openapi.json",
      "/docs",
      "/",
      "/assets/x.js",
      "/metrics",
    ]) {
      assert.equal(requiresApiKey(path, false), false, path);
    }
    assert.equal(requiresApiKey("/metrics", true), true);
    assert.equal(requiresApiKey("/metrics?name[]=x", true), true);
  });
});

describe("keyMatches", () => {
  const digests = ["alpha", "beta"].map((key) => createHash("sha256").update(key).digest());
  it("accepts each configured key and nothing else", () => {
    assert.equal(keyMatches("alpha", digests), true);
    assert.equal(keyMatches("beta", digests), true);
    for (const wrong of ["", "alph", "alphaa", "ALPHA", " beta", "gamma"]) {
      assert.equal(keyMatches(wrong, digests), false, wrong);
    }
  });
});

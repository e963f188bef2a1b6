/** --cache-type-k / --cache-type-v / --flash-attn / --max-num-batched-tokens, server-wide and per model (issue 29). */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  ConfigError,
  DEFAULT_MAX_NUM_BATCHED_TOKENS,
  loadServeConfig,
} from "../../../src/config/serveConfig.ts";
import { KV_CACHE_TYPES } from "../../../src/engine/kvCacheTypes.ts";

const dir = mkdtempSync(join(tmpdir(), "lmserve-kv-config-"));

function messageOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.message;
  }
  assert.fail("no ConfigError");
}

describe("KV cache and step budget configuration", () => {
  it("defaults to f16 caches, flash attention auto and the default step budget", () => {
    const config = loadServeConfig(["m.gguf"], {}, {});
    assert.equal(config.cacheTypeK, "f16");
    assert.equal(config.cacheTypeV, "f16");
    assert.equal(config.flashAttn, "auto");
    // Absent: the device's default, resolved when the model loads.
    assert.equal(config.maxNumBatchedTokens, undefined);
    assert.deepEqual(DEFAULT_MAX_NUM_BATCHED_TOKENS, { cpu: 2048, gpu: 2048 });
  });

  it("takes every llama-server cache type and refuses another, listing them", () => {
    assert.deepEqual(
      [...KV_CACHE_TYPES],
      ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"],
    );
    for (const type of KV_CACHE_TYPES) {
      const config = loadServeConfig(["m.gguf"], { cacheTypeK: type, cacheTypeV: type }, {});
      assert.equal(config.cacheTypeK, type);
      assert.equal(config.cacheTypeV, type);
    }
    assert.equal(loadServeConfig(["m.gguf"], { cacheTypeK: "Q8_0" }, {}).cacheTypeK, "q8_0");
    const message = messageOf(() => loadServeConfig(["m.gguf"], { cacheTypeV: "q6_k" }, {}));
    assert.equal(
      message,
      "--cache-type-v 'q6_k' is not a KV cache type; allowed: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1.",
    );
  });

  it("reads --flash-attn as auto, on, off (and llama-server's boolean spellings)", () => {
    const mode = (value: string) => loadServeConfig(["m.gguf"], { flashAttn: value }, {}).flashAttn;
    assert.deepEqual(["auto", "on", "off", "true", "false", "1", "0", "enabled", "disabled"].map(mode), [
      "auto",
      "on",
      "off",
      "on",
      "off",
      "on",
      "off",
      "on",
      "off",
    ]);
    assert.equal(
      messageOf(() => mode("sometimes")),
      "--flash-attn must be auto, on or off, got 'sometimes'.",
    );
  });

  it("refuses a step budget below the slots, as vLLM", () => {
    assert.equal(
      messageOf(() => loadServeConfig(["m.gguf"], { maxNumBatchedTokens: "3", maxNumSeqs: "4" }, {})),
      "--max-num-batched-tokens (3) must be at least max-num-seqs (4): every slot decodes a token per step.",
    );
    assert.equal(
      loadServeConfig(["m.gguf"], { maxNumBatchedTokens: "4", maxNumSeqs: "4" }, {}).maxNumBatchedTokens,
      4,
    );
    assert.match(
      messageOf(() => loadServeConfig(["m.gguf"], { maxNumBatchedTokens: "0" }, {})),
      /max-num-batched-tokens/,
    );
    assert.match(
      messageOf(() => loadServeConfig(["m.gguf"], { maxNumBatchedTokens: "1.5" }, {})),
      /--max-num-batched-tokens must be an integer/,
    );
  });

  it("takes the settings per model from a config file, which override the server-wide ones", () => {
    const path = join(dir, "models.yaml");
    writeFileSync(
      path,
      [
        "cache-type-k: q4_0",
        "models:",
        "  - model: a.gguf",
        "    cache-type-k: q8_0",
        "    cache-type-v: q8_0",
        "    flash-attn: on",
        "    max-num-batched-tokens: 1024",
        "  - model: b.gguf",
        "    flash-attn: false",
        "",
      ].join("\n"),
    );
    const config = loadServeConfig([], { config: path }, {});
    assert.equal(config.cacheTypeK, "q4_0");
    assert.deepEqual(
      config.models.map((model) => [
        model.cacheTypeK,
        model.cacheTypeV,
        model.flashAttn,
        model.maxNumBatchedTokens,
      ]),
      [
        ["q8_0", "q8_0", "on", 1024],
        [undefined, undefined, "off", undefined],
      ],
    );
  });

  it("names the config file entry of a bad per-model value", () => {
    const path = join(dir, "bad.yaml");
    writeFileSync(path, "models:\n  - model: a.gguf\n    max-num-seqs: 8\n    max-num-batched-tokens: 4\n");
    assert.equal(
      messageOf(() => loadServeConfig([], { config: path }, {})),
      "models[0].max-num-batched-tokens (4) must be at least max-num-seqs (8): every slot decodes a token per step.",
    );
    writeFileSync(path, "models:\n  - model: a.gguf\n    cache-type-v: fp8\n");
    assert.match(
      messageOf(() => loadServeConfig([], { config: path }, {})),
      /^models\[0\]\.cache-type-v 'fp8'/,
    );
  });
});

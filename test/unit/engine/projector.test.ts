/**
 * The synthetic vision projector (`bench/make-model.ts --mmproj-for`) through the native addon's mtmd:
 * it loads beside stories260K, images in every accepted format become 16 image tokens, an image chunk
 * evaluates between text chunks and the next token samples; a projector for another width, or bytes
 * that are no image, are clean errors.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { GgufValueType } from "../../../bench/gguf/format.ts";
import { readGgufMetadata } from "../../../bench/gguf/readVocab.ts";
import {
  TINY_PROJECTOR_SHAPE,
  textEmbeddingLength,
  writeSyntheticProjector,
} from "../../../bench/gguf/syntheticProjector.ts";
import {
  type NativeContext,
  type NativeModel,
  type NativeProjector,
  nativeAddon,
  OutputKind,
} from "../../../src/engine/native.ts";
import { defaultModelPath, projectRoot } from "../../../src/paths.ts";
import { encodeBmp, encodePng, TINY_GIF } from "../../helpers/images.ts";
import { NEUTRAL_SAMPLER } from "./referenceSampler.ts";

const STORIES = defaultModelPath;

let dir = "";
let projectorPath = "";
let model: NativeModel;
let projector: NativeProjector;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "lmserve-projector-"));
  projectorPath = join(dir, "stories-mmproj.gguf");
  // The exact command line other checks run.
  const made = spawnSync(
    process.execPath,
    ["--import", "tsx", "bench/make-model.ts", "--mmproj-for", STORIES, "--out", projectorPath],
    { cwd: projectRoot, encoding: "utf8" },
  );
  assert.equal(made.status, 0, made.stderr);
  assert.match(made.stdout, /output width 64, 16 tokens per image/);
  const engine = nativeAddon();
  model = await engine.loadModel(STORIES, { nGpuLayers: 0, cpuOnly: true });
  projector = await engine.loadProjector(projectorPath, model, { threads: 1, useGpu: false });
});

after(() => {
  projector?.dispose();
  model?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A context of one sequence with a greedy sampler. */
function greedyContext(): NativeContext {
  const context = new (nativeAddon().Context)(model, {
    nCtx: 512,
    nSeqMax: 1,
    nBatch: 512,
    nUbatch: 512,
    threads: 1,
    kvUnified: true,
  });
  context.configure(0, { ...NEUTRAL_SAMPLER, temperature: 0 });
  return context;
}

/** Decodes `tokens` into sequence 0 from position `nPast`; samples after the last one when `sample`. */
async function decodeText(context: NativeContext, tokens: Int32Array, nPast: number, sample: boolean) {
  const last = tokens.length - 1;
  return context.step({
    tokens,
    positions: Int32Array.from(tokens, (_, i) => nPast + i),
    seqs: new Int32Array(tokens.length),
    outputRows: sample ? Int32Array.of(last) : new Int32Array(0),
    kinds: sample ? Int32Array.of(OutputKind.Sample) : new Int32Array(0),
    targets: sample ? Int32Array.of(0) : new Int32Array(0),
    topN: sample ? Int32Array.of(-1) : new Int32Array(0),
  });
}

describe("synthetic vision projector", () => {
  test("is a small mlp-type clip GGUF with u32 integers and the text model's width", () => {
    assert.ok(statSync(projectorPath).size < 2_000_000);
    const kvs = new Map(readGgufMetadata(projectorPath).kvs.map((kv) => [kv.key, kv]));
    assert.equal(kvs.get("clip.projector_type")?.value, "mlp");
    assert.equal(kvs.get("clip.has_vision_encoder")?.value, true);
    for (const key of ["image_size", "patch_size", "embedding_length", "projection_dim", "block_count"]) {
      assert.equal(kvs.get(`clip.vision.${key}`)?.type, GgufValueType.UINT32, key);
    }
    assert.equal(kvs.get("clip.vision.projection_dim")?.value, textEmbeddingLength(STORIES));
    assert.deepEqual(
      (kvs.get("clip.vision.image_mean")?.value as number[] | undefined)?.map((v) => v.toFixed(3)),
      ["0.481", "0.458", "0.408"],
    );
  });

  test("loads beside stories260K as a vision projector", () => {
    const info = projector.info();
    assert.equal(info.vision, true);
    assert.equal(info.audio, false);
    assert.equal(info.marker, "<__media__>");
  });

  test("PNG, BMP and GIF images of any size become 16 image tokens between the text chunks", () => {
    const { marker } = projector.info();
    for (const [name, bytes] of [
      ["png 32x32", encodePng(32, 32)],
      ["png 50x20", encodePng(50, 20)],
      ["bmp 7x9", encodeBmp(7, 9)],
      ["gif 1x1", TINY_GIF],
    ] as const) {
      const { chunks, prompt } = projector.tokenize(`Look: ${marker} What is it?`, [bytes]);
      try {
        assert.deepEqual(
          chunks.map((c) => c.type),
          ["text", "image", "text"],
          name,
        );
        const image = chunks[1]!;
        assert.ok(image.type === "image");
        assert.equal(image.nTokens, 16, name);
        assert.equal(image.nPos, 16, name);
        assert.match(image.id, /^[0-9a-f]{64}$/);
      } finally {
        prompt.dispose();
      }
    }
  });

  test("an image chunk evaluates after its text and the next token samples", async () => {
    const { marker } = projector.info();
    const { chunks, prompt } = projector.tokenize(`Once upon a time ${marker} there was`, [
      encodePng(32, 32),
    ]);
    const context = greedyContext();
    try {
      const [first, image, last] = chunks;
      assert.ok(first?.type === "text" && image?.type === "image" && last?.type === "text");
      await decodeText(context, first.tokens, 0, false);
      const afterImage = await context.evalImage(0, projector, prompt, 1, first.tokens.length);
      assert.equal(afterImage.nPast, first.tokens.length + 16);
      const out = await decodeText(context, last.tokens, afterImage.nPast, true);
      assert.equal(out.tokens.length, 1);
      assert.ok(out.tokens[0]! >= 0 && out.tokens[0]! < model.info().nVocab);
      assert.ok(Number.isFinite(out.logprobs[0]));
    } finally {
      context.dispose();
      prompt.dispose();
    }
  });

  test("bytes that are no image name the image that failed", () => {
    const { marker } = projector.info();
    assert.throws(
      () =>
        projector.tokenize(`${marker} ${marker}`, [
          encodePng(8, 8),
          new TextEncoder().encode("not an image"),
        ]),
      (error: Error & { imageIndex?: number }) => error.imageIndex === 1,
    );
  });

  test("a projector for another embedding width is refused with a message, not a crash", async () => {
    const other = join(dir, "mmproj-48.gguf");
    await writeSyntheticProjector({
      shape: { ...TINY_PROJECTOR_SHAPE, projectionDim: 48 },
      outPath: other,
      seed: 1,
    });
    await assert.rejects(
      nativeAddon().loadProjector(other, model, { threads: 1, useGpu: false }),
      // The addon keeps the last line of llama.cpp's message ("mismatch between text model (n_embd =
      // 64) and mmproj (n_embd = 48)\nhint: you may be using wrong mmproj").
      /mmproj/,
    );
    // The model is still usable after the refusal.
    assert.equal(projector.info().vision, true);
  });
});

// Tests bench/make-model.ts and its GGUF library: numeric helpers, the writer (read back with
// @huggingface/gguf), and a tiny synthetic qwen2 / llama model that node-llama-cpp loads and runs.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { GGMLQuantizationType, gguf } from "@huggingface/gguf";
import { getLlama, type Llama } from "node-llama-cpp";
import { GgmlType, GgufValueType } from "../../bench/gguf/format.ts";
import { GgufWriter } from "../../bench/gguf/GgufWriter.ts";
import { dequantizeQ8_0, floatToHalf, halfToFloat, quantizeQ8_0 } from "../../bench/gguf/numeric.ts";
import { readGgufMetadata, readVocab } from "../../bench/gguf/readVocab.ts";
import { planTensors, writeSyntheticModel } from "../../bench/gguf/syntheticModel.ts";
import { defaultFileName, parseMakeModelArgs } from "../../bench/make-model.ts";
import { sharedModelsDir } from "../../src/paths.ts";

const qwenVocab = resolve(sharedModelsDir, "ggml-vocab-qwen2.gguf");
const llamaVocab = resolve(sharedModelsDir, "ggml-vocab-llama-bpe.gguf");
const tiny = { hidden: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 128, context: 2048 };

let dir = "";
before(() => {
  dir = mkdtempSync(join(tmpdir(), "lmserve-make-model-"));
});
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("numeric helpers", () => {
  test("floatToHalf rounds to nearest even and halfToFloat inverts it", () => {
    assert.equal(floatToHalf(1), 0x3c00);
    assert.equal(floatToHalf(-2), 0xc000);
    assert.equal(floatToHalf(65504), 0x7bff);
    assert.equal(floatToHalf(1e6), 0x7c00);
    assert.equal(floatToHalf(2 ** -24), 0x0001);
    assert.equal(floatToHalf(1 + 2 ** -11), 0x3c00); // tie → even
    assert.equal(floatToHalf(1 + 3 * 2 ** -11), 0x3c02); // tie → even (up)
    assert.ok(Number.isNaN(halfToFloat(floatToHalf(Number.NaN))));
    for (const v of [0.02, -0.0001234, 3.140625, 2 ** -20]) {
      assert.ok(Math.abs(halfToFloat(floatToHalf(v)) - v) <= Math.abs(v) * 2 ** -11 + 2 ** -25);
    }
  });

  test("quantizeQ8_0 matches ggml's reference rounding", () => {
    const src = new Float32Array(32).map((_, i) => (i - 16) / 16);
    const dst = new Uint8Array(34);
    quantizeQ8_0(src, dst);
    assert.equal(halfToFloat(dst[0]! | (dst[1]! << 8)), halfToFloat(floatToHalf(1 / 127)));
    assert.equal((dst[2]! << 24) >> 24, -127); // x = -1
    assert.equal(dst[2 + 16], 0);
    assert.equal(dst[2 + 24], 64); // 0.5 * 127 = 63.5 → 64 (away from zero)
    assert.equal((dst[2 + 8]! << 24) >> 24, -64);
    const back = dequantizeQ8_0(dst, 1);
    for (let i = 0; i < 32; i++) assert.ok(Math.abs(back[i]! - src[i]!) < 0.005);
    assert.throws(() => quantizeQ8_0(new Float32Array(31), dst), RangeError);
  });
});

describe("GgufWriter", () => {
  test("writes every scalar type, arrays and aligned tensors that @huggingface/gguf reads back", async () => {
    const path = join(dir, "types.gguf");
    const w = new GgufWriter();
    w.addScalar("general.architecture", GgufValueType.STRING, "llama")
      .addScalar("t.u8", GgufValueType.UINT8, 200)
      .addScalar("t.i16", GgufValueType.INT16, -3)
      .addScalar("t.f64", GgufValueType.FLOAT64, 0.1)
      .addScalar("t.bool", GgufValueType.BOOL, true)
      .addScalar("t.u64", GgufValueType.UINT64, 2n ** 40n)
      .addKv("t.arr", { kind: "array", elementType: GgufValueType.STRING, values: ["a", "ü", ""] })
      .addTensor({ name: "a", dims: [3], type: GgmlType.F32, data: () => [new Uint8Array(12).fill(1)] })
      .addTensor({ name: "b", dims: [32, 2], type: GgmlType.Q8_0, data: () => [new Uint8Array(68)] });
    assert.throws(() => w.addScalar("t.u8", GgufValueType.UINT8, 1), /duplicate/);
    const size = await w.write(path);
    assert.equal(size, statSync(path).size);
    const r = await gguf(path, { allowLocalFile: true, typedMetadata: true });
    assert.equal(r.typedMetadata["t.u8"]?.value, 200);
    assert.equal(r.typedMetadata["t.i16"]?.value, -3);
    assert.equal(r.typedMetadata["t.f64"]?.value, 0.1);
    assert.equal(r.typedMetadata["t.bool"]?.value, true);
    assert.equal(r.typedMetadata["t.u64"]?.value, 2n ** 40n);
    assert.deepEqual(r.typedMetadata["t.arr"]?.value, ["a", "ü", ""]);
    assert.equal(Number(r.tensorDataOffset) % 32, 0);
    assert.deepEqual(
      r.tensorInfos.map((t) => [t.name, t.shape.map(Number), t.dtype, Number(t.offset)]),
      [
        ["a", [3], GGMLQuantizationType.F32, 0],
        ["b", [32, 2], GGMLQuantizationType.Q8_0, 32],
      ],
    );
    assert.equal(size, Number(r.tensorDataOffset) + 32 + 96); // every tensor padded to 32
  });

  test("rejects a source that yields the wrong size and leaves no file behind", async () => {
    const path = join(dir, "bad.gguf");
    const w = new GgufWriter().addTensor({
      name: "x",
      dims: [4],
      type: GgmlType.F32,
      data: () => [new Uint8Array(8)],
    });
    await assert.rejects(w.write(path), /yielded 8 of 16 bytes/);
    assert.ok(!existsSync(path) && !existsSync(`${path}.partial`));
  });
});

describe("make-model CLI arguments", () => {
  test("defaults to the Qwen2.5-0.5B shape as Q8_0 under bench/models", () => {
    const a = parseMakeModelArgs([]);
    assert.deepEqual(a.shape, {
      arch: "qwen2",
      hidden: 896,
      layers: 24,
      heads: 14,
      kvHeads: 2,
      ffn: 4864,
      context: 32768,
    });
    assert.equal(a.weightType, "q8_0");
    assert.ok(a.outPath.endsWith(join("bench", "models", "qwen2.5-0.5b-synthetic-q8_0.gguf")));
    assert.equal(a.vocabPath, qwenVocab);
    assert.equal(parseMakeModelArgs(["--arch", "llama"]).vocabPath, llamaVocab);
    assert.equal(
      defaultFileName({ ...a.shape, layers: 2 }, "f16", true),
      "synthetic-qwen2-h896-l2-a14-kv2-ff4864-f16.gguf",
    );
    assert.throws(() => parseMakeModelArgs(["--hidden", "6x"]), /integer/);
    assert.throws(() => parseMakeModelArgs(["--type", "q4_0"]), /--type/);
    assert.throws(() => parseMakeModelArgs(["--bogus"]));
    const projector = parseMakeModelArgs(["--mmproj-for", "models/stories260K.gguf"]);
    assert.equal(projector.mmprojFor, resolve("models/stories260K.gguf"));
    assert.ok(projector.outPath.endsWith(join("bench", "models", "stories260K-mmproj.gguf")));
    assert.equal(a.mmprojFor, undefined);
    const lora = parseMakeModelArgs(["--lora-for", "models/stories260K.gguf", "--rank", "4", "--seed", "7"]);
    assert.equal(lora.loraFor, resolve("models/stories260K.gguf"));
    assert.equal(lora.rank, 4);
    assert.ok(lora.outPath.endsWith(join("bench", "models", "stories260K-lora-7.gguf")));
    assert.equal(a.loraFor, undefined);
    assert.equal(a.rank, 8);
  });

  test("the default shape has ~494M parameters (~525 MB as Q8_0)", () => {
    const plan = planTensors(parseMakeModelArgs([]).shape, 151936, "q8_0");
    const params = plan.reduce((s, t) => s + t.dims.reduce((a, b) => a * b, 1), 0);
    assert.ok(params > 490e6 && params < 500e6, `${params}`);
  });
});

describe("synthetic model", { skip: !existsSync(qwenVocab) && "ggml-vocab-qwen2.gguf not found" }, () => {
  let llama: Llama | undefined;
  after(async () => {
    await llama?.dispose();
  });

  test("qwen2: metadata, tokenizer copied verbatim, tensor layout, weights", async () => {
    const path = join(dir, "tiny-qwen2.gguf");
    const result = await writeSyntheticModel({
      shape: { arch: "qwen2", ...tiny },
      vocabPath: qwenVocab,
      outPath: path,
      weightType: "q8_0",
      seed: 7,
    });
    assert.equal(result.bytes, statSync(path).size);
    assert.equal(result.tensorCount, 1 + 2 * 12 + 1);

    const r = await gguf(path, { allowLocalFile: true, typedMetadata: true });
    const md = r.typedMetadata;
    assert.equal(md["general.architecture"]?.value, "qwen2");
    assert.equal(md["general.file_type"]?.value, 7);
    assert.equal(md["general.alignment"]?.value, 32);
    assert.equal(md["qwen2.embedding_length"]?.value, 64);
    assert.equal(md["qwen2.block_count"]?.value, 2);
    assert.equal(md["qwen2.attention.head_count"]?.value, 4);
    assert.equal(md["qwen2.attention.head_count_kv"]?.value, 2);
    assert.equal(md["qwen2.feed_forward_length"]?.value, 128);
    assert.equal(md["qwen2.context_length"]?.value, 2048);
    assert.equal(md["qwen2.rope.freq_base"]?.value, 1e6);
    assert.equal(md["qwen2.attention.layer_norm_rms_epsilon"]?.type, GgufValueType.FLOAT32);

    // Every tokenizer.* entry is byte-identical to the vocabulary file's.
    const source = readVocab(qwenVocab);
    const copied = readGgufMetadata(path).kvs.filter((kv) => kv.key.startsWith("tokenizer."));
    assert.deepEqual(
      copied.map((kv) => kv.key),
      source.tokenizerKvs.map((kv) => kv.key),
    );
    for (const [i, kv] of copied.entries()) assert.deepEqual(kv.raw, source.tokenizerKvs[i]!.raw, kv.key);
    assert.equal((md["tokenizer.ggml.tokens"]?.value as string[] | undefined)?.length, 151936);
    assert.equal(md["tokenizer.ggml.pre"]?.value, "qwen2");

    // Tensor infos: names, ggml dims, types, contiguous aligned offsets; file ends after the last.
    const infos = new Map(r.tensorInfos.map((t) => [t.name, t]));
    const shapeOf = (name: string) => infos.get(name)?.shape.map(Number);
    assert.deepEqual(shapeOf("token_embd.weight"), [64, 151936]);
    assert.deepEqual(shapeOf("blk.1.attn_k.weight"), [64, 32]);
    assert.deepEqual(shapeOf("blk.1.attn_v.bias"), [32]);
    assert.deepEqual(shapeOf("blk.0.ffn_down.weight"), [128, 64]);
    assert.deepEqual(shapeOf("blk.0.ffn_gate.weight"), [64, 128]);
    assert.equal(infos.has("output.weight"), false);
    assert.equal(infos.get("blk.0.attn_q.weight")?.dtype, GGMLQuantizationType.Q8_0);
    assert.equal(infos.get("blk.0.attn_q.bias")?.dtype, GGMLQuantizationType.F32);
    assert.equal(infos.get("output_norm.weight")?.dtype, GGMLQuantizationType.F32);
    for (const t of r.tensorInfos) assert.equal(Number(t.offset) % 32, 0, t.name);
    const last = r.tensorInfos.at(-1)!;
    assert.equal(result.bytes, Number(r.tensorDataOffset) + Number(last.offset) + 256); // 64 f32 = 256 B

    const file = readFileSync(path);
    const at = (name: string) => Number(r.tensorDataOffset) + Number(infos.get(name)!.offset);
    const norm = new Float32Array(
      file.buffer.slice(
        file.byteOffset + at("output_norm.weight"),
        file.byteOffset + at("output_norm.weight") + 256,
      ),
    );
    assert.ok(norm.every((v) => v === 1));
    const embd = dequantizeQ8_0(
      file.subarray(at("token_embd.weight"), at("token_embd.weight") + 34 * 2048),
      2048,
    );
    const mean = embd.reduce((s, v) => s + v, 0) / embd.length;
    const std = Math.sqrt(embd.reduce((s, v) => s + (v - mean) ** 2, 0) / embd.length);
    assert.ok(Math.abs(mean) < 0.002 && std > 0.018 && std < 0.022, `mean ${mean} std ${std}`);

    // Same seed → same bytes; another seed → different weights.
    const again = join(dir, "tiny-qwen2-again.gguf");
    await writeSyntheticModel({
      shape: { arch: "qwen2", ...tiny },
      vocabPath: qwenVocab,
      outPath: again,
      weightType: "q8_0",
      seed: 7,
    });
    const hash = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");
    assert.equal(hash(again), hash(path));
  });

  test("qwen2: node-llama-cpp loads it and decodes greedily", async () => {
    const path = join(dir, "tiny-qwen2.gguf");
    llama = await getLlama({ gpu: false });
    const model = await llama.loadModel({ modelPath: path });
    try {
      assert.equal(model.fileInfo.metadata.general.architecture, "qwen2");
      const template = model.fileInfo.metadata.tokenizer.chat_template;
      assert.equal(template, readVocab(qwenVocab).chatTemplate);
      assert.match(template ?? "", /<\|im_start\|>/);
      assert.equal(model.trainContextSize, 2048);
      const context = await model.createContext({ threads: 2, contextSize: 256 });
      try {
        const tokens = model.tokenize("Hello, world");
        assert.deepEqual(model.detokenize(tokens), "Hello, world");
        const out: number[] = [];
        for await (const token of context.getSequence().evaluate(tokens, { temperature: 0 })) {
          out.push(token);
          if (out.length >= 6) break;
        }
        assert.equal(out.length, 6);
        for (const t of out) assert.ok(Number.isInteger(t) && t >= 0 && t < 151936);
      } finally {
        await context.dispose();
      }
    } finally {
      await model.dispose();
    }
  });

  test("llama arch with the Llama-3 vocabulary (f16) loads and decodes", {
    skip: !existsSync(llamaVocab),
  }, async () => {
    const path = join(dir, "tiny-llama.gguf");
    await writeSyntheticModel({
      shape: { arch: "llama", ...tiny },
      vocabPath: llamaVocab,
      outPath: path,
      weightType: "f16",
      seed: 1,
      tiedEmbeddings: false,
    });
    const r = await gguf(path, { allowLocalFile: true });
    const names = r.tensorInfos.map((t) => t.name);
    assert.ok(names.includes("output.weight") && !names.some((n) => n.endsWith(".bias")));
    assert.equal(r.tensorInfos[0]?.dtype, GGMLQuantizationType.F16);
    llama ??= await getLlama({ gpu: false });
    const model = await llama.loadModel({ modelPath: path });
    try {
      assert.equal(model.fileInfo.metadata.general.architecture, "llama");
      const context = await model.createContext({ threads: 2, contextSize: 256 });
      try {
        const out: number[] = [];
        for await (const token of context.getSequence().evaluate(model.tokenize("Hi"), { temperature: 0 })) {
          out.push(token);
          if (out.length >= 4) break;
        }
        assert.equal(out.length, 4);
      } finally {
        await context.dispose();
      }
    } finally {
      await model.dispose();
    }
  });
});

/**
 * TokenVocabulary keeps its pieces packed in one buffer: every piece, byte and text must come back as the
 * GGUF's `tokenizer.ggml.tokens` give them, for both vocabulary kinds, on the real Qwen2 tokenizer too.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { readGgufFileInfo } from "../../../src/engine/ggufFiles.ts";
import { TokenVocabulary } from "../../../src/engine/TokenVocabulary.ts";
import { sharedModelsDir } from "../../../src/paths.ts";

test("SentencePiece: pieces round-trip, ▁ is a space, <0xNN> is one byte, control tokens render as nothing", () => {
  const pieces = ["<s>", "▁Hello", "<0xE2>", "é", "日本", ""];
  const vocabulary = new TokenVocabulary(pieces, [3, 1, 6, 1, 1, 1], "llama");
  assert.equal(vocabulary.size, 6);
  assert.deepEqual(
    pieces.map((_, id) => vocabulary.piece(id)),
    pieces,
  );
  assert.deepEqual([...vocabulary.bytes(1)], [...Buffer.from(" Hello")]);
  assert.deepEqual([...vocabulary.bytes(2)], [0xe2]);
  assert.equal(vocabulary.text(2), "\ufffd");
  assert.deepEqual([...vocabulary.bytes(4)], [...Buffer.from("日本")]);
  assert.equal(vocabulary.text(0), "<s>");
  assert.equal(vocabulary.renderedText(0), "");
  assert.equal(vocabulary.renderedText(3), "é");
  assert.equal(vocabulary.piece(5), "");
  for (const unknown of [-1, 6, 1.5, Number.NaN]) {
    assert.equal(vocabulary.piece(unknown), "");
    assert.equal(vocabulary.bytes(unknown).length, 0);
  }
});

test("byte-level BPE: the GPT-2 alphabet maps back to bytes, a token may hold part of a character", () => {
  // "Ġ" stands for a space; "Ã" + "©" are the two bytes of "é"; "æĹ" the first two of "日".
  const vocabulary = new TokenVocabulary(["<|endoftext|>", "Ġworld", "Ã©", "æĹ"], [3, 1, 1, 1], "gpt2");
  assert.equal(vocabulary.text(1), " world");
  assert.equal(vocabulary.text(2), "é");
  assert.deepEqual([...vocabulary.bytes(3)], [0xe6, 0x97]);
  assert.equal(vocabulary.text(3), "\ufffd");
  assert.equal(vocabulary.piece(0), "<|endoftext|>");
  assert.equal(vocabulary.renderedText(0), "");
});

test("the Qwen2 tokenizer's 151k pieces come back exactly", async () => {
  const path = join(sharedModelsDir, "ggml-vocab-qwen2.gguf");
  const info = await readGgufFileInfo(path, { readTensorInfo: false });
  const tokenizer = (
    info.metadata as unknown as {
      tokenizer: { ggml: { tokens: string[]; token_type: number[]; model: string } };
    }
  ).tokenizer.ggml;
  const vocabulary = new TokenVocabulary(tokenizer.tokens, tokenizer.token_type, tokenizer.model);
  assert.equal(vocabulary.size, tokenizer.tokens.length);
  assert.ok(vocabulary.size > 150_000);
  for (let id = 0; id < tokenizer.tokens.length; id++)
    if (vocabulary.piece(id) !== tokenizer.tokens[id]) assert.fail(`token ${id}: ${vocabulary.piece(id)}`);
});

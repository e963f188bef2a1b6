import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { IncrementalDetokenizer } from "../../../src/engine/IncrementalDetokenizer.ts";

/**
 * A byte-level tokenizer: token id = byte value, decoded with TextDecoder (U+FFFD for an incomplete
 * character), as byte-fallback and byte-level BPE tokenizers behave.
 */
const decoder = new TextDecoder("utf-8");
const detokenize = (tokens: readonly number[]) => decoder.decode(Uint8Array.from(tokens));
const bytes = (text: string) => [...new TextEncoder().encode(text)];

function streamAll(tokens: number[]): string[] {
  const detokenizer = new IncrementalDetokenizer(detokenize);
  const pieces = tokens.map((token) => detokenizer.push(token));
  pieces.push(detokenizer.flush());
  return pieces;
}

describe("IncrementalDetokenizer", () => {
  it("emits ASCII token by token", () => {
    assert.deepEqual(streamAll(bytes("abc")), ["a", "b", "c", ""]);
  });

  it("never emits half of a multi-byte character split across tokens", () => {
    const pieces = streamAll(bytes("é€😀"));
    for (const piece of pieces) assert.ok(!piece.includes("\uFFFD"), `piece ${JSON.stringify(piece)}`);
    assert.equal(pieces.join(""), "é€😀");
    // 'é' is 2 bytes: nothing after its first byte, the whole character after its second.
    assert.deepEqual(pieces.slice(0, 2), ["", "é"]);
  });

  it("flushes an incomplete character at the end as U+FFFD, as a full decode would", () => {
    const pieces = streamAll([...bytes("ok"), 0xe2, 0x82]);
    assert.equal(pieces.join(""), detokenize([...bytes("ok"), 0xe2, 0x82]));
  });

  it("concatenated pieces equal the full decode for mixed text", () => {
    const text = "Once upon a time, Zoë saw a 🐉 in 東京.";
    assert.equal(streamAll(bytes(text)).join(""), text);
  });

  it("passes previous tokens as context so leading spaces survive", () => {
    // A SentencePiece-like detokenizer that strips the leading space of a window without context.
    const pieces: Record<number, string> = { 1: " Once", 2: " upon", 3: " a" };
    const spm = (tokens: readonly number[], last: readonly number[]) => {
      const text = tokens.map((t) => pieces[t] ?? "").join("");
      return last.length === 0 ? text.trimStart() : text;
    };
    const detokenizer = new IncrementalDetokenizer(spm, [1]);
    assert.equal(detokenizer.push(2), " upon");
    assert.equal(detokenizer.push(3), " a");
  });
});

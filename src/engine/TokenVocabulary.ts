/**
 * The exact bytes and text of each vocabulary token, for logprobs (`tokens`, `bytes`), read from the
 * GGUF's `tokenizer.ggml.tokens`. node-llama-cpp's detokenizer returns JS strings, which lose the bytes
 * of a token that holds part of a UTF-8 character; the vocabulary keeps them.
 */

/** The GPT-2 byte-level BPE alphabet: printable stand-in character -> byte (as `bytes_to_unicode`). */
function gpt2UnicodeToByte(): Map<string, number> {
  const printable: number[] = [];
  for (let byte = 0x21; byte <= 0x7e; byte++) printable.push(byte);
  for (let byte = 0xa1; byte <= 0xac; byte++) printable.push(byte);
  for (let byte = 0xae; byte <= 0xff; byte++) printable.push(byte);
  const map = new Map<string, number>();
  let extra = 0;
  for (let byte = 0; byte < 256; byte++) {
    const code = printable.includes(byte) ? byte : 256 + extra++;
    map.set(String.fromCodePoint(code), byte);
  }
  return map;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8");
const BYTE_TOKEN = /^<0x([0-9A-Fa-f]{2})>$/;

/**
 * Token id -> bytes and text, for SentencePiece (`llama`) and byte-level BPE (`gpt2`) vocabularies.
 * The pieces are kept packed (one UTF-8 buffer, an offset per token and a type byte per token: about
 * 2.5 MB for a 152k-token vocabulary, against ~12 MiB of V8 heap as one string per token); a piece is
 * decoded when asked for.
 */
export class TokenVocabulary {
  /** Every piece's UTF-8 bytes, one after another. */
  private readonly packed: Uint8Array;
  /** `offsets[id]..offsets[id + 1]` is token `id`'s piece in {@link packed}; `size + 1` entries. */
  private readonly offsets: Uint32Array;
  /** `tokenizer.ggml.token_type` per token (0 where absent). */
  private readonly types: Uint8Array;
  private readonly byteLevel: boolean;
  private readonly unicodeToByte: Map<string, number> | undefined;

  /**
   * @param pieces `tokenizer.ggml.tokens` (not kept: copied into one buffer).
   * @param types `tokenizer.ggml.token_type` (3 = control, 6 = byte), or [] when absent.
   * @param model `tokenizer.ggml.model`: "gpt2" for byte-level BPE; anything else is treated as
   *   SentencePiece (`▁` for a space, `<0xNN>` byte tokens).
   */
  constructor(pieces: readonly string[], types: readonly number[], model: string) {
    const offsets = new Uint32Array(pieces.length + 1);
    let bytes = 0;
    for (let id = 0; id < pieces.length; id++) {
      bytes += Buffer.byteLength(pieces[id] as string, "utf8");
      offsets[id + 1] = bytes;
    }
    const packed = new Uint8Array(bytes);
    for (let id = 0; id < pieces.length; id++)
      encoder.encodeInto(pieces[id] as string, packed.subarray(offsets[id], offsets[id + 1]));
    this.packed = packed;
    this.offsets = offsets;
    this.types = Uint8Array.from({ length: pieces.length }, (_, id) => types[id] ?? 0);
    this.byteLevel = model === "gpt2";
    this.unicodeToByte = this.byteLevel ? gpt2UnicodeToByte() : undefined;
  }

  /** Number of tokens. */
  get size(): number {
    return this.types.length;
  }

  /** The token's piece as the GGUF stores it (`tokenizer.ggml.tokens`), or "" for an unknown id. */
  piece(id: number): string {
    if (!Number.isInteger(id) || id < 0 || id >= this.types.length) return "";
    return decoder.decode(this.packed.subarray(this.offsets[id], this.offsets[id + 1]));
  }

  /** The token's UTF-8 bytes as they appear in generated text (a control token: its own text). */
  bytes(id: number): Uint8Array {
    const piece = this.piece(id);
    if (this.types[id] === 3) return encoder.encode(piece);
    if (this.unicodeToByte) {
      const table = this.unicodeToByte;
      const out: number[] = [];
      for (const char of piece) {
        const byte = table.get(char);
        if (byte === undefined) out.push(...encoder.encode(char));
        else out.push(byte);
      }
      return Uint8Array.from(out);
    }
    const match = BYTE_TOKEN.exec(piece);
    return match
      ? Uint8Array.of(Number.parseInt(match[1] as string, 16))
      : encoder.encode(piece.replaceAll("\u2581", " "));
  }

  /** The text the token adds to generated text: "" for control tokens (BOS, EOS), else {@link text}. */
  renderedText(id: number): string {
    return this.types[id] === 3 ? "" : this.text(id);
  }

  /** The token's text (U+FFFD where it holds only part of a UTF-8 character). */
  text(id: number): string {
    return decoder.decode(this.bytes(id));
  }
}

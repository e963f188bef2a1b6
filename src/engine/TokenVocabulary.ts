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

/** Token id -> bytes and text, for SentencePiece (`llama`) and byte-level BPE (`gpt2`) vocabularies. */
export class TokenVocabulary {
  private readonly pieces: readonly string[];
  private readonly types: readonly number[];
  private readonly byteLevel: boolean;
  private readonly unicodeToByte: Map<string, number> | undefined;
  private readonly cache = new Map<number, Uint8Array>();

  /**
   * @param pieces `tokenizer.ggml.tokens`.
   * @param types `tokenizer.ggml.token_type` (3 = control, 6 = byte), or [] when absent.
   * @param model `tokenizer.ggml.model`: "gpt2" for byte-level BPE; anything else is treated as
   *   SentencePiece (`▁` for a space, `<0xNN>` byte tokens).
   */
  constructor(pieces: readonly string[], types: readonly number[], model: string) {
    this.pieces = pieces;
    this.types = types;
    this.byteLevel = model === "gpt2";
    this.unicodeToByte = this.byteLevel ? gpt2UnicodeToByte() : undefined;
  }

  /** Number of tokens. */
  get size(): number {
    return this.pieces.length;
  }

  /** The token's piece as the GGUF stores it (`tokenizer.ggml.tokens`), or "" for an unknown id. */
  piece(id: number): string {
    return this.pieces[id] ?? "";
  }

  /** The token's UTF-8 bytes as they appear in generated text (a control token: its own text). */
  bytes(id: number): Uint8Array {
    let bytes = this.cache.get(id);
    if (bytes) return bytes;
    const piece = this.pieces[id] ?? "";
    if (this.types[id] === 3) bytes = encoder.encode(piece);
    else if (this.unicodeToByte) {
      const table = this.unicodeToByte;
      bytes = Uint8Array.from(
        [...piece].flatMap((char) => {
          const byte = table.get(char);
          return byte === undefined ? [...encoder.encode(char)] : [byte];
        }),
      );
    } else {
      const match = BYTE_TOKEN.exec(piece);
      bytes = match
        ? Uint8Array.of(Number.parseInt(match[1] as string, 16))
        : encoder.encode(piece.replaceAll("\u2581", " "));
    }
    this.cache.set(id, bytes);
    return bytes;
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

/**
 * A minimal GGUF v3 metadata reader: parses the header and the key/value section of a local file
 * (never the tensor data) and keeps every value's encoded bytes, so keys can be copied into another
 * GGUF file byte for byte. Used to take a tokenizer (and chat template) from llama.cpp's
 * `ggml-vocab-*.gguf` files or from any real model file.
 *
 * Source: ggml's `docs/gguf.md` (file structure) and `ggml/src/gguf.cpp` (`gguf_init_from_file_impl`).
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { GGUF_MAGIC, GGUF_SCALAR_SIZE, GGUF_VERSION, type GgufScalarType, GgufValueType } from "./format.ts";

/** A decoded scalar metadata value: 64-bit integers are bigints, BOOL is boolean. */
export type GgufScalar = number | bigint | boolean | string;

/** One metadata entry as read from a file. */
export interface GgufKv {
  /** The key, e.g. `tokenizer.ggml.tokens`. */
  key: string;
  /** The value's type tag. */
  type: GgufValueType;
  /** For arrays: the element type tag; otherwise undefined. */
  elementType?: GgufScalarType;
  /** The decoded value (an array for ARRAY); strings are decoded as UTF-8 for inspection only. */
  value: GgufScalar | GgufScalar[];
  /** The encoded value exactly as in the file: type tag (u32), then the value (arrays: element tag, count, elements). */
  raw: Uint8Array;
}

/** The parsed head of a GGUF file. */
export interface GgufMetadata {
  /** Container version (always 3 here). */
  version: number;
  /** Number of tensors the file declares. */
  tensorCount: bigint;
  /** Metadata entries in file order. */
  kvs: GgufKv[];
}

/** What {@link readVocab} extracts from a vocabulary (or model) GGUF. */
export interface VocabInfo {
  /** Every `tokenizer.*` entry, in file order, ready to be copied verbatim. */
  tokenizerKvs: GgufKv[];
  /** Length of `tokenizer.ggml.tokens`: the model's `n_vocab` (rows of `token_embd.weight`). */
  tokenCount: number;
  /** `tokenizer.ggml.model` (e.g. `gpt2` for byte-level BPE). */
  tokenizerModel: string;
  /** `tokenizer.ggml.pre`, when present (e.g. `qwen2`, `llama-bpe`). */
  preTokenizer?: string | undefined;
  /** `tokenizer.chat_template`, when present. */
  chatTemplate?: string | undefined;
  /** The source file's `general.architecture`, when present. */
  architecture?: string | undefined;
}

/** Synchronous cursor over a file that reads more bytes on demand (the head only, not the tensors). */
class FileCursor {
  private buffer = Buffer.alloc(0);
  private loaded = 0;
  pos = 0;
  private readonly size: number;

  constructor(
    private readonly fd: number,
    private readonly path: string,
  ) {
    this.size = fstatSync(fd).size;
  }

  /** Makes sure `n` bytes from `pos` are in memory; throws at end of file. */
  private ensure(n: number): void {
    const end = this.pos + n;
    if (end <= this.loaded) return;
    if (end > this.size)
      throw new Error(`${this.path}: truncated GGUF (needs byte ${end}, size ${this.size})`);
    const capacity = Math.min(this.size, Math.max(end, this.buffer.length * 2, 1 << 20));
    if (capacity > this.buffer.length) {
      const grown = Buffer.alloc(capacity);
      this.buffer.copy(grown, 0, 0, this.loaded);
      this.buffer = grown;
    }
    while (this.loaded < capacity) {
      const got = readSync(this.fd, this.buffer, this.loaded, capacity - this.loaded, this.loaded);
      if (got === 0) throw new Error(`${this.path}: unexpected end of file`);
      this.loaded += got;
    }
  }

  /** Copy of the bytes in [start, end). */
  slice(start: number, end: number): Uint8Array {
    return Uint8Array.prototype.slice.call(this.buffer, start, end);
  }

  u32(): number {
    this.ensure(4);
    const v = this.buffer.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }

  u64(): bigint {
    this.ensure(8);
    const v = this.buffer.readBigUInt64LE(this.pos);
    this.pos += 8;
    return v;
  }

  /** Reads a gguf_string (u64 length + UTF-8 bytes). */
  string(): string {
    const length = Number(this.u64());
    this.ensure(length);
    const s = this.buffer.toString("utf8", this.pos, this.pos + length);
    this.pos += length;
    return s;
  }

  scalar(type: GgufScalarType): GgufScalar {
    if (type === GgufValueType.STRING) return this.string();
    const size = GGUF_SCALAR_SIZE[type];
    if (size === undefined) throw new Error(`${this.path}: unknown GGUF value type ${type}`);
    this.ensure(size);
    const b = this.buffer;
    const p = this.pos;
    this.pos += size;
    switch (type) {
      case GgufValueType.UINT8:
        return b.readUInt8(p);
      case GgufValueType.INT8:
        return b.readInt8(p);
      case GgufValueType.UINT16:
        return b.readUInt16LE(p);
      case GgufValueType.INT16:
        return b.readInt16LE(p);
      case GgufValueType.UINT32:
        return b.readUInt32LE(p);
      case GgufValueType.INT32:
        return b.readInt32LE(p);
      case GgufValueType.FLOAT32:
        return b.readFloatLE(p);
      case GgufValueType.BOOL:
        return b.readUInt8(p) !== 0;
      case GgufValueType.UINT64:
        return b.readBigUInt64LE(p);
      case GgufValueType.INT64:
        return b.readBigInt64LE(p);
      default:
        return b.readDoubleLE(p);
    }
  }
}

/** True when `t` is a known value type tag other than ARRAY. */
function isScalarType(t: number): t is GgufScalarType {
  return t === GgufValueType.STRING || GGUF_SCALAR_SIZE[t as GgufScalarType] !== undefined;
}

/**
 * Reads the header and all metadata key/value pairs of a local GGUF v3 file.
 *
 * @param path - Path of a little-endian GGUF v3 file.
 * @returns The version, declared tensor count and entries (each with its raw encoded bytes).
 * @throws {Error} when the file is missing, not GGUF, not version 3 (e.g. big-endian), truncated,
 *   or uses an unknown value type / nested arrays.
 */
export function readGgufMetadata(path: string): GgufMetadata {
  const fd = openSync(path, "r");
  try {
    const cur = new FileCursor(fd, path);
    const m = cur.u32();
    if (m !== Buffer.from(GGUF_MAGIC, "latin1").readUInt32LE(0)) throw new Error(`${path}: not a GGUF file`);
    const version = cur.u32();
    if (version !== GGUF_VERSION) {
      throw new Error(`${path}: unsupported GGUF version ${version} (only little-endian v${GGUF_VERSION})`);
    }
    const tensorCount = cur.u64();
    const kvCount = Number(cur.u64());
    const kvs: GgufKv[] = [];
    for (let i = 0; i < kvCount; i++) {
      const key = cur.string();
      const start = cur.pos;
      const type = cur.u32();
      if (type === GgufValueType.ARRAY) {
        const elementType = cur.u32();
        if (!isScalarType(elementType))
          throw new Error(`${path}: ${key}: unsupported array element type ${elementType}`);
        const count = Number(cur.u64());
        const values: GgufScalar[] = new Array(count);
        for (let j = 0; j < count; j++) values[j] = cur.scalar(elementType);
        kvs.push({ key, type, elementType, value: values, raw: cur.slice(start, cur.pos) });
      } else if (isScalarType(type)) {
        const value = cur.scalar(type);
        kvs.push({ key, type, value, raw: cur.slice(start, cur.pos) });
      } else {
        throw new Error(`${path}: ${key}: unknown GGUF value type ${type}`);
      }
    }
    return { version, tensorCount, kvs };
  } finally {
    closeSync(fd);
  }
}

/**
 * Extracts the tokenizer of a GGUF file: every `tokenizer.*` key (tokens, token_type, merges,
 * scores, special token ids, `tokenizer.ggml.pre`, `tokenizer.chat_template`, ...), unchanged.
 *
 * @param path - A llama.cpp vocabulary file such as `ggml-vocab-qwen2.gguf`, or any model GGUF.
 * @throws {Error} as {@link readGgufMetadata}, or when `tokenizer.ggml.tokens` / `tokenizer.ggml.model`
 *   is missing or has the wrong type.
 */
export function readVocab(path: string): VocabInfo {
  const { kvs } = readGgufMetadata(path);
  const byKey = new Map(kvs.map((kv) => [kv.key, kv]));
  const text = (key: string): string | undefined => {
    const v = byKey.get(key)?.value;
    return typeof v === "string" ? v : undefined;
  };
  const tokens = byKey.get("tokenizer.ggml.tokens");
  if (!tokens || !Array.isArray(tokens.value) || tokens.elementType !== GgufValueType.STRING) {
    throw new Error(`${path}: no tokenizer.ggml.tokens string array`);
  }
  const tokenizerModel = text("tokenizer.ggml.model");
  if (tokenizerModel === undefined) throw new Error(`${path}: no tokenizer.ggml.model`);
  return {
    tokenizerKvs: kvs.filter((kv) => kv.key.startsWith("tokenizer.")),
    tokenCount: tokens.value.length,
    tokenizerModel,
    preTokenizer: text("tokenizer.ggml.pre"),
    chatTemplate: text("tokenizer.chat_template"),
    architecture: text("general.architecture"),
  };
}

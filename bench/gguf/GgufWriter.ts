/**
 * A streaming GGUF v3 writer: metadata and tensor infos are assembled in memory (a few MB for a
 * 152K-token vocabulary), then each tensor's data is pulled chunk by chunk from its producer and
 * appended to the file, so a 500 MB model never sits in one buffer.
 *
 * Layout (ggml `docs/gguf.md`, `gguf_write_to_buf` in `ggml/src/gguf.cpp`): magic "GGUF", u32
 * version, u64 tensor count, u64 kv count, the key/value pairs (gguf_string key, u32 type, value),
 * the tensor infos (gguf_string name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml_type,
 * u64 offset relative to the data section), zero padding to `general.alignment`, then the tensor
 * data, each tensor padded with zeros to the alignment (the last one too, as ggml does; gguf.cpp
 * requires offset[i] = offset[i-1] + padded size[i-1]). Little-endian only.
 */
import { open, rename, rm } from "node:fs/promises";
import {
  alignUp,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_SCALAR_SIZE,
  GGUF_VERSION,
  type GgmlType,
  type GgufScalarType,
  GgufValueType,
  tensorByteSize,
} from "./format.ts";
import type { GgufScalar } from "./readVocab.ts";

/** A metadata value to write: a typed scalar, a typed array, or bytes copied from another file. */
export type GgufWriteValue =
  | { kind: "scalar"; type: GgufScalarType; value: GgufScalar }
  | { kind: "array"; elementType: GgufScalarType; values: readonly GgufScalar[] }
  /** Pre-encoded type tag + value, e.g. {@link GgufKv.raw} from `readVocab.ts`; written as is. */
  | { kind: "raw"; bytes: Uint8Array };

/** Produces a tensor's data as consecutive chunks (sync or async); together exactly its byte size. */
export type TensorDataSource = () => Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

/** A tensor to write. */
export interface GgufTensorSpec {
  /** Tensor name, e.g. `blk.0.attn_q.weight`. */
  name: string;
  /** Dimensions in ggml `ne` order (innermost / row length first), e.g. `[n_embd, n_vocab]`. */
  dims: readonly number[];
  /** Element type of the data. */
  type: GgmlType;
  /** Producer of the encoded data. */
  data: TensorDataSource;
}

/** Progress callback: called after each tensor with its index, the tensor count and its name. */
export type WriteProgress = (done: number, total: number, name: string) => void;

/** Growable little-endian byte buffer for the file head. */
class ByteSink {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;
  private static readonly encoder = new TextEncoder();

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buf.subarray(0, this.length));
    this.buf = grown;
    this.view = new DataView(grown.buffer);
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }

  u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, v, true);
    this.length += 4;
  }

  u64(v: number | bigint): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, BigInt(v), true);
    this.length += 8;
  }

  string(s: string): void {
    const encoded = ByteSink.encoder.encode(s);
    this.u64(encoded.length);
    this.bytes(encoded);
  }

  scalar(type: GgufScalarType, v: GgufScalar): void {
    if (type === GgufValueType.STRING) {
      if (typeof v !== "string") throw new TypeError(`expected a string, got ${typeof v}`);
      this.string(v);
      return;
    }
    const size = GGUF_SCALAR_SIZE[type]!;
    this.reserve(size);
    const p = this.length;
    const dv = this.view;
    const n = typeof v === "boolean" ? Number(v) : v;
    if (typeof n === "string") throw new TypeError(`expected a number for type ${type}, got a string`);
    switch (type) {
      case GgufValueType.UINT8:
      case GgufValueType.BOOL:
        dv.setUint8(p, Number(n));
        break;
      case GgufValueType.INT8:
        dv.setInt8(p, Number(n));
        break;
      case GgufValueType.UINT16:
        dv.setUint16(p, Number(n), true);
        break;
      case GgufValueType.INT16:
        dv.setInt16(p, Number(n), true);
        break;
      case GgufValueType.UINT32:
        dv.setUint32(p, Number(n), true);
        break;
      case GgufValueType.INT32:
        dv.setInt32(p, Number(n), true);
        break;
      case GgufValueType.FLOAT32:
        dv.setFloat32(p, Number(n), true);
        break;
      case GgufValueType.UINT64:
        dv.setBigUint64(p, BigInt(n), true);
        break;
      case GgufValueType.INT64:
        dv.setBigInt64(p, BigInt(n), true);
        break;
      default:
        dv.setFloat64(p, Number(n), true);
    }
    this.length += size;
  }

  /** The bytes written so far, zero-padded to a multiple of `alignment`. */
  padded(alignment: number): Uint8Array {
    const total = alignUp(this.length, alignment);
    this.reserve(total - this.length);
    this.buf.fill(0, this.length, total);
    return this.buf.subarray(0, total);
  }
}

/**
 * Collects metadata and tensors, then writes a GGUF v3 file.
 *
 * Usage: `addKv`/`addTensor` in the order they should appear, then `write(path)`. The writer does
 * not add `general.alignment` itself; add it (as UINT32) when using a non-default alignment.
 */
export class GgufWriter {
  private readonly kvs: { key: string; value: GgufWriteValue }[] = [];
  private readonly tensors: GgufTensorSpec[] = [];

  /**
   * @param alignment - Tensor data alignment in bytes (must match `general.alignment` if written;
   *   llama.cpp assumes 32 when the key is absent).
   * @throws {RangeError} when `alignment` is not a positive power of two (gguf.cpp's requirement).
   */
  constructor(readonly alignment: number = GGUF_DEFAULT_ALIGNMENT) {
    if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
      throw new RangeError(`alignment must be a power of two, got ${alignment}`);
    }
  }

  /**
   * Adds a metadata pair.
   *
   * @throws {Error} when `key` was already added (GGUF keys are unique).
   */
  addKv(key: string, value: GgufWriteValue): this {
    if (this.kvs.some((kv) => kv.key === key)) throw new Error(`duplicate GGUF key ${key}`);
    this.kvs.push({ key, value });
    return this;
  }

  /** Shorthand for a scalar {@link addKv}. */
  addScalar(key: string, type: GgufScalarType, value: GgufScalar): this {
    return this.addKv(key, { kind: "scalar", type, value });
  }

  /**
   * Adds a tensor; its data source is only consumed by {@link write}.
   *
   * @throws {Error} for a duplicate name, or {@link tensorByteSize}'s RangeError for a row length that
   *   is not a multiple of the type's block size.
   */
  addTensor(spec: GgufTensorSpec): this {
    if (this.tensors.some((t) => t.name === spec.name)) throw new Error(`duplicate tensor ${spec.name}`);
    tensorByteSize(spec.dims, spec.type);
    this.tensors.push(spec);
    return this;
  }

  /** Names and byte sizes of the tensors added so far, in order. */
  tensorSizes(): { name: string; bytes: number }[] {
    return this.tensors.map((t) => ({ name: t.name, bytes: tensorByteSize(t.dims, t.type) }));
  }

  /** Encodes the head: header, metadata, tensor infos, padded to the alignment. */
  private encodeHead(): Uint8Array {
    const sink = new ByteSink();
    sink.bytes(new TextEncoder().encode(GGUF_MAGIC));
    sink.u32(GGUF_VERSION);
    sink.u64(this.tensors.length);
    sink.u64(this.kvs.length);
    for (const { key, value } of this.kvs) {
      sink.string(key);
      if (value.kind === "raw") {
        sink.bytes(value.bytes);
      } else if (value.kind === "scalar") {
        sink.u32(value.type);
        sink.scalar(value.type, value.value);
      } else {
        sink.u32(GgufValueType.ARRAY);
        sink.u32(value.elementType);
        sink.u64(value.values.length);
        for (const v of value.values) sink.scalar(value.elementType, v);
      }
    }
    let offset = 0;
    for (const t of this.tensors) {
      sink.string(t.name);
      sink.u32(t.dims.length);
      for (const d of t.dims) sink.u64(d);
      sink.u32(t.type);
      sink.u64(offset);
      offset = alignUp(offset + tensorByteSize(t.dims, t.type), this.alignment);
    }
    return sink.padded(this.alignment);
  }

  /**
   * Writes the file to `path` via `path + ".partial"` and a final rename, so a crashed run never
   * leaves a truncated model under the real name.
   *
   * @returns Total file size in bytes.
   * @throws {Error} when a tensor source yields a different number of bytes than its shape needs,
   *   or on I/O errors (the partial file is removed).
   */
  async write(path: string, onProgress?: WriteProgress): Promise<number> {
    const partial = `${path}.partial`;
    const handle = await open(partial, "w");
    let position = 0;
    try {
      const head = this.encodeHead();
      await handle.write(head, 0, head.length, position);
      position += head.length;
      const zeros = new Uint8Array(this.alignment);
      for (const [index, t] of this.tensors.entries()) {
        const expected = tensorByteSize(t.dims, t.type);
        let written = 0;
        for await (const chunk of t.data()) {
          if (written + chunk.length > expected)
            throw new Error(`${t.name}: source yields more than ${expected} bytes`);
          await handle.write(chunk, 0, chunk.length, position);
          position += chunk.length;
          written += chunk.length;
        }
        if (written !== expected)
          throw new Error(`${t.name}: source yielded ${written} of ${expected} bytes`);
        const pad = alignUp(written, this.alignment) - written;
        if (pad > 0) {
          await handle.write(zeros, 0, pad, position);
          position += pad;
        }
        onProgress?.(index + 1, this.tensors.length, t.name);
      }
      await handle.close();
    } catch (error) {
      await handle.close().catch(() => {});
      await rm(partial, { force: true });
      throw error;
    }
    await rename(partial, path);
    return position;
  }
}

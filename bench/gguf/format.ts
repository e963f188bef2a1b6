/**
 * Constants of the GGUF v3 file format, shared by the reader (`readVocab.ts`) and the writer
 * (`GgufWriter.ts`).
 *
 * Source: ggml's `docs/gguf.md` and `ggml/include/gguf.h` (value types), `ggml/include/ggml.h`
 * (`enum ggml_type`), `ggml/src/ggml-common.h` (`block_q8_0`) and llama.cpp's `include/llama.h`
 * (`enum llama_ftype`). Only little-endian files are supported.
 */

/** The four magic bytes every GGUF file starts with ("GGUF"). */
export const GGUF_MAGIC = "GGUF";

/** The GGUF container version this code writes (and the only one it reads). */
export const GGUF_VERSION = 3;

/** Default (and llama.cpp's assumed) alignment of the tensor data section, in bytes. */
export const GGUF_DEFAULT_ALIGNMENT = 32;

/**
 * Metadata value type tags (`enum gguf_type` in gguf.h), written as a little-endian u32 before
 * every value; arrays are followed by an element type tag (u32) and a count (u64).
 */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** One of the {@link GgufValueType} tags (0..12). */
export type GgufValueType = (typeof GgufValueType)[keyof typeof GgufValueType];

/** Every {@link GgufValueType} except ARRAY: the types a scalar or an array element may have. */
export type GgufScalarType = Exclude<GgufValueType, typeof GgufValueType.ARRAY>;

/** Byte size of each fixed-size scalar type; STRING (u64 length + UTF-8 bytes) is absent. */
export const GGUF_SCALAR_SIZE: Readonly<Partial<Record<GgufScalarType, number>>> = {
  [GgufValueType.UINT8]: 1,
  [GgufValueType.INT8]: 1,
  [GgufValueType.UINT16]: 2,
  [GgufValueType.INT16]: 2,
  [GgufValueType.UINT32]: 4,
  [GgufValueType.INT32]: 4,
  [GgufValueType.FLOAT32]: 4,
  [GgufValueType.BOOL]: 1,
  [GgufValueType.UINT64]: 8,
  [GgufValueType.INT64]: 8,
  [GgufValueType.FLOAT64]: 8,
};

/** The tensor element types this tool writes (`enum ggml_type` in ggml.h). */
export const GgmlType = {
  F32: 0,
  F16: 1,
  Q8_0: 8,
} as const;

/** One of the {@link GgmlType} ids. */
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

/**
 * Block layout per tensor type: `blockSize` elements are stored in `typeSize` bytes
 * (ggml's `type_traits[].blck_size` / `.type_size`). Q8_0 is `{ f16 d; int8 qs[32]; }`.
 */
export const GGML_TYPE_LAYOUT: Readonly<Record<GgmlType, { blockSize: number; typeSize: number }>> = {
  [GgmlType.F32]: { blockSize: 1, typeSize: 4 },
  [GgmlType.F16]: { blockSize: 1, typeSize: 2 },
  [GgmlType.Q8_0]: { blockSize: 32, typeSize: 34 },
};

/**
 * `general.file_type` values (`enum llama_ftype` in llama.h) for the weight types this tool writes.
 */
export const LlamaFileType = {
  ALL_F32: 0,
  MOSTLY_F16: 1,
  MOSTLY_Q8_0: 7,
} as const;

/**
 * Size in bytes of a tensor's data (without alignment padding).
 *
 * @param dims - Dimensions in ggml `ne` order (innermost first); `dims[0]` must be a multiple of the
 *   type's block size.
 * @throws {RangeError} when `dims[0]` is not a multiple of the block size.
 */
export function tensorByteSize(dims: readonly number[], type: GgmlType): number {
  const { blockSize, typeSize } = GGML_TYPE_LAYOUT[type];
  const rowLength = dims[0] ?? 1;
  if (rowLength % blockSize !== 0) {
    throw new RangeError(`row length ${rowLength} is not a multiple of the block size ${blockSize}`);
  }
  const elements = dims.reduce((product, d) => product * d, 1);
  return (elements / blockSize) * typeSize;
}

/** Rounds `offset` up to the next multiple of `alignment` (both in bytes). */
export function alignUp(offset: number, alignment: number): number {
  return Math.ceil(offset / alignment) * alignment;
}

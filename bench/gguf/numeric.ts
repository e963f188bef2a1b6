/**
 * Number crunching for synthetic weights: a seeded PRNG producing normal-ish floats, IEEE half
 * conversion and ggml's Q8_0 block quantization.
 *
 * Sources: SFC32 / SplitMix32 (PractRand, public domain); binary16 rounding per IEEE 754
 * (round to nearest, ties to even, as ggml's `GGML_FP32_TO_FP16`); Q8_0 per ggml's
 * `quantize_row_q8_0_ref` in `ggml/src/ggml-quants.c`.
 */

/** Elements per Q8_0 block (ggml's `QK8_0`). */
export const QK8_0 = 32;

/** Bytes per Q8_0 block: f16 scale + 32 int8. */
export const Q8_0_BLOCK_BYTES = 34;

/** FNV-1a 32-bit hash of a string's UTF-16 code units (used to derive per-tensor seeds). */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * A seeded SFC32 generator whose `fillNormal` produces approximately normal values
 * (Irwin–Hall sum of the four bytes of one 32-bit draw, rescaled to the requested std; bounded to
 * about ±3.5 std). The same `(seed, stream)` pair always yields the same sequence.
 */
export class WeightRng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /**
   * @param seed - Any 32-bit integer (the CLI's `--seed`).
   * @param stream - A name (e.g. the tensor name) mixed into the seed, so each tensor is
   *   reproducible independently of the order tensors are written in.
   */
  constructor(seed: number, stream: string) {
    let s = (seed ^ fnv1a32(stream)) >>> 0;
    const splitmix = (): number => {
      s = (s + 0x9e3779b9) | 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = splitmix();
    this.b = splitmix();
    this.c = splitmix();
    this.d = splitmix();
    for (let i = 0; i < 12; i++) this.next();
  }

  /** Next uniform 32-bit unsigned integer. */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /**
   * Fills `out` with normal-ish values of mean 0 and standard deviation `std`.
   *
   * @param out - Destination, overwritten entirely.
   * @param std - Target standard deviation (e.g. 0.02, the usual initializer scale).
   */
  fillNormal(out: Float32Array, std: number): void {
    // Sum of 4 uniform bytes: mean 510, variance 4 * (256^2 - 1) / 12.
    const scale = std / Math.sqrt((4 * (256 * 256 - 1)) / 12);
    let { a, b, c, d } = this;
    for (let i = 0; i < out.length; i++) {
      const t = (((a + b) | 0) + d) | 0;
      d = (d + 1) | 0;
      a = b ^ (b >>> 9);
      b = (c + (c << 3)) | 0;
      c = (c << 21) | (c >>> 11);
      c = (c + t) | 0;
      const sum = (t & 0xff) + ((t >>> 8) & 0xff) + ((t >>> 16) & 0xff) + (t >>> 24);
      out[i] = (sum - 510) * scale;
    }
    this.a = a;
    this.b = b;
    this.c = c;
    this.d = d;
  }
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/**
 * Converts a number to IEEE 754 binary16 bits (round to nearest, ties to even; overflow to ±inf,
 * NaN kept), like ggml's `GGML_FP32_TO_FP16`. The input is first rounded to float32.
 *
 * @returns The 16-bit pattern as an integer in [0, 65535].
 */
export function floatToHalf(value: number): number {
  f32Scratch[0] = value;
  const x = u32Scratch[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1)) half++;
  return sign | half;
}

/** Converts IEEE 754 binary16 bits (0..65535) to a number (exact). */
export function halfToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/**
 * Quantizes `src` to Q8_0 blocks, exactly like `quantize_row_q8_0_ref`: per block of 32,
 * `d = max|x| / 127`, stored as f16, and `q = roundf(x / d)` (half away from zero) with the f32 `d`.
 *
 * @param src - Values; length must be a multiple of 32.
 * @param dst - Destination with room for `src.length / 32 * 34` bytes from `dstOffset`.
 * @throws {RangeError} when `src.length` is not a multiple of 32 or `dst` is too small.
 */
export function quantizeQ8_0(src: Float32Array, dst: Uint8Array, dstOffset = 0): void {
  if (src.length % QK8_0 !== 0) throw new RangeError(`Q8_0 needs a multiple of ${QK8_0} values`);
  const blocks = src.length / QK8_0;
  if (dstOffset + blocks * Q8_0_BLOCK_BYTES > dst.length) throw new RangeError("Q8_0 destination too small");
  for (let blk = 0; blk < blocks; blk++) {
    const base = blk * QK8_0;
    let amax = 0;
    for (let j = 0; j < QK8_0; j++) {
      const v = Math.abs(src[base + j]!);
      if (v > amax) amax = v;
    }
    const d = Math.fround(amax / 127);
    const id = d !== 0 ? Math.fround(1 / d) : 0;
    const half = floatToHalf(d);
    let o = dstOffset + blk * Q8_0_BLOCK_BYTES;
    dst[o] = half & 0xff;
    dst[o + 1] = half >>> 8;
    o += 2;
    for (let j = 0; j < QK8_0; j++) {
      const x = Math.fround(src[base + j]! * id);
      const q = x < 0 ? -Math.round(-x) : Math.round(x);
      dst[o + j] = q & 0xff;
    }
  }
}

/**
 * Expands Q8_0 blocks back to numbers (`d * q`), like ggml's `dequantize_row_q8_0`.
 *
 * @param src - Encoded blocks (34 bytes each).
 * @param blocks - Number of blocks to decode.
 * @returns `blocks * 32` values.
 */
export function dequantizeQ8_0(src: Uint8Array, blocks: number): Float32Array {
  const out = new Float32Array(blocks * QK8_0);
  for (let blk = 0; blk < blocks; blk++) {
    const o = blk * Q8_0_BLOCK_BYTES;
    const d = halfToFloat(src[o]! | (src[o + 1]! << 8));
    for (let j = 0; j < QK8_0; j++) {
      const q = src[o + 2 + j]!;
      out[blk * QK8_0 + j] = d * (q > 127 ? q - 256 : q);
    }
  }
  return out;
}

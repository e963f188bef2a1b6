/**
 * Small test images built in code (no image library): PNG and BMP encoders, a 1x1 GIF, and the first
 * bytes of a WebP file.
 *
 * Formats: PNG per RFC 2083 / the W3C PNG spec (8-bit RGB, filter 0 per row, zlib IDAT, CRC-32 per
 * chunk); BMP as a BITMAPFILEHEADER + BITMAPINFOHEADER, 24-bit BI_RGB, bottom-up rows padded to 4 bytes.
 */
import { crc32, deflateSync } from "node:zlib";

/** The colour of pixel (x, y) as [red, green, blue], each 0..255. */
export type PixelColour = (x: number, y: number) => readonly [number, number, number];

/** A diagonal red/blue gradient, for images whose content should not matter. */
export const gradient: PixelColour = (x, y) => [(x * 37) & 0xff, 128, (y * 53) & 0xff];

/** A `width` x `height` 8-bit RGB PNG. */
export function encodePng(width: number, height: number, colour: PixelColour = gradient): Uint8Array {
  const rows = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) {
    const row = y * (1 + width * 3); // byte 0 of each row: filter type 0 (None)
    for (let x = 0; x < width; x++) rows.set(colour(x, y), row + 1 + x * 3);
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // bit depth 8, colour type 2 (RGB), deflate, filter 0, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk("IHDR", header),
    pngChunk("IDAT", deflateSync(rows)),
    pngChunk("IEND", Buffer.alloc(0)),
  ]);
}

function pngChunk(type: string, data: Buffer): Buffer {
  const chunk = Buffer.alloc(12 + data.length);
  chunk.writeUInt32BE(data.length, 0);
  chunk.write(type, 4, "latin1");
  data.copy(chunk, 8);
  chunk.writeUInt32BE(crc32(chunk.subarray(4, 8 + data.length)), 8 + data.length);
  return chunk;
}

/** A `width` x `height` 24-bit uncompressed BMP. */
export function encodeBmp(width: number, height: number, colour: PixelColour = gradient): Uint8Array {
  const stride = Math.ceil((width * 3) / 4) * 4;
  const file = Buffer.alloc(54 + stride * height);
  file.write("BM", 0, "latin1");
  file.writeUInt32LE(file.length, 2);
  file.writeUInt32LE(54, 10); // offset of the pixels
  file.writeUInt32LE(40, 14); // BITMAPINFOHEADER size
  file.writeInt32LE(width, 18);
  file.writeInt32LE(height, 22); // positive: bottom-up
  file.writeUInt16LE(1, 26); // planes
  file.writeUInt16LE(24, 28); // bits per pixel
  file.writeUInt32LE(stride * height, 34);
  for (let y = 0; y < height; y++) {
    const row = 54 + (height - 1 - y) * stride;
    for (let x = 0; x < width; x++) {
      const [r, g, b] = colour(x, y);
      file.set([b, g, r], row + x * 3);
    }
  }
  return file;
}

/** A 1x1 GIF89a (one white pixel, a 2-colour palette), the classic smallest GIF. */
export const TINY_GIF: Uint8Array = Buffer.from(
  "R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==",
  "base64",
);

/** The first bytes of a lossy WebP file: a RIFF container of form type "WEBP" with a "VP8 " chunk. */
export const WEBP_HEADER: Uint8Array = Buffer.concat([
  Buffer.from("RIFF", "latin1"),
  Buffer.from([0x24, 0, 0, 0]),
  Buffer.from("WEBPVP8 ", "latin1"),
  Buffer.alloc(24),
]);

/** `bytes` as a base64 `data:` URL of type `mime`. */
export function dataUrl(bytes: Uint8Array, mime: string): string {
  return `data:${mime};base64,${Buffer.from(bytes).toString("base64")}`;
}

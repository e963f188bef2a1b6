/**
 * An image's real format from its first bytes (its "magic number"), whatever a URL or a header claims.
 *
 * Signatures: PNG (RFC 2083 §3.1), JPEG (SOI marker FF D8 followed by a marker's FF), GIF ("GIF87a" /
 * "GIF89a"), BMP ("BM" file header), WebP (a RIFF container of form type "WEBP"), as stb_image's
 * `stbi__*_test` functions check them.
 */

/** The formats llama.cpp's `mtmd` decodes (through stb_image) and that lmserve accepts. */
export type SupportedImageMime = "image/png" | "image/jpeg" | "image/gif" | "image/bmp";

/**
 * The MIME type of the image format `bytes` start with: one of {@link SupportedImageMime}, `"image/webp"`
 * (recognised in order to be refused by name: stb_image has no WebP decoder), or undefined for anything else.
 */
export function imageType(bytes: Uint8Array): SupportedImageMime | "image/webp" | undefined {
  const startsWith = (signature: readonly number[], at = 0): boolean =>
    bytes.length >= at + signature.length && signature.every((b, i) => bytes[at + i] === b);
  if (startsWith([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (startsWith([0xff, 0xd8, 0xff])) return "image/jpeg";
  if (startsWith(ascii("GIF87a")) || startsWith(ascii("GIF89a"))) return "image/gif";
  if (startsWith(ascii("BM")) && bytes.length >= 26) return "image/bmp";
  if (startsWith(ascii("RIFF")) && startsWith(ascii("WEBP"), 8)) return "image/webp";
  return undefined;
}

function ascii(text: string): number[] {
  return [...text].map((c) => c.charCodeAt(0));
}

/**
 * Pixels an image may have, width times height: Pillow's `Image.MAX_IMAGE_PIXELS` (89,478,485, its
 * decompression-bomb threshold), beyond which decoding would allocate gigabytes (a 20000x20000 RGB
 * image is 1.2 GB).
 */
export const MAX_IMAGE_PIXELS = 89_478_485;

/**
 * The width and height an image's header declares, in pixels, read without decoding: PNG's IHDR, GIF's
 * logical screen (which has no check of its own: corrupt bytes read as any size), BMP's info header
 * (a negative height means top-down), JPEG's first SOFn marker. Undefined when the header is cut short or
 * malformed, or the format is none of {@link SupportedImageMime}.
 */
export function imageDimensions(bytes: Uint8Array): { width: number; height: number } | undefined {
  const type = imageType(bytes);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (type === "image/png") {
    // The first chunk must be IHDR (RFC 2083 §4.1.1).
    if (bytes.length < 24 || String.fromCharCode(...bytes.subarray(12, 16)) !== "IHDR") return undefined;
    return { width: view.getUint32(16), height: view.getUint32(20) };
  }
  if (type === "image/gif") {
    if (bytes.length < 10) return undefined;
    return { width: view.getUint16(6, true), height: view.getUint16(8, true) };
  }
  if (type === "image/bmp") {
    // The info header's own size tells the known BMP versions (as stb_image's `stbi__bmp_test`).
    if (![12, 40, 56, 108, 124].includes(view.getUint32(14, true))) return undefined;
    return { width: Math.abs(view.getInt32(18, true)), height: Math.abs(view.getInt32(22, true)) };
  }
  if (type === "image/jpeg") {
    let at = 2;
    while (at + 4 <= bytes.length) {
      if (bytes[at] !== 0xff) return undefined;
      const marker = bytes[at + 1] as number;
      if (marker === 0xff) {
        at++;
        continue;
      }
      const length = view.getUint16(at + 2);
      // SOF0-SOF15, except DHT (C4), JPG (C8) and DAC (CC).
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        if (at + 9 > bytes.length) return undefined;
        return { width: view.getUint16(at + 7), height: view.getUint16(at + 5) };
      }
      at += 2 + length;
    }
  }
  return undefined;
}

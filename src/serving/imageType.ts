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

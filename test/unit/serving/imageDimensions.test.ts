/** Image dimensions from headers, and the refusal of images over `MAX_IMAGE_PIXELS` (issue 31). */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiError } from "../../../src/errors.ts";
import { refuseTooLarge } from "../../../src/serving/images/chatImages.ts";
import { imageDimensions, MAX_IMAGE_PIXELS } from "../../../src/serving/images/imageType.ts";

/** A PNG signature and IHDR chunk declaring `width` x `height` (no pixel data: the header is enough). */
function pngHeader(width: number, height: number): Uint8Array {
  const bytes = new Uint8Array(33);
  bytes.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
  const view = new DataView(bytes.buffer);
  view.setUint32(16, width);
  view.setUint32(20, height);
  bytes.set([8, 2, 0, 0, 0], 24);
  return bytes;
}

describe("image dimensions", () => {
  test("are read from PNG, GIF, BMP and JPEG headers", () => {
    assert.deepEqual(imageDimensions(pngHeader(640, 480)), { width: 640, height: 480 });
    const gif = new Uint8Array([...Buffer.from("GIF89a"), 0x20, 0x03, 0x58, 0x02, 0, 0, 0]);
    assert.deepEqual(imageDimensions(gif), { width: 800, height: 600 });
    const bmp = new Uint8Array(30);
    bmp.set(Buffer.from("BM"));
    new DataView(bmp.buffer).setUint32(14, 40, true);
    new DataView(bmp.buffer).setInt32(18, 100, true);
    new DataView(bmp.buffer).setInt32(22, -50, true);
    assert.deepEqual(imageDimensions(bmp), { width: 100, height: 50 });
    // SOI, an APP0 segment of 16 bytes, then SOF0 with height 300 and width 400.
    const jpeg = new Uint8Array([
      0xff,
      0xd8,
      0xff,
      0xe0,
      0,
      16,
      ...new Array(14).fill(0),
      0xff,
      0xc0,
      0,
      17,
      8,
      0x01,
      0x2c,
      0x01,
      0x90,
      3,
    ]);
    assert.deepEqual(imageDimensions(jpeg), { width: 400, height: 300 });
    assert.equal(imageDimensions(new Uint8Array([0x89, 0x50])), undefined);
    // A PNG whose first chunk is not IHDR, a BMP of no known header version: no dimensions to trust.
    const noIhdr = pngHeader(20_000, 20_000);
    noIhdr.set(Buffer.from("IDAT"), 12);
    assert.equal(imageDimensions(noIhdr), undefined);
    new DataView(bmp.buffer).setUint32(14, 7, true);
    assert.equal(imageDimensions(bmp), undefined);
  });

  test("a 20000x20000 image is refused as too large, naming the part; a large one under the limit passes", () => {
    assert.throws(
      () => refuseTooLarge(pngHeader(20_000, 20_000), "messages[0].content[1]"),
      (error: unknown) =>
        error instanceof ApiError &&
        error.status === 400 &&
        error.param === "messages[0].content[1]" &&
        /too large \(20000x20000 pixels; at most 89478485 pixels\)/.test(error.message),
    );
    refuseTooLarge(pngHeader(8192, 8192), "messages[0].content[1]");
    assert.ok(8192 * 8192 <= MAX_IMAGE_PIXELS);
  });
});

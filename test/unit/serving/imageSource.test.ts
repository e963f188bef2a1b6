/**
 * `loadImage`: data: URLs, http(s) fetches from a local server on 127.0.0.1 (refused as loopback
 * unless allowed), the size cap, redirects, a redirect to a private host (resolver replaced), DNS
 * pinning, timeouts, HTTP errors, and the magic-byte check. No external network.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { ApiError } from "../../../src/errors.ts";
import { type ImageSourceOptions, loadImage } from "../../../src/serving/images/imageSource.ts";
import { privateAddressKind } from "../../../src/serving/images/privateAddress.ts";
import { dataUrl, encodeBmp, encodePng, TINY_GIF, WEBP_HEADER } from "../../helpers/images.ts";

const PARAM = "messages[0].content[1]";
const PNG = encodePng(4, 4);
const JPEG_START = Uint8Array.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46, 0]);

let server: http.Server;
let base = "";
const open = new Set<http.ServerResponse>();

before(async () => {
  server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const hops = Number(url.searchParams.get("hops") ?? 0);
    switch (url.pathname) {
      case "/png":
        res.writeHead(200, { "content-type": "image/png" }).end(PNG);
        return;
      case "/webp":
        res.writeHead(200, { "content-type": "image/webp" }).end(WEBP_HEADER);
        return;
      case "/text":
        res.writeHead(200, { "content-type": "image/png" }).end("<html>not an image</html>");
        return;
      case "/big-declared":
        res.writeHead(200, { "content-length": 5000 }).end(Buffer.alloc(5000));
        return;
      case "/big-streamed":
        // No content-length: chunked, so only the running count can stop it.
        res.writeHead(200);
        for (let i = 0; i < 5; i++) res.write(Buffer.concat([PNG, Buffer.alloc(1000)]));
        res.end();
        return;
      case "/redirect":
        res.writeHead(302, { location: hops > 1 ? `/redirect?hops=${hops - 1}` : "/png" }).end();
        return;
      case "/to-private":
        res.writeHead(301, { location: `http://intranet.test:${url.searchParams.get("port")}/png` }).end();
        return;
      case "/slow":
        open.add(res); // never answered
        return;
      default:
        res.writeHead(404).end("no");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  for (const res of open) res.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Asserts that `loadImage` refuses with a 400 naming PARAM whose message matches `message`. */
async function refused(
  url: string,
  message: RegExp,
  options: Partial<ImageSourceOptions> = {},
): Promise<void> {
  await assert.rejects(loadImage(url, { param: PARAM, ...options }), (error: unknown) => {
    assert.ok(error instanceof ApiError, String(error));
    assert.equal(error.status, 400);
    assert.equal(error.param, PARAM);
    assert.match(error.message, message);
    return true;
  });
}

describe("loadImage: data: URLs", () => {
  test("base64 PNG, JPEG, GIF and BMP come back with the type their bytes have", async () => {
    for (const [bytes, mime] of [
      [PNG, "image/png"],
      [JPEG_START, "image/jpeg"],
      [TINY_GIF, "image/gif"],
      [encodeBmp(3, 3), "image/bmp"],
    ] as const) {
      const image = await loadImage(dataUrl(bytes, mime), { param: PARAM });
      assert.equal(image.mime, mime);
      assert.deepEqual(Buffer.from(image.bytes), Buffer.from(bytes));
    }
    // The declared type is not trusted: PNG bytes declared as JPEG are PNG.
    assert.equal((await loadImage(dataUrl(PNG, "image/jpeg"), { param: PARAM })).mime, "image/png");
  });

  test("percent-encoded data and base64 with line breaks decode", async () => {
    const percent = `data:image/png,${[...PNG].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("")}`;
    assert.deepEqual(Buffer.from((await loadImage(percent, { param: PARAM })).bytes), Buffer.from(PNG));
    const wrapped = `data:image/png;base64,${Buffer.from(PNG)
      .toString("base64")
      .replace(/(.{20})/g, "$1\n")}`;
    assert.equal((await loadImage(wrapped, { param: PARAM })).mime, "image/png");
  });

  test("a non-image type, broken base64, no comma, WebP and garbage are 400s", async () => {
    await refused(`data:text/plain;base64,${Buffer.from(PNG).toString("base64")}`, /image type.*text\/plain/);
    await refused(`data:;base64,${Buffer.from(PNG).toString("base64")}`, /image type/);
    await refused("data:image/png;base64,@@not*base64@@", /not valid base64/);
    await refused("data:image/png;base64", /no ','/);
    await refused("data:image/png,%zz", /percent-encoding/);
    await refused(dataUrl(WEBP_HEADER, "image/webp"), /WebP is not supported; send PNG, JPEG, GIF or BMP/);
    await refused(dataUrl(Buffer.from("hello world, not an image"), "image/png"), /does not hold an image/);
    await refused("data:image/png;base64,", /does not hold an image/);
  });

  test("data beyond maxBytes is refused before decoding", async () => {
    const big = encodePng(64, 64);
    await refused(dataUrl(big, "image/png"), /larger than the limit of 100 bytes/, { maxBytes: 100 });
    assert.equal(
      (await loadImage(dataUrl(big, "image/png"), { param: PARAM, maxBytes: big.length })).mime,
      "image/png",
    );
  });
});

describe("loadImage: schemes", () => {
  test("file:, ftp: and non-URLs are refused", async () => {
    await refused("file:///etc/passwd", /scheme 'file' is not supported/);
    await refused("ftp://example.com/a.png", /scheme 'ftp' is not supported/);
    await refused("not a url", /not a valid URL/);
  });
});

describe("loadImage: http(s)", () => {
  test("a loopback server is refused by default and served with allowPrivate", async () => {
    await refused(
      `${base}/png`,
      /resolves to a loopback address \(127\.0\.0\.1\).*--allow-private-image-urls/,
    );
    await refused(`http://localhost:${new URL(base).port}/png`, /loopback address/);
    // Numeric host spellings are normalised by the URL parser before the check.
    for (const host of ["2130706433", "0x7f.1", "017700000001", "[::ffff:127.0.0.1]"]) {
      await refused(`http://${host}:${new URL(base).port}/png`, /loopback address/);
    }
    const image = await loadImage(`${base}/png`, { param: PARAM, allowPrivate: true });
    assert.equal(image.mime, "image/png");
    assert.deepEqual(Buffer.from(image.bytes), Buffer.from(PNG));
  });

  test("every address of a host is checked, not only the first", async () => {
    const lookup = async () => [
      { address: "93.184.216.34", family: 4 },
      { address: "10.1.2.3", family: 4 },
    ];
    await refused("http://two-faced.test/png", /private address \(10\.1\.2\.3\)/, { lookup });
  });

  test("an unresolvable host is a 400", async () => {
    const lookup = async () => {
      throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
    };
    await refused("http://nowhere.test/png", /could not be resolved \(ENOTFOUND\)/, { lookup });
  });

  test("the connection goes to the checked address, not to a second DNS answer", async () => {
    // `pinned.test` exists only in this resolver: a second resolution by the HTTP client would fail.
    const lookup = async () => [{ address: "127.0.0.1", family: 4 }];
    const port = new URL(base).port;
    const image = await loadImage(`http://pinned.test:${port}/png`, {
      param: PARAM,
      lookup,
      allowPrivate: true,
    });
    assert.equal(image.mime, "image/png");
  });

  test("5 redirects are followed, a 6th is refused", async () => {
    const allowPrivate = true;
    assert.equal(
      (await loadImage(`${base}/redirect?hops=5`, { param: PARAM, allowPrivate })).mime,
      "image/png",
    );
    await refused(`${base}/redirect?hops=6`, /more than 5 redirects/, { allowPrivate });
  });

  test("a redirect from an allowed host to a private one is refused at the hop", async () => {
    const port = new URL(base).port;
    // The loopback server stands in for a public host; intranet.test resolves to a private address.
    const refusedAddress = (address: string) =>
      address === "127.0.0.1" ? undefined : privateAddressKind(address);
    const lookup = async (host: string) => [
      { address: host === "intranet.test" ? "192.168.1.20" : "127.0.0.1", family: 4 },
    ];
    await refused(
      `${base}/to-private?port=${port}`,
      /'intranet\.test' resolves to a private address \(192\.168\.1\.20\)/,
      {
        lookup,
        refusedAddress,
      },
    );
  });

  test("a slow server times out", async () => {
    // /slow never answers: the refusal itself shows the 0.2 s timeout ended the wait.
    await refused(`${base}/slow`, /longer than 0\.2 s/, { allowPrivate: true, timeoutMs: 200 });
  });

  test("a 404 is a 400 naming the status", async () => {
    await refused(`${base}/missing`, /answered HTTP 404/, { allowPrivate: true });
  });

  test("a body beyond maxBytes is refused, declared or streamed", async () => {
    await refused(`${base}/big-declared`, /larger than the limit of 1000 bytes/, {
      allowPrivate: true,
      maxBytes: 1000,
    });
    await refused(`${base}/big-streamed`, /larger than the limit of 1000 bytes/, {
      allowPrivate: true,
      maxBytes: 1000,
    });
  });

  test("WebP and non-image bodies are refused whatever their content-type", async () => {
    await refused(`${base}/webp`, /WebP is not supported/, { allowPrivate: true });
    await refused(`${base}/text`, /does not hold an image/, { allowPrivate: true });
  });

  test("a refused connection is a 400", async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await refused(`http://127.0.0.1:${port}/png`, /Fetching the image failed: ECONNREFUSED/, {
      allowPrivate: true,
    });
  });
});

describe("privateAddressKind", () => {
  test("refuses loopback, private, link-local, CGNAT, ULA, unspecified, multicast and mapped forms", () => {
    for (const [address, kind] of [
      ["127.0.0.1", "loopback"],
      ["127.255.0.9", "loopback"],
      ["10.0.0.1", "private"],
      ["172.16.0.1", "private"],
      ["172.31.255.255", "private"],
      ["192.168.0.1", "private"],
      ["169.254.169.254", "link-local"],
      ["100.64.0.1", "carrier-grade NAT"],
      ["100.127.255.255", "carrier-grade NAT"],
      ["0.0.0.0", "unspecified"],
      ["224.0.0.1", "multicast"],
      ["255.255.255.255", "reserved"],
      ["::", "unspecified"],
      ["::1", "loopback"],
      ["[::1]", "loopback"],
      ["fe80::1%eth0", "link-local"],
      ["febf::1", "link-local"],
      ["fc00::1", "unique local"],
      ["fd12:3456::1", "unique local"],
      ["ff02::1", "multicast"],
      ["::ffff:127.0.0.1", "IPv4-mapped loopback"],
      ["::ffff:7f00:1", "IPv4-mapped loopback"],
      ["::ffff:10.0.0.1", "IPv4-mapped private"],
      ["::ffff:169.254.169.254", "IPv4-mapped link-local"],
      ["64:ff9b::a00:1", "NAT64 private"],
      ["2002:c0a8:0101::1", "6to4 private"],
      ["192.0.2.1", "reserved"],
      ["198.18.0.1", "reserved"],
      ["::ffff:0:10.0.0.1", "IPv4-translated private"],
      ["::10.0.0.1", "IPv4-mapped private"],
      ["64:ff9b:1::1", "NAT64 local-use"],
      ["example.com", "not an IP address"],
      ["127.1", "not an IP address"],
    ] as const) {
      assert.equal(privateAddressKind(address), kind, address);
    }
  });

  test("lets public addresses through", () => {
    for (const address of [
      "8.8.8.8",
      "93.184.216.34",
      "172.15.255.255",
      "172.32.0.1",
      "100.63.255.255",
      "100.128.0.1",
      "2606:4700:4700::1111",
      "::ffff:8.8.8.8",
      "64:ff9b::808:808",
      "fec0::1",
    ]) {
      assert.equal(privateAddressKind(address), undefined, address);
    }
  });
});

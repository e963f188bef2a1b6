/**
 * The bytes of an `image_url` content part: a `data:` URL decoded, or an http(s) URL fetched with the
 * protections a server fetching client-given URLs needs (SSRF): no private addresses, a size cap, a
 * timeout, a bounded number of redirects, and the connection made to the very address that was checked
 * (a second DNS answer cannot point it elsewhere). The bytes' real format is read from their first bytes.
 *
 * Borrowed behaviour: vLLM's `MediaConnector` (data/http(s) URLs, `file:` only when allowed, a fetch
 * timeout) and OWASP's SSRF prevention cheat sheet (resolve, check every address, pin it, re-check
 * every redirect hop).
 */
import type { LookupAddress } from "node:dns";
import { lookup as dnsLookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { ApiError, badRequest } from "../../errors.ts";
import { imageType, type SupportedImageMime } from "./imageType.ts";
import { privateAddressKind } from "./privateAddress.ts";

/** How {@link loadImage} may fetch. */
export type ImageSourceOptions = {
  /** The request field the URL came from, named in every error, e.g. `messages[0].content[1]`. */
  param: string;
  /** Largest image accepted, in bytes (`--max-image-bytes`). Defaults to {@link DEFAULT_MAX_IMAGE_BYTES}. */
  maxBytes?: number | undefined;
  /** Longest a fetch may take, redirects included, in milliseconds. Defaults to 10,000. */
  timeoutMs?: number;
  /** Fetch from loopback and private addresses too (`--allow-private-image-urls`). Defaults to false. */
  allowPrivate?: boolean | undefined;
  /** Resolves a host name to all its addresses. Defaults to `dns.lookup(host, {all: true})`; tests replace it. */
  lookup?: (hostname: string) => Promise<LookupAddress[]>;
  /**
   * Why an address must not be fetched from, or undefined when it may be. Defaults to
   * {@link privateAddressKind}; tests replace it to let a loopback server stand in for a public host.
   */
  refusedAddress?: (address: string) => string | undefined;
};

/** An image's bytes and its format as its first bytes tell it. */
export type LoadedImage = { bytes: Uint8Array; mime: SupportedImageMime };

/** The default `--max-image-bytes`: 20 MB, OpenAI's limit for an image input. */
export const DEFAULT_MAX_IMAGE_BYTES = 20_000_000;

/** The default fetch timeout, in milliseconds. */
export const DEFAULT_IMAGE_TIMEOUT_MS = 10_000;

/** Redirects followed before a fetch is refused (each hop's address is checked anew). */
export const MAX_IMAGE_REDIRECTS = 5;

/**
 * Loads the image an `image_url.url` names: a `data:` URL (base64 or percent-encoded, of an `image/*`
 * type) or an `http:`/`https:` URL. PNG, JPEG, GIF and BMP are accepted (what llama.cpp's stb_image decodes).
 *
 * @returns The bytes and their real MIME type (from the magic bytes, not from the URL or a header).
 * @throws ApiError 400 naming `options.param` for: a malformed or non-image `data:` URL; another scheme
 *   (`file:` included); a host that resolves to a loopback/private/link-local/... address (unless
 *   `allowPrivate`) or does not resolve; more than {@link MAX_IMAGE_REDIRECTS} redirects; a non-2xx
 *   status; a network error; a timeout; more than `maxBytes`; WebP; bytes that are no image.
 */
export async function loadImage(url: string, options: ImageSourceOptions): Promise<LoadedImage> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_IMAGE_BYTES;
  const bytes = /^data:/i.test(url)
    ? decodeDataUrl(url, maxBytes, options.param)
    : await fetchImage(url, options);
  return { bytes, mime: checkedImageType(bytes, options.param) };
}

/** The real format of `bytes`. @throws ApiError 400 for WebP and for bytes of no accepted format. */
function checkedImageType(bytes: Uint8Array, param: string): SupportedImageMime {
  const type = imageType(bytes);
  if (type === "image/webp") throw badRequest("WebP is not supported; send PNG, JPEG, GIF or BMP.", param);
  if (type === undefined) {
    throw badRequest("The image_url does not hold an image (not PNG, JPEG, GIF or BMP).", param);
  }
  return type;
}

/**
 * The bytes of a `data:[<mime>][;param=value][;base64],<data>` URL (RFC 2397).
 * @throws ApiError 400 when it is malformed, not of an `image/*` type, or larger than `maxBytes`.
 */
function decodeDataUrl(url: string, maxBytes: number, param: string): Uint8Array {
  const comma = url.indexOf(",");
  if (comma < 0) throw badRequest("The data: URL has no ',' before its data.", param);
  const parameters = url.slice(5, comma).split(";");
  const mime = (parameters[0] ?? "").trim().toLowerCase();
  const base64 = parameters.slice(1).some((p) => p.trim().toLowerCase() === "base64");
  if (!mime.startsWith("image/")) {
    throw badRequest(
      `The data: URL must be of an image type (image/png, ...), got '${mime || "text/plain"}'.`,
      param,
    );
  }
  const data = url.slice(comma + 1);
  const tooLarge = () => badRequest(`The image is larger than the limit of ${maxBytes} bytes.`, param);
  if (base64) {
    const text = decodeURIComponentSafe(data, param).replace(/\s+/g, "");
    if (!/^[A-Za-z0-9+/\-_]*={0,2}$/.test(text) || text.replace(/=+$/, "").length % 4 === 1) {
      throw badRequest("The data: URL's base64 data is not valid base64.", param);
    }
    if (Math.floor((text.replace(/=+$/, "").length * 3) / 4) > maxBytes) throw tooLarge();
    return new Uint8Array(Buffer.from(text, "base64"));
  }
  if (data.length > maxBytes * 3) throw tooLarge();
  const bytes = percentDecode(data, param);
  if (bytes.length > maxBytes) throw tooLarge();
  return bytes;
}

function decodeURIComponentSafe(text: string, param: string): string {
  if (!text.includes("%")) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    throw badRequest("The data: URL has an invalid percent-encoding.", param);
  }
}

/** Percent-decodes to bytes (not to a string: the data is binary); other characters count as UTF-8. */
function percentDecode(text: string, param: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "%") {
      const hex = text.slice(i + 1, i + 3);
      if (!/^[0-9a-fA-F]{2}$/.test(hex))
        throw badRequest("The data: URL has an invalid percent-encoding.", param);
      out.push(Number.parseInt(hex, 16));
      i += 2;
    } else {
      for (const byte of Buffer.from(text[i]!, "utf8")) out.push(byte);
    }
  }
  return Uint8Array.from(out);
}

/** Fetches an http(s) URL hop by hop under one deadline. */
async function fetchImage(url: string, options: ImageSourceOptions): Promise<Uint8Array> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_IMAGE_TIMEOUT_MS;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  const timedOut = () =>
    badRequest(`Fetching the image took longer than ${timeoutMs / 1000} s.`, options.param);
  try {
    let target = parseHttpUrl(url, options.param);
    for (let redirects = 0; ; redirects++) {
      const address = await withDeadline(vettedAddress(target, options), deadline.signal, timedOut);
      const response = await withDeadline(
        request(target, address, deadline.signal),
        deadline.signal,
        timedOut,
      );
      const status = response.statusCode ?? 0;
      const location = response.headers.location;
      if (status >= 300 && status < 400 && location !== undefined) {
        response.resume();
        if (redirects >= MAX_IMAGE_REDIRECTS) {
          throw badRequest(
            `Fetching the image took more than ${MAX_IMAGE_REDIRECTS} redirects.`,
            options.param,
          );
        }
        target = parseHttpUrl(new URL(location, target).href, options.param);
        continue;
      }
      if (status < 200 || status >= 300) {
        response.resume();
        throw badRequest(`Fetching the image failed: ${target.host} answered HTTP ${status}.`, options.param);
      }
      return await withDeadline(
        readCapped(response, options.maxBytes ?? DEFAULT_MAX_IMAGE_BYTES, options.param),
        deadline.signal,
        timedOut,
      );
    }
  } catch (error) {
    if (error instanceof ApiError) throw error;
    if (deadline.signal.aborted) throw timedOut();
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw badRequest(`Fetching the image failed: ${reason}.`, options.param);
  } finally {
    clearTimeout(timer);
  }
}

/** `text` as an http(s) URL. @throws ApiError 400 for another scheme or an unparsable URL. */
function parseHttpUrl(text: string, param: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badRequest(
      "The image_url is not a valid URL (expected https://..., http://... or data:image/...).",
      param,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw badRequest(
      `The image_url scheme '${url.protocol.replace(/:$/, "")}' is not supported; use https:, http: or data:.`,
      param,
    );
  }
  return url;
}

/**
 * The address to connect to for `url`'s host: the first of all its addresses, after every one of them
 * passed the private-address check (unless `allowPrivate`).
 * @throws ApiError 400 when the host does not resolve or an address is private.
 */
async function vettedAddress(url: URL, options: ImageSourceOptions): Promise<LookupAddress> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  let addresses: LookupAddress[];
  if (isIP(host) !== 0) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await (options.lookup ?? ((name) => dnsLookup(name, { all: true, verbatim: true })))(host);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "lookup failed";
      throw badRequest(`The image host '${host}' could not be resolved (${code}).`, options.param);
    }
  }
  const first = addresses[0];
  if (first === undefined) throw badRequest(`The image host '${host}' has no address.`, options.param);
  if (!options.allowPrivate) {
    for (const { address } of addresses) {
      const kind = (options.refusedAddress ?? privateAddressKind)(address);
      if (kind !== undefined) {
        throw badRequest(
          `The image host '${host}' resolves to a ${kind} address (${address}); the server only fetches images ` +
            "from public addresses (--allow-private-image-urls lifts this).",
          options.param,
        );
      }
    }
  }
  return first;
}

/** One GET of `url`, connected to `address` whatever the host name resolves to now. */
function request(url: URL, address: LookupAddress, signal: AbortSignal): Promise<http.IncomingMessage> {
  const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
    if (lookupOptions.all) callback(null, [address]);
    else callback(null, address.address, address.family);
  };
  const client = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(url, {
      method: "GET",
      headers: { accept: "image/png,image/jpeg,image/gif,image/bmp,image/*;q=0.8", "user-agent": "lmserve" },
      lookup: pinned,
      signal,
    });
    req.once("response", resolve);
    req.once("error", reject);
    req.end();
  });
}

/** The response body, refused as soon as it passes `maxBytes` (by `content-length` or while streaming). */
async function readCapped(
  response: http.IncomingMessage,
  maxBytes: number,
  param: string,
): Promise<Uint8Array> {
  const tooLarge = () => badRequest(`The image is larger than the limit of ${maxBytes} bytes.`, param);
  const declared = Number(response.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) {
    response.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) {
      response.destroy();
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  return new Uint8Array(Buffer.concat(chunks, total));
}

/** `work`, or `timedOut()` as soon as `signal` aborts (for steps that take no signal, such as DNS). */
function withDeadline<T>(work: Promise<T>, signal: AbortSignal, timedOut: () => ApiError): Promise<T> {
  if (signal.aborted) return Promise.reject(timedOut());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(timedOut());
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

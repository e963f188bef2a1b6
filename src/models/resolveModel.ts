/**
 * `resolveModel`: turns the `MODEL` argument of `lmserve serve|pull` into a verified local `.gguf` file.
 *
 * Sources (see `modelSource.ts`):
 * - a local path: must exist, be a readable file and start with the GGUF magic;
 * - `hf:owner/repo/path/file.gguf[#branch]` and `hf:owner/repo[:QUANT]`: node-llama-cpp's model URIs;
 * - an `http://` or `https://` URL of a `.gguf` file.
 *
 * Remote sources go through node-llama-cpp 3.21's `resolveModelFile` into `downloadDir` (called through
 * `engine/ggufFiles.ts`, so that node-llama-cpp is imported in `src/engine/` only):
 * - Hugging Face URLs: `${HF_ENDPOINT or https://huggingface.co/}owner/repo/resolve/<branch>/<file>?download=true`;
 *   the quant form first asks `${endpoint}v2/owner/repo/manifests/<QUANT>` (User-Agent `llama-cpp`, Ollama-style
 *   manifest) for `ggufFile.rfilename`. node-llama-cpp reads `HF_ENDPOINT`/`MODEL_ENDPOINT` and `HF_TOKEN`
 *   (or `~/.cache/huggingface/token`) itself; `hfEndpoint`/`hfToken` override them.
 * - Downloads use ipull: a GET for size/range support, then ranged GETs (5 MB chunks, 3 parallel streams) into
 *   `<file>.ipull`, whose trailing JSON records finished chunks. A dropped connection is retried in-process with
 *   a `Range` request from the start of the unfinished chunk; a cancelled or crashed download keeps the `.ipull`
 *   file (we pass `deleteTempFileOnCancel: false`) and the next attempt resumes from the finished chunks.
 *   The file is renamed to its final name only when complete.
 * - Cache hits: `resolveModelFile(..., {download: false})` finds the file by name without any network access
 *   (node-llama-cpp names hf files `hf_<owner>_[<repo>_]<file>.gguf`; lmserve names URL files
 *   `url_<hash>_<file>.gguf`), so a cached model starts offline.
 *
 * lmserve adds, around that: a cheap probe before downloading (so an unreachable host, a missing file or a
 * non-GGUF file fails in seconds instead of after ipull's ~150 retries or a full download), verification of
 * every download (`verifyGguf.ts`; a bad file is deleted), a sidecar record per cached file
 * (`cacheRecord.ts`), and one-line {@link ModelSourceError}s.
 */
import { access, constants, stat } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import {
  downloadModelFile,
  findModelFile,
  type ModelFileLocation,
  readRemoteGgufHeader,
} from "../engine/ggufFiles.ts";
import { readCacheRecord, removeCachedModel, writeCacheRecord } from "./cacheRecord.ts";
import { ModelSourceError } from "./ModelSourceError.ts";
import {
  cacheFileNameForUrl,
  classifyModelSource,
  displaySource,
  type ModelSourceKind,
  modelIdFromSource,
  parseHuggingFaceUri,
} from "./modelSource.ts";
import type { DownloadProgress } from "./progress.ts";
import { hasGgufMagic, verifyGgufFile } from "./verifyGguf.ts";

/** Options of {@link resolveModel}. */
export type ResolveModelOptions = {
  /** Cache folder for downloads (created when missing), e.g. from `defaultDownloadDir()` or `--download-dir`. */
  downloadDir: string;
  /** Called during a download with byte counts (see {@link DownloadProgress}); errors it throws are ignored. */
  onProgress?: (progress: DownloadProgress) => void;
  /** Cancels the probe or download; the partial `.ipull` file is kept so the next attempt resumes. */
  signal?: AbortSignal;
  /** Hugging Face endpoint (e.g. a mirror); default: node-llama-cpp's (`HF_ENDPOINT` env, else huggingface.co). */
  hfEndpoint?: string;
  /** Hugging Face access token; default: node-llama-cpp's (`HF_TOKEN` env, else `~/.cache/huggingface/token`). */
  hfToken?: string;
  /** Milliseconds the pre-download probe may take before the host counts as unreachable; default 30000. */
  probeTimeoutMs?: number;
};

/** A model source resolved to a local file. */
export type ResolvedModel = {
  /** Absolute path of the `.gguf` file (for split models, the first part). */
  path: string;
  /** Default served model name: the model file's base name without `.gguf` (see `modelIdFromSource`). */
  id: string;
  /** What kind of source it was. */
  kind: ModelSourceKind;
  /** The source as given. */
  source: string;
  /** Size of the file in bytes. */
  sizeBytes: number;
  /** True when this call downloaded (part of) the file; false for local paths and cache hits. */
  downloaded: boolean;
};

const defaultProbeTimeoutMs = 30_000;

/** Error codes of Node/undici network failures that mean "the host cannot be reached". */
/** fs errors of writing the download: each is a one-line error naming the folder (exit 2), never a stack. */
const writeErrorCodes = new Set([
  "ENOSPC",
  "EDQUOT",
  "EFBIG",
  "EIO",
  "EROFS",
  "EACCES",
  "EPERM",
  "ENOTDIR",
  "EISDIR",
]);

const networkErrorCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
]);

/**
 * Resolves a model source to a verified local `.gguf` file, downloading it into `options.downloadDir` once.
 * See the module comment for what node-llama-cpp does and what lmserve adds.
 *
 * @param source A local path (relative to the working directory), an `hf:` URI or an http(s) URL.
 * @returns The local file, its default id, its size and whether it was downloaded now.
 * @throws ModelSourceError with a one-line message: `not_found` (missing file, 404, unknown repo/quant),
 *   `unreadable`, `invalid_source`, `access_denied` (401/403), `unreachable`, `download_failed`,
 *   `corrupt` (not GGUF / truncated; a bad download is deleted from the cache) or `cancelled`.
 */
export async function resolveModel(source: string, options: ResolveModelOptions): Promise<ResolvedModel> {
  const trimmed = source.trim();
  if (trimmed === "")
    throw new ModelSourceError(
      "invalid_source",
      "No model given. Pass a path to a .gguf file, an hf:owner/repo/file.gguf URI or an https:// URL.",
      source,
    );
  const kind = classifyModelSource(trimmed);
  if (kind === "path") return resolveLocal(trimmed);
  return resolveRemote(trimmed, kind, options);
}

/** Local path: exists, is a readable regular file, starts with `GGUF`. */
async function resolveLocal(source: string): Promise<ResolvedModel> {
  const path = resolve(source);
  const shown = isAbsolute(source) ? source : `${source} (${path})`;
  let sizeBytes: number;
  try {
    const info = await stat(path);
    if (info.isDirectory())
      throw new ModelSourceError(
        "unreadable",
        `Model path is a directory: ${shown}. Pass a path to a .gguf file.`,
        source,
      );
    sizeBytes = info.size;
    await access(path, constants.R_OK);
  } catch (error) {
    if (error instanceof ModelSourceError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR")
      throw new ModelSourceError(
        "not_found",
        `Model file not found: ${shown}. Pass a path to a .gguf file, an hf:owner/repo/file.gguf URI or an https:// URL.`,
        source,
        error,
      );
    throw new ModelSourceError(
      "unreadable",
      `Model file is not readable: ${shown} (${code ?? error}).`,
      source,
      error,
    );
  }
  let magic: boolean;
  try {
    magic = await hasGgufMagic(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ModelSourceError(
      "unreadable",
      `Model file is not readable: ${shown} (${code ?? error}).`,
      source,
      error,
    );
  }
  if (!magic)
    throw new ModelSourceError(
      "corrupt",
      `Not a GGUF model file: ${shown} (it does not start with the "GGUF" magic bytes).`,
      source,
    );
  return { path, id: modelIdFromSource(source, path), kind: "path", source, sizeBytes, downloaded: false };
}

/** `hf:` URI or URL: cache hit, else probe + download + verify + record. */
async function resolveRemote(
  source: string,
  kind: Exclude<ModelSourceKind, "path">,
  options: ResolveModelOptions,
): Promise<ResolvedModel> {
  const { signal } = options;
  const shown = displaySource(source);
  if (kind === "hf") parseHuggingFaceUri(source);
  else if (!URL.canParse(source))
    throw new ModelSourceError("invalid_source", `Invalid model URL: ${shown}.`, source);

  const fileName = kind === "url" ? cacheFileNameForUrl(source) : undefined;
  const location: ModelFileLocation = {
    directory: resolve(options.downloadDir),
    fileName,
    hfEndpoint: options.hfEndpoint,
    hfToken: options.hfToken,
  };
  throwIfCancelled(source, options);

  // 1. Cache hit: found by name, no network.
  let cachedPath: string | undefined;
  try {
    cachedPath = await findModelFile(source, location);
  } catch {
    cachedPath = undefined;
  }
  if (cachedPath !== undefined) {
    const hit = await useCachedFile(source, kind, cachedPath, signal).catch((error: unknown) => {
      throw toModelSourceError(error, source, kind, options);
    });
    if (hit !== undefined) return hit;
    await removeCachedModel(cachedPath); // failed verification: download it again
  }

  // 2. Probe, so that unreachable hosts, 404s and non-GGUF files fail fast and nothing is downloaded.
  const probe = kind === "url" ? await probeUrl(source, options) : await probeHuggingFace(source, options);

  // 3. Download (resumes a kept `.ipull` partial file).
  const onProgress = options.onProgress;
  let path: string;
  // ipull (node-llama-cpp's downloader) lets a failed file write escape as an unhandled rejection, which
  // would end the process with a stack trace: such an error fails this download instead.
  const stop = new AbortController();
  const forwardAbort = () => stop.abort(signal?.reason);
  if (signal?.aborted) forwardAbort();
  else signal?.addEventListener("abort", forwardAbort, { once: true });
  const escaped = escapedWriteError();
  try {
    path = await Promise.race([
      downloadModelFile(source, location, {
        signal: stop.signal,
        onProgress:
          onProgress &&
          ((status) => {
            try {
              onProgress({ totalSize: status.totalSize, downloadedSize: status.downloadedSize });
            } catch {
              // a failing progress display must not fail the download
            }
          }),
      }),
      escaped.promise,
    ]);
  } catch (error) {
    stop.abort(error);
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    if (code !== undefined && writeErrorCodes.has(code)) {
      // The downloader writes under the final name: a write failure (a full disk) must not leave a file
      // that looks like a model. Nothing can resume it anyway until the disk has room.
      const partial = await findModelFile(source, location).catch(() => undefined);
      if (partial !== undefined) await removeCachedModel(partial).catch(() => undefined);
    }
    throw toModelSourceError(error, source, kind, options);
  } finally {
    escaped.dispose();
    signal?.removeEventListener("abort", forwardAbort);
  }
  throwIfCancelled(source, options);
  if (!(await isFile(path)))
    throw new ModelSourceError(
      "download_failed",
      `Download of ${shown} ended without producing ${path}.`,
      source,
    );

  // 4. Verify before the file is trusted.
  const verification = await verifyGgufFile(path, signal ? { signal } : {}).catch((error: unknown) => {
    throw toModelSourceError(error, source, kind, options);
  });
  let reason: string | undefined;
  if (!verification.ok) reason = verification.reason;
  else if (probe.expectedSize !== undefined && verification.sizeBytes !== probe.expectedSize)
    reason = `it has ${verification.sizeBytes} bytes but the server announced ${probe.expectedSize}`;
  if (reason !== undefined || !verification.ok) {
    await removeCachedModel(path);
    throw new ModelSourceError(
      "corrupt",
      `The file downloaded for ${shown} is not a valid GGUF model: ${reason}. It was deleted from the cache.`,
      source,
    );
  }

  const id = modelIdFromSource(source, path);
  await recordDownload(path, source, id, verification.sizeBytes, verification.architecture);
  return { path, id, kind, source, sizeBytes: verification.sizeBytes, downloaded: true };
}

/**
 * A cached file is used when its sidecar record matches its size and it still starts with `GGUF`; a file
 * without a valid record (downloaded by another tool, or by an older lmserve) is fully verified and adopted.
 * @returns `undefined` when the file fails verification (the caller deletes and re-downloads it).
 */
async function useCachedFile(
  source: string,
  kind: ModelSourceKind,
  path: string,
  signal: AbortSignal | undefined,
): Promise<ResolvedModel | undefined> {
  let sizeBytes: number;
  try {
    sizeBytes = (await stat(path)).size;
  } catch {
    return undefined;
  }
  const id = modelIdFromSource(source, path);
  const record = await readCacheRecord(path);
  if (record !== undefined && record.sizeBytes === sizeBytes && (await hasGgufMagic(path).catch(() => false)))
    return { path, id, kind, source, sizeBytes, downloaded: false };
  const verification = await verifyGgufFile(path, signal ? { signal } : {});
  if (!verification.ok) return undefined;
  await recordDownload(path, source, id, verification.sizeBytes, verification.architecture);
  return { path, id, kind, source, sizeBytes: verification.sizeBytes, downloaded: false };
}

/** Writes the sidecar; a read-only cache folder only loses the bookkeeping, not the model. */
async function recordDownload(
  path: string,
  source: string,
  id: string,
  sizeBytes: number,
  architecture: string | undefined,
): Promise<void> {
  await writeCacheRecord(path, {
    version: 1,
    source: displaySource(source),
    id,
    fileName: path.split(/[\\/]/).pop() ?? path,
    sizeBytes,
    downloadedAt: new Date().toISOString(),
    ...(architecture !== undefined ? { architecture } : {}),
  }).catch(() => undefined);
}

/** What a probe learnt. */
type ProbeResult = {
  /** Total file size announced by the server, when it said (Content-Range total or Content-Length). */
  expectedSize?: number;
};

/** A signal that fires on the caller's cancel or after `probeTimeoutMs`. */
function probeSignal(options: ResolveModelOptions): { signal: AbortSignal; timeout: AbortSignal } {
  const timeout = AbortSignal.timeout(options.probeTimeoutMs ?? defaultProbeTimeoutMs);
  return { signal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout, timeout };
}

/**
 * Probe of an `hf:` URI: node-llama-cpp's `readGgufFileInfo` (`readRemoteGgufHeader`) resolves the URI exactly as the downloader will
 * (manifest for the quant form, `HF_ENDPOINT`, tokens) and parses the remote GGUF header with ranged GETs,
 * retrying twice instead of ipull's 150 times.
 */
async function probeHuggingFace(source: string, options: ResolveModelOptions): Promise<ProbeResult> {
  const { signal, timeout } = probeSignal(options);
  try {
    await readRemoteGgufHeader(source, {
      signal,
      hfEndpoint: options.hfEndpoint,
      hfToken: options.hfToken,
    });
  } catch (error) {
    throw toModelSourceError(error, source, "hf", options, { timedOut: timeout.aborted, probing: true });
  }
  return {};
}

/**
 * Probe of a URL: one GET with `Range: bytes=0-3`, reading at most the first chunk of the body (so a server
 * that ignores `Range` does not send the whole file). Network failures and 5xx/429 fail here; other HTTP
 * errors are left to the downloader, which may retry with a Hugging Face token. A 2xx body that does not
 * start with `GGUF` is refused before anything is written.
 */
async function probeUrl(source: string, options: ResolveModelOptions): Promise<ProbeResult> {
  const { signal, timeout } = probeSignal(options);
  let response: Response;
  try {
    response = await fetch(source, {
      headers: { Range: "bytes=0-3", "Accept-Encoding": "identity" },
      signal,
    });
  } catch (error) {
    throw toModelSourceError(error, source, "url", options, { timedOut: timeout.aborted, probing: true });
  }
  if (!response.ok) {
    await response.body?.cancel().catch(() => undefined);
    if (response.status >= 500 || response.status === 429) throw httpError(response.status, source, "url");
    return {};
  }
  let head = Buffer.alloc(0);
  const reader = response.body?.getReader();
  try {
    while (reader !== undefined && head.length < 4) {
      const { done, value } = await reader.read();
      if (done) break;
      head = Buffer.concat([head, value]);
    }
  } catch (error) {
    throw toModelSourceError(error, source, "url", options, { timedOut: timeout.aborted, probing: true });
  } finally {
    await reader?.cancel().catch(() => undefined);
  }
  const magic = head.subarray(0, 4).toString("latin1");
  if (magic !== "GGUF")
    throw new ModelSourceError(
      "corrupt",
      `${displaySource(source)} is not a GGUF model file (it does not start with the "GGUF" magic bytes); nothing was downloaded.`,
      source,
    );
  const range = /\/(\d+)\s*$/.exec(response.headers.get("content-range") ?? "");
  const length =
    response.status === 200 ? Number(response.headers.get("content-length") ?? Number.NaN) : Number.NaN;
  const expectedSize = range?.[1] !== undefined ? Number(range[1]) : length;
  return Number.isSafeInteger(expectedSize) && expectedSize > 0 ? { expectedSize } : {};
}

/** Throws the `cancelled` error when the caller's signal has fired. */
function throwIfCancelled(source: string, options: ResolveModelOptions): void {
  if (options.signal?.aborted) throw cancelledError(source, options);
}

/** The `cancelled` error; its cause is the signal's reason. */
function cancelledError(source: string, options: ResolveModelOptions): ModelSourceError {
  return new ModelSourceError(
    "cancelled",
    `Download of ${displaySource(source)} was cancelled; any partial file is kept in ${resolve(options.downloadDir)} and the next attempt resumes it.`,
    source,
    options.signal?.reason,
  );
}

/** True when `path` exists and is a regular file. */
async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/**
 * While it is not disposed, a file write error (ENOSPC and the other {@link writeErrorCodes}) that escapes
 * as an unhandled rejection rejects `promise` instead of ending the process. Other unhandled rejections
 * are rethrown, as Node would.
 */
function escapedWriteError(): { promise: Promise<never>; dispose(): void } {
  let fail: (error: unknown) => void = () => undefined;
  const promise = new Promise<never>((_, reject) => {
    fail = reject;
  });
  const listener = (reason: unknown) => {
    const code = (reason as NodeJS.ErrnoException | undefined)?.code;
    if (code === undefined || !writeErrorCodes.has(code)) throw reason;
    fail(reason);
  };
  process.on("unhandledRejection", listener);
  // The race may settle through the download itself; this one must not become unhandled in turn.
  promise.catch(() => undefined);
  return { promise, dispose: () => process.off("unhandledRejection", listener) };
}

/** The `ModelSourceError` for an HTTP status from the probe or the downloader. */
function httpError(status: number, source: string, kind: ModelSourceKind, cause?: unknown): ModelSourceError {
  const shown = displaySource(source);
  if (status === 404 || status === 410)
    return new ModelSourceError(
      "not_found",
      kind === "hf"
        ? `Model not found: ${shown} (HTTP ${status}). Check the owner, repository and file name on Hugging Face.`
        : `Model not found: ${shown} (HTTP ${status}).`,
      source,
      cause,
    );
  if (status === 401 || status === 403)
    return new ModelSourceError(
      "access_denied",
      kind === "hf"
        ? `Access denied to ${shown} (HTTP ${status}). For a gated or private Hugging Face repository, accept its terms on the website and set HF_TOKEN.`
        : `Access denied to ${shown} (HTTP ${status}).`,
      source,
      cause,
    );
  if (status === 429)
    return new ModelSourceError(
      "download_failed",
      `Download of ${shown} was rate limited (HTTP 429); try again later${kind === "hf" ? " or set HF_TOKEN" : ""}.`,
      source,
      cause,
    );
  return new ModelSourceError(
    "download_failed",
    `Download of ${shown} failed: HTTP ${status}.`,
    source,
    cause,
  );
}

/** Finds a Node/undici network error code anywhere in an error's `cause` chain. */
function networkCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== null && typeof current === "object"; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && (networkErrorCodes.has(code) || writeErrorCodes.has(code))) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Maps an error from node-llama-cpp, ipull, fetch or fs to a one-line {@link ModelSourceError}. The texts
 * matched are node-llama-cpp 3.21's (`parseModelUri.js`, `GgufNetworkFetchFileReader.js`) and ipull 3.9's
 * `StatusCodeError` (`statusCode` property).
 */
function toModelSourceError(
  error: unknown,
  source: string,
  kind: ModelSourceKind,
  options: ResolveModelOptions,
  context: { timedOut?: boolean; probing?: boolean } = {},
): ModelSourceError {
  if (error instanceof ModelSourceError) return error;
  if (options.signal?.aborted) return cancelledError(source, options);
  const shown = displaySource(source);
  const where = kind === "hf" ? "Hugging Face (or HF_ENDPOINT)" : hostOf(source);
  if (context.timedOut)
    return new ModelSourceError(
      "unreachable",
      `Cannot reach ${where} for ${shown}: no answer within ${Math.round((options.probeTimeoutMs ?? defaultProbeTimeoutMs) / 1000)}s.`,
      source,
      error,
    );
  const message = error instanceof Error ? error.message : String(error);
  const firstLine = message.split("\n")[0] ?? message;

  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof statusCode === "number") return httpError(statusCode, source, kind, error);

  const quant = /Cannot get quantization "([^"]*)" for model "([^"]*)"/.exec(message);
  if (quant)
    return new ModelSourceError(
      "not_found",
      `Model not found: ${shown} (Hugging Face has no such repository, or no ${quant[1] === "latest" ? "" : `"${quant[1]}" `}GGUF file in it).`,
      source,
      error,
    );
  const status = /Failed to fetch (?:byte range|manifest for [^:]*): (\d{3})\b/.exec(message);
  if (status?.[1] !== undefined) return httpError(Number(status[1]), source, kind, error);

  if (/Invalid (?:Hugging Face URI|URL)/.test(message))
    return new ModelSourceError("invalid_source", `Invalid model source: ${shown}.`, source, error);
  if (
    (error as { name?: unknown } | null)?.name === "InvalidGgufMagicError" ||
    /Invalid GGUF magic/.test(message)
  )
    return new ModelSourceError(
      "corrupt",
      `${shown} is not a GGUF model file (it does not start with the "GGUF" magic bytes)${context.probing ? "; nothing was downloaded" : ""}.`,
      source,
      error,
    );
  if (/GGUF version 1 is not supported/.test(message))
    return new ModelSourceError(
      "corrupt",
      `${shown} is a GGUF version 1 file, which llama.cpp no longer supports.`,
      source,
      error,
    );

  const code = networkCode(error);
  if (code === "ENOSPC")
    return new ModelSourceError(
      "download_failed",
      `No space left in ${resolve(options.downloadDir)} to download ${shown}.`,
      source,
      error,
    );
  if (code !== undefined && writeErrorCodes.has(code))
    return new ModelSourceError(
      "download_failed",
      `Cannot write the download of ${shown} to ${resolve(options.downloadDir)} (${code}); the partial file was removed.`,
      source,
      error,
    );
  if (code !== undefined || /fetch failed/.test(message))
    return new ModelSourceError(
      "unreachable",
      `Cannot reach ${where} for ${shown} (${code ?? "fetch failed"}). Check the network connection${kind === "hf" ? ", proxy settings and HF_ENDPOINT" : " and the URL"}.`,
      source,
      error,
    );
  if (context.probing && !/fetch|network|socket|header/i.test(message))
    return new ModelSourceError(
      "corrupt",
      `${shown} is not a readable GGUF model: ${firstLine}.`,
      source,
      error,
    );
  return new ModelSourceError("download_failed", `Download of ${shown} failed: ${firstLine}`, source, error);
}

/** `host:port` of a URL source, for messages. */
function hostOf(source: string): string {
  try {
    return new URL(source).host;
  } catch {
    return source;
  }
}

/**
 * The download cache's bookkeeping: beside every verified download `X.gguf` lmserve writes a small
 * sidecar `X.gguf.lmserve.json` saying where the file came from, which id it is served under and the
 * size it was verified at. node-llama-cpp names the files (`hf_<owner>_<repo>_<file>.gguf`) and keeps
 * partial downloads as `X.gguf.ipull` (ipull's progress file); neither knows the original source, which
 * is what `lmserve list` shows.
 */
import { randomBytes } from "node:crypto";
import { readFile, rename, rm, writeFile } from "node:fs/promises";

/** Suffix of the sidecar file written next to a cached model (`X.gguf` → `X.gguf.lmserve.json`). */
export const cacheRecordSuffix = ".lmserve.json";

/** Suffix ipull (node-llama-cpp's downloader) gives a partial download (`X.gguf` → `X.gguf.ipull`). */
export const partialDownloadSuffix = ".ipull";

/** The content of a sidecar file (JSON, UTF-8). */
export type CacheRecord = {
  /** Format version of this record; currently 1. */
  version: 1;
  /** The source the file was downloaded from, e.g. `hf:owner/repo/file.gguf` or a URL without its query string. */
  source: string;
  /** The default served model name derived from the source (see `modelIdFromSource`). */
  id: string;
  /** The cached file's name inside the download folder. */
  fileName: string;
  /** File size in bytes at verification time; a cached file of another size is re-verified. */
  sizeBytes: number;
  /** When the download was verified, ISO 8601. */
  downloadedAt: string;
  /** `general.architecture` from the GGUF header, when present (e.g. `"llama"`). */
  architecture?: string;
};

/**
 * Path of the sidecar of a cached model file.
 * @param modelPath Absolute path of the `.gguf` file.
 */
export function cacheRecordPath(modelPath: string): string {
  return `${modelPath}${cacheRecordSuffix}`;
}

/**
 * Reads the sidecar of `modelPath`.
 * @returns The record, or `undefined` when there is none or it is unreadable/invalid (never throws).
 */
export async function readCacheRecord(modelPath: string): Promise<CacheRecord | undefined> {
  try {
    const parsed: unknown = JSON.parse(await readFile(cacheRecordPath(modelPath), "utf8"));
    if (typeof parsed !== "object" || parsed === null) return undefined;
    const r = parsed as Record<string, unknown>;
    if (r.version !== 1 || typeof r.source !== "string" || typeof r.id !== "string") return undefined;
    if (
      typeof r.fileName !== "string" ||
      typeof r.sizeBytes !== "number" ||
      typeof r.downloadedAt !== "string"
    )
      return undefined;
    return {
      version: 1,
      source: r.source,
      id: r.id,
      fileName: r.fileName,
      sizeBytes: r.sizeBytes,
      downloadedAt: r.downloadedAt,
      ...(typeof r.architecture === "string" ? { architecture: r.architecture } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * Writes the sidecar of `modelPath` atomically (temporary file + rename), so a crash never leaves half a record.
 * @throws The fs error when the folder is not writable.
 */
export async function writeCacheRecord(modelPath: string, record: CacheRecord): Promise<void> {
  const target = cacheRecordPath(modelPath);
  const temp = `${target}.${randomBytes(4).toString("hex")}.tmp`;
  await writeFile(temp, `${JSON.stringify(record, null, 2)}\n`, "utf8");
  await rename(temp, target);
}

/**
 * Deletes a cached model with its sidecar and any partial download of it. Missing files are ignored.
 * @param modelPath Absolute path of the `.gguf` file.
 */
export async function removeCachedModel(modelPath: string): Promise<void> {
  await Promise.all(
    [modelPath, cacheRecordPath(modelPath), `${modelPath}${partialDownloadSuffix}`].map((p) =>
      rm(p, { force: true }),
    ),
  );
}

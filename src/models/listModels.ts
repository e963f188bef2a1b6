/**
 * `lmserve list`: the models in the download cache, with sizes and the source each was downloaded from
 * (from the sidecar records of `cacheRecord.ts`), plus unfinished downloads (ipull's `.ipull` files).
 * Reads only the folder listing, `stat`s and the small sidecar files; never parses models or uses the network.
 */
import { readdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { cacheRecordSuffix, partialDownloadSuffix, readCacheRecord } from "./cacheRecord.ts";
import { formatBytes } from "./progress.ts";

/** One entry of the download cache. */
export type CachedModel = {
  /** Default served model name: from the sidecar record, else the file name without `.gguf`. */
  id: string;
  /** File name inside the download folder (for a partial download, without the `.ipull` suffix). */
  fileName: string;
  /** Absolute path of the file on disk (for a partial download, the `.ipull` file). */
  path: string;
  /** Bytes on disk. For a partial download this includes ipull's trailing progress JSON. */
  sizeBytes: number;
  /** Where it was downloaded from (`hf:…` or a URL without query string); absent for files without a record. */
  source?: string;
  /** `general.architecture` recorded at verification, when known. */
  architecture?: string;
  /** When it was downloaded and verified (ISO 8601), else the file's modification time. */
  downloadedAt: string;
  /** False for an unfinished download (`X.gguf.ipull`), which the next `lmserve pull`/`serve` of its source resumes. */
  complete: boolean;
};

/**
 * Lists the cached models in `downloadDir`, sorted by id then file name: every `*.gguf` file (with its
 * sidecar record when present) and every unfinished `*.gguf.ipull` download.
 * @param downloadDir The cache folder; a missing folder yields an empty list.
 * @throws The fs error when the folder exists but cannot be read.
 */
export async function listModels(downloadDir: string): Promise<CachedModel[]> {
  const dir = resolve(downloadDir);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return [];
    throw error;
  }
  const models: CachedModel[] = [];
  for (const name of names) {
    if (name.endsWith(cacheRecordSuffix)) continue;
    const lower = name.toLowerCase();
    const partial = lower.endsWith(`.gguf${partialDownloadSuffix}`);
    if (!partial && !lower.endsWith(".gguf")) continue;
    const path = join(dir, name);
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(path);
    } catch {
      continue; // removed while listing
    }
    if (!info.isFile()) continue;
    const fileName = partial ? name.slice(0, -partialDownloadSuffix.length) : name;
    const record = partial ? undefined : await readCacheRecord(path);
    models.push({
      id: record?.id ?? fileName.replace(/\.gguf$/i, ""),
      fileName,
      path,
      sizeBytes: info.size,
      ...(record?.source !== undefined ? { source: record.source } : {}),
      ...(record?.architecture !== undefined ? { architecture: record.architecture } : {}),
      downloadedAt: record?.downloadedAt ?? info.mtime.toISOString(),
      complete: !partial,
    });
  }
  return models.sort((a, b) => a.id.localeCompare(b.id) || a.fileName.localeCompare(b.fileName));
}

/**
 * Formats {@link listModels}' result as a plain-text table for `lmserve list`:
 * columns `ID`, `SIZE`, `ARCH`, `SOURCE` (`-` when unknown; `(partial download)` for unfinished ones),
 * `FILE`, separated by two spaces, then a total line. An empty list gives one line naming the folder.
 * @param models Entries from {@link listModels}.
 * @param downloadDir The folder listed, shown in the header/empty message.
 * @returns Text ending with a newline.
 */
export function formatModelList(models: readonly CachedModel[], downloadDir: string): string {
  const dir = resolve(downloadDir);
  if (models.length === 0) return `No models cached in ${dir}\n`;
  const header = ["ID", "SIZE", "ARCH", "SOURCE", "FILE"];
  const rows = models.map((m) => [
    m.id,
    formatBytes(m.sizeBytes),
    m.architecture ?? "-",
    m.complete ? (m.source ?? "-") : "(partial download)",
    m.complete ? m.fileName : `${m.fileName}${partialDownloadSuffix}`,
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join("  ");
  const total = models.filter((m) => m.complete).reduce((sum, m) => sum + m.sizeBytes, 0);
  const complete = models.filter((m) => m.complete).length;
  return [
    `Models in ${dir}:`,
    line(header),
    ...rows.map(line),
    `${complete} model${complete === 1 ? "" : "s"}, ${formatBytes(total)}`,
    "",
  ].join("\n");
}

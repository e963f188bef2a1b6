/**
 * Download progress output for `lmserve serve|pull`: a single redrawn bar on a terminal, plain
 * `downloading X: 40% (1.2/3.0 MB)` lines every 10% otherwise (logs, CI, pipes), the same split
 * Hugging Face's CLI and npm use. Sizes are SI (1 MB = 1,000,000 bytes).
 */

/** A progress sample, as node-llama-cpp's `onProgress` reports it. Both values are in bytes; `totalSize` is 0 when unknown. */
export type DownloadProgress = {
  /** Total bytes of the file (0 when the server sent no length). */
  totalSize: number;
  /** Bytes on disk so far, including bytes kept from an earlier, resumed attempt. */
  downloadedSize: number;
};

/** The part of a writable stream the reporter uses (`process.stderr` fits). */
export type ProgressStream = {
  write(chunk: string): unknown;
  /** True for a terminal; selects the bar. */
  isTTY?: boolean;
  /** Terminal width in characters; the bar line is cut to fit. */
  columns?: number;
};

/** Options of {@link createProgressReporter}. */
export type ProgressReporterOptions = {
  /** Where to write (usually `process.stderr`). */
  stream: ProgressStream;
  /** What is being downloaded, shown at the start of every line (e.g. the model id). */
  label: string;
  /** Force the bar (`true`) or plain lines (`false`); default `stream.isTTY === true`. */
  tty?: boolean;
  /** Clock in milliseconds; default `Date.now` (tests inject a fake one). */
  now?: () => number;
  /** Minimum milliseconds between two bar redraws; default 100. The final redraw is never skipped. */
  minRedrawMs?: number;
  /** Plain mode prints a line each time the percentage crosses a multiple of this; default 10. */
  stepPercent?: number;
};

/** Receives progress samples and renders them; see {@link createProgressReporter}. */
export type ProgressReporter = {
  /** Record a sample; renders when due. Safe to call at any rate. */
  update(progress: DownloadProgress): void;
  /** The download completed: draws the 100% state and ends the bar's line. Idempotent. */
  finish(): void;
  /** The download failed or was cancelled: ends the bar's line so an error starts on a fresh line. Idempotent. */
  fail(): void;
};

const barWidth = 24;

/**
 * Formats a byte count for humans with SI units: `"512 B"`, `"340.2 KB"`, `"1.2 MB"`, `"4.81 GB"`.
 * @param bytes A non-negative byte count.
 */
export function formatBytes(bytes: number): string {
  if (bytes < 1e3) return `${Math.round(bytes)} B`;
  if (bytes < 1e6) return `${(bytes / 1e3).toFixed(1)} KB`;
  if (bytes < 1e9) return `${(bytes / 1e6).toFixed(1)} MB`;
  return `${(bytes / 1e9).toFixed(2)} GB`;
}

/** `"1.2/3.0 MB"`: both numbers in the unit of the total (MB below 1 GB, GB above). */
function formatPair(done: number, total: number): string {
  if (total >= 1e9) return `${(done / 1e9).toFixed(2)}/${(total / 1e9).toFixed(2)} GB`;
  return `${(done / 1e6).toFixed(1)}/${(total / 1e6).toFixed(1)} MB`;
}

/** `"1m05s"` / `"42s"`. */
function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/**
 * Creates a progress reporter writing to `options.stream`.
 *
 * - Terminal (`tty`): one line redrawn in place with `\r` and erase-to-end-of-line (`ESC[K`):
 *   `label [██████░░░░░░] 40% 1.2/3.0 MB 5.1 MB/s ETA 3s`, at most every `minRedrawMs`, cut to
 *   `stream.columns`; `finish()`/`fail()` end the line with `\n`.
 * - Otherwise: `downloading label: 40% (1.2/3.0 MB)` once when the first sample arrives and then each time
 *   the percentage crosses a multiple of `stepPercent` (so a resumed download starts at its resumed
 *   percentage); with an unknown total, one `downloading label: 12.0 MB` line per 100 MB.
 *
 * Speed is measured from the first sample, so bytes kept from an earlier attempt do not inflate it.
 * Never throws from `update`/`finish`/`fail` because of the samples it is given.
 */
export function createProgressReporter(options: ProgressReporterOptions): ProgressReporter {
  const { stream, label } = options;
  const tty = options.tty ?? stream.isTTY === true;
  const now = options.now ?? Date.now;
  const minRedrawMs = options.minRedrawMs ?? 100;
  const stepPercent = options.stepPercent ?? 10;

  let first: { at: number; bytes: number } | undefined;
  let last: DownloadProgress = { totalSize: 0, downloadedSize: 0 };
  let lastDrawAt = Number.NEGATIVE_INFINITY;
  let barDrawn = false;
  let lastStep = -1;
  let ended = false;

  function speed(at: number): number | undefined {
    if (first === undefined) return undefined;
    const seconds = (at - first.at) / 1000;
    if (seconds < 0.5) return undefined;
    return Math.max(0, last.downloadedSize - first.bytes) / seconds;
  }

  function drawBar(at: number): void {
    const { totalSize: total, downloadedSize: done } = last;
    const parts = [label];
    if (total > 0) {
      const ratio = Math.min(1, Math.max(0, done / total));
      const filled = Math.round(ratio * barWidth);
      parts.push(`[${"█".repeat(filled)}${"░".repeat(barWidth - filled)}]`);
      parts.push(`${Math.floor(ratio * 100)}%`.padStart(4), formatPair(done, total));
    } else {
      parts.push(formatBytes(done));
    }
    const bytesPerSecond = speed(at);
    if (bytesPerSecond !== undefined) {
      parts.push(`${formatBytes(bytesPerSecond)}/s`);
      if (total > 0 && bytesPerSecond > 0 && done < total)
        parts.push(`ETA ${formatDuration((total - done) / bytesPerSecond)}`);
    }
    let line = parts.join(" ");
    const columns = stream.columns;
    if (columns !== undefined && columns > 1 && line.length > columns - 1) line = line.slice(0, columns - 1);
    stream.write(`\r${line}\x1b[K`);
    barDrawn = true;
    lastDrawAt = at;
  }

  function printLines(force: boolean): void {
    const { totalSize: total, downloadedSize: done } = last;
    if (total > 0) {
      const percent = Math.min(100, Math.floor((done / total) * 100));
      const step = Math.floor(percent / stepPercent);
      if (step > lastStep || (force && percent === 100 && lastStep * stepPercent < 100)) {
        lastStep = step;
        stream.write(`downloading ${label}: ${percent}% (${formatPair(done, total)})\n`);
      }
    } else {
      const step = Math.floor(done / 100e6);
      if (step > lastStep || force) {
        lastStep = step;
        stream.write(`downloading ${label}: ${formatBytes(done)}\n`);
      }
    }
  }

  return {
    update(progress) {
      if (ended) return;
      const at = now();
      const totalSize = Number.isFinite(progress.totalSize) ? Math.max(0, progress.totalSize) : 0;
      const downloadedSize = Number.isFinite(progress.downloadedSize)
        ? Math.max(0, progress.downloadedSize)
        : 0;
      last = { totalSize, downloadedSize };
      first ??= { at, bytes: downloadedSize };
      if (tty) {
        if (at - lastDrawAt >= minRedrawMs) drawBar(at);
      } else {
        printLines(false);
      }
    },
    finish() {
      if (ended) return;
      ended = true;
      if (last.totalSize > 0) last = { totalSize: last.totalSize, downloadedSize: last.totalSize };
      if (first === undefined) return;
      if (tty) {
        drawBar(now());
        stream.write("\n");
      } else {
        printLines(true);
      }
    },
    fail() {
      if (ended) return;
      ended = true;
      if (tty && barDrawn) stream.write("\n");
    },
  };
}

/**
 * Watches a served model file for changes on disk. llama.cpp maps the file into memory: when the file
 * is truncated or rewritten in place while served, the next read of a page past the new end kills the
 * process with SIGBUS. The watch notices (size and modification time, checked on a timer and before
 * each request) so the server stops serving that model instead. Models must be replaced by rename
 * (write the new file next to it, then `mv` it over): the served mapping keeps the old inode, which
 * stays intact and keeps being served until a restart (the watch sees the new inode and stops checking).
 */
import { statSync } from "node:fs";

/** Options of {@link ModelFileWatch}. */
export type ModelFileWatchOptions = {
  /** How often the timer checks, in milliseconds. Defaults to 2,000. */
  intervalMs?: number;
  /** Called once, on the first change seen, with a one-line reason ("the file shrank from … to … bytes"). */
  onChange?: (reason: string) => void;
};

/**
 * The size, modification time and inode of one file, taken when the model was loaded, compared on
 * every {@link check}. Once a change is seen the watch stays changed (the mapping cannot recover) and
 * its timer stops. The timer never keeps the process alive.
 */
export class ModelFileWatch {
  readonly path: string;
  private readonly size: number;
  private readonly mtimeMs: number;
  private readonly inode: number;
  private readonly onChange: ((reason: string) => void) | undefined;
  private reason: string | undefined;
  private readonly timer: NodeJS.Timeout;

  /**
   * Takes the file's current state as the reference and starts the timer.
   * @throws the fs error when `path` cannot be stat'ed.
   */
  constructor(path: string, options: ModelFileWatchOptions = {}) {
    const info = statSync(path);
    this.path = path;
    this.size = info.size;
    this.mtimeMs = info.mtimeMs;
    this.inode = info.ino;
    this.onChange = options.onChange;
    this.timer = setInterval(() => this.check(), options.intervalMs ?? 2_000);
    this.timer.unref();
  }

  /** Why the file no longer matches the loaded model, or undefined while it does. */
  get changed(): string | undefined {
    return this.reason;
  }

  /**
   * Compares the file with the reference now (one `stat`): a smaller or larger size, a new modification
   * time or a failing `stat` count as changed; a new inode (replaced by rename) or a deleted path do not
   * (the mapping keeps the old inode alive), and end the watch.
   * @returns true while the served mapping is safe.
   */
  check(): boolean {
    if (this.reason !== undefined) return false;
    let reason: string | undefined;
    try {
      const info = statSync(this.path);
      // Replaced by rename: the mapping holds the old inode, which nothing can reach by path any more.
      if (info.ino !== this.inode) {
        this.stop();
        return true;
      }
      if (info.size < this.size) reason = `the file shrank from ${this.size} to ${info.size} bytes`;
      else if (info.size !== this.size)
        reason = `the file's size changed from ${this.size} to ${info.size} bytes`;
      else if (info.mtimeMs !== this.mtimeMs) reason = "the file was modified in place";
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // Deleted: the mapping keeps the unlinked inode alive, as with a rename.
      if (code === "ENOENT") {
        this.stop();
        return true;
      }
      reason = `the file cannot be stat'ed: ${code ?? String(error)}`;
    }
    if (reason === undefined) return true;
    this.reason = reason;
    this.stop();
    this.onChange?.(reason);
    return false;
  }

  /** Stops the timer. */
  stop(): void {
    clearInterval(this.timer);
  }
}

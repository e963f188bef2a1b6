/**
 * `lmserve pull MODEL`: resolve and download a model into the cache without serving it, showing progress
 * (a bar on a terminal, plain lines otherwise; see `progress.ts`) and a final one-line summary.
 */
import { ModelSourceError } from "./ModelSourceError.ts";
import { createProgressReporter, formatBytes, type ProgressStream } from "./progress.ts";
import { type ResolvedModel, type ResolveModelOptions, resolveModel } from "./resolveModel.ts";

/** Options of {@link pullModel}: those of `resolveModel` (minus `onProgress`) plus where to print. */
export type PullModelOptions = Omit<ResolveModelOptions, "onProgress"> & {
  /** Where progress and the summary go; usually `process.stderr`. */
  stream: ProgressStream;
  /** Force the bar (`true`) or plain lines (`false`); default: `stream.isTTY`. */
  tty?: boolean;
};

/**
 * Downloads `source` into `options.downloadDir` (or finds it there / on disk) and prints:
 * progress while downloading, then `Downloaded <id> (<size>) to <path>` or
 * `<id> is already available at <path> (<size>)`.
 * @param source A local path, an `hf:` URI or an http(s) URL (see `resolveModel`).
 * @returns The resolved model, as `resolveModel` returns it.
 * @throws ModelSourceError as `resolveModel` (the progress line is ended first so the error prints cleanly).
 */
export async function pullModel(source: string, options: PullModelOptions): Promise<ResolvedModel> {
  const { stream, tty, ...resolveOptions } = options;
  const reporter = createProgressReporter({
    stream,
    label: labelFor(source),
    ...(tty !== undefined ? { tty } : {}),
  });
  let result: ResolvedModel;
  try {
    result = await resolveModel(source, { ...resolveOptions, onProgress: (p) => reporter.update(p) });
  } catch (error) {
    reporter.fail();
    throw error instanceof ModelSourceError
      ? error
      : new ModelSourceError("download_failed", String(error), source, error);
  }
  reporter.finish();
  stream.write(
    result.downloaded
      ? `Downloaded ${result.id} (${formatBytes(result.sizeBytes)}) to ${result.path}\n`
      : `${result.id} is already available at ${result.path} (${formatBytes(result.sizeBytes)})\n`,
  );
  return result;
}

/** The progress label: the source's file name part, short enough for one terminal line. */
function labelFor(source: string): string {
  const withoutQuery = source.split(/[?#]/)[0] ?? source;
  const last = withoutQuery.split("/").pop() ?? withoutQuery;
  return last === "" ? source : last.replace(/^(hf|huggingface):/i, "");
}

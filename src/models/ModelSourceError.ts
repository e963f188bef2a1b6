/**
 * The one error type of `src/models/`: every way a model source can fail (missing file, unknown
 * Hugging Face repo, unreachable host, corrupt download, cancelled download) surfaces as a
 * {@link ModelSourceError} whose message is a single line the CLI can print as is, without a stack.
 */

/**
 * Why a model source failed, stable enough for the CLI to pick an exit code or a hint:
 * - `not_found`: the local file, Hugging Face repo/file/quantization or URL does not exist (HTTP 404/410).
 * - `unreadable`: the local path exists but is a directory or cannot be read.
 * - `invalid_source`: the text is neither a path, an `hf:` URI nor an http(s) URL that can be parsed.
 * - `access_denied`: the server answered 401/403 (gated or private Hugging Face repo without `HF_TOKEN`).
 * - `unreachable`: the host could not be contacted (DNS, refused connection, timeout).
 * - `download_failed`: any other transfer failure (HTTP 5xx, disk full, …).
 * - `corrupt`: the file is not a valid GGUF model (bad magic bytes, unparsable header, truncated data).
 * - `cancelled`: the caller's `AbortSignal` fired; a partial download is kept for resuming.
 */
export type ModelSourceErrorCode =
  | "not_found"
  | "unreadable"
  | "invalid_source"
  | "access_denied"
  | "unreachable"
  | "download_failed"
  | "corrupt"
  | "cancelled";

/**
 * A model source could not be resolved to a usable local `.gguf` file.
 * The message is always one line (newlines are collapsed); `source` is the text the user passed and
 * `cause` (standard `Error.cause`) keeps the underlying node-llama-cpp / ipull / fs error for debugging.
 */
export class ModelSourceError extends Error {
  /** The failure category (see {@link ModelSourceErrorCode}). */
  readonly code: ModelSourceErrorCode;
  /** The model source as given by the user (path, `hf:` URI or URL). */
  readonly source: string;

  /**
   * @param code The failure category.
   * @param message A human-readable explanation; newlines and runs of whitespace are collapsed to one space.
   * @param source The model source the error is about.
   * @param cause The underlying error, if any.
   */
  constructor(code: ModelSourceErrorCode, message: string, source: string, cause?: unknown) {
    super(message.replace(/\s*\n\s*/g, " ").trim(), cause === undefined ? undefined : { cause });
    this.name = "ModelSourceError";
    this.code = code;
    this.source = source;
  }
}

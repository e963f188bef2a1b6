/**
 * Parsing of the `MODEL` argument of `lmserve serve|pull`: which kind of source it is, which model id it
 * is served under by default, and how to show it without leaking credentials. The URI prefixes follow
 * node-llama-cpp 3.21's `parseModelUri` (`hf:`, `hf://`, `huggingface:`, `huggingface://`, `hf.co/`,
 * `huggingface.co/`) so lmserve and node-llama-cpp always agree on what is a URI.
 */
import { createHash } from "node:crypto";
import { basename } from "node:path";
import { ModelSourceError } from "./ModelSourceError.ts";

/** `path`: a local file; `hf`: a Hugging Face model URI; `url`: an `http://` or `https://` URL. */
export type ModelSourceKind = "path" | "hf" | "url";

const hfPrefixes = ["hf://", "huggingface://", "hf:", "huggingface:", "hf.co/", "huggingface.co/"] as const;

/** A parsed `hf:` URI. */
export type HuggingFaceUri = {
  /** Repository owner (user or organisation). */
  owner: string;
  /** Repository name, without the `:TAG` part. */
  repo: string;
  /** `file` form: `hf:owner/repo/path/file.gguf[#branch]`; `quant` form: `hf:owner/repo[:QUANT]`. */
  form: "file" | "quant";
  /** File path inside the repo (file form only), without `#branch`. */
  filePath?: string;
  /** Branch (file form only); `main` unless given after `#`. */
  branch?: string;
  /** Quantization tag (quant form only), upper-cased, e.g. `Q8_0`; absent means node-llama-cpp's default pick. */
  tag?: string;
};

/**
 * Classifies a model source the way node-llama-cpp's `resolveModelDestination` does: Hugging Face URI
 * prefixes first, then `http://`/`https://` URLs (case-insensitive), everything else is a local path.
 * @param source The `MODEL` argument.
 */
export function classifyModelSource(source: string): ModelSourceKind {
  const lower = source.toLowerCase();
  if (hfPrefixes.some((prefix) => lower.startsWith(prefix))) return "hf";
  if (lower.startsWith("http://") || lower.startsWith("https://")) return "url";
  return "path";
}

/**
 * Parses a Hugging Face model URI with node-llama-cpp 3.21's rules: `owner/repo[:TAG]` is the quant form
 * (also when more path follows a `repo:TAG`), `owner/repo/path/to/file.gguf[#branch]` the file form.
 * @param source A source for which {@link classifyModelSource} returned `"hf"`.
 * @throws ModelSourceError `invalid_source` when owner, repo or file path is empty.
 */
export function parseHuggingFaceUri(source: string): HuggingFaceUri {
  const lower = source.toLowerCase();
  const prefix = hfPrefixes.find((p) => lower.startsWith(p)) ?? "";
  const [owner = "", repoPart = "", ...rest] = source.slice(prefix.length).split("/");
  const invalid = () =>
    new ModelSourceError(
      "invalid_source",
      `Invalid Hugging Face model URI: ${source}. Use hf:owner/repo/file.gguf or hf:owner/repo:QUANT.`,
      source,
    );
  if (owner === "" || repoPart === "") throw invalid();
  if (rest.length === 0 || repoPart.includes(":")) {
    const [repo = "", ...tagParts] = repoPart.split(":");
    const tag = tagParts.join(":").trim();
    if (repo === "") throw invalid();
    return { owner, repo, form: "quant", ...(tag !== "" ? { tag: tag.toUpperCase() } : {}) };
  }
  const joined = rest.join("/");
  const hashIndex = joined.indexOf("#");
  const filePath = hashIndex >= 0 ? joined.slice(0, hashIndex) : joined;
  const branch = hashIndex >= 0 && hashIndex < joined.length - 1 ? joined.slice(hashIndex + 1) : "main";
  if (filePath === "" || filePath.endsWith("/")) throw invalid();
  return { owner, repo: repoPart, form: "file", filePath, branch };
}

/** Strips `.gguf` and a split-part suffix (`-00001-of-00003`) from a file name. */
function stripModelExtension(fileName: string): string {
  return fileName.replace(/\.gguf$/i, "").replace(/-\d{5}-of-\d{5}$/, "");
}

/**
 * The default served model name of a source: the model file's base name without `.gguf` and without a
 * split-part suffix. For a local path, its file name; for `hf:owner/repo/dir/file.gguf`, `file`; for a URL,
 * the last path segment; for the quant form `hf:owner/repo:QUANT`, the name node-llama-cpp gives the
 * download (`<repo without -GGUF>.<QUANT>`), read from `resolvedPath` after dropping node-llama-cpp's
 * `hf_<owner>_[<repo>_]` prefix.
 * @param source The `MODEL` argument.
 * @param resolvedPath The local file the source resolved to (used for the quant form and as a fallback).
 */
export function modelIdFromSource(source: string, resolvedPath: string): string {
  const fallback = stripModelExtension(basename(resolvedPath));
  const kind = classifyModelSource(source);
  let name: string | undefined;
  if (kind === "path") {
    name = basename(source);
  } else if (kind === "url") {
    try {
      const segment = new URL(source).pathname.split("/").pop() ?? "";
      name = decodeURIComponent(segment);
    } catch {
      name = undefined;
    }
  } else {
    try {
      const uri = parseHuggingFaceUri(source);
      if (uri.form === "file") {
        name = uri.filePath?.split("/").pop();
      } else {
        let local = basename(resolvedPath);
        const ownerPrefix = `hf_${uri.owner}_`;
        if (local.startsWith(ownerPrefix)) {
          local = local.slice(ownerPrefix.length);
          const repoPrefix = `${uri.repo}_`;
          if (local.startsWith(repoPrefix) && local.length > repoPrefix.length)
            local = local.slice(repoPrefix.length);
        }
        name = local;
      }
    } catch {
      name = undefined;
    }
  }
  const id = name === undefined ? "" : stripModelExtension(name);
  return id === "" ? fallback : id;
}

/**
 * A source safe to print and to store: URLs lose their user-info, query string and fragment (pre-signed
 * download links carry credentials there); paths and `hf:` URIs are returned unchanged.
 * @param source The `MODEL` argument.
 */
export function displaySource(source: string): string {
  if (classifyModelSource(source) !== "url") return source;
  try {
    const url = new URL(source);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return source;
  }
}

/**
 * The cache file name lmserve asks node-llama-cpp to use for a URL source: `url_<8 hex>_<file name>`,
 * the hex being a SHA-256 prefix of the URL without query/fragment. Distinct URLs with the same file name
 * therefore never overwrite each other, and the name is known before any network access, so a cached URL
 * is reused offline. Returns `undefined` when the URL path does not end in `.gguf` (node-llama-cpp then
 * picks the name from the response).
 * @param source A source for which {@link classifyModelSource} returned `"url"`.
 */
export function cacheFileNameForUrl(source: string): string | undefined {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    return undefined;
  }
  const last = decodeURIComponent(url.pathname.split("/").pop() ?? "");
  if (!/\.gguf$/i.test(last)) return undefined;
  const safe = last.replace(/[^A-Za-z0-9._-]/g, "_");
  const hash = createHash("sha256")
    .update(`${url.protocol}//${url.host}${url.pathname}`)
    .digest("hex")
    .slice(0, 8);
  return `url_${hash}_${safe}`;
}

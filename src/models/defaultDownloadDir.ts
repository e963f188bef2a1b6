import { isAbsolute, join } from "node:path";

/**
 * The default folder downloaded models are cached in: `$XDG_CACHE_HOME/lmserve/models`, or
 * `<homedir>/.cache/lmserve/models` when `XDG_CACHE_HOME` is unset, empty or relative (the XDG Base
 * Directory spec says relative values must be ignored). Follows the same convention as Hugging Face's
 * `~/.cache/huggingface`.
 *
 * Pure: lmserve's config rule is that only `src/config/serveConfig.ts` reads `process.env`, so the caller passes the
 * environment and the home directory (e.g. `defaultDownloadDir(process.env, os.homedir())`).
 *
 * @param env Environment variables; only `XDG_CACHE_HOME` is read.
 * @param homedir The user's home directory (absolute path).
 * @returns An absolute path (not created here; the downloader creates it on first use).
 */
export function defaultDownloadDir(
  env: Readonly<Record<string, string | undefined>>,
  homedir: string,
): string {
  const xdg = env.XDG_CACHE_HOME;
  const cacheRoot = xdg !== undefined && xdg !== "" && isAbsolute(xdg) ? xdg : join(homedir, ".cache");
  return join(cacheRoot, "lmserve", "models");
}

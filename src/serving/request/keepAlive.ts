/**
 * A request's `keep_alive` (Ollama's): how long its model stays loaded once idle after the request.
 * A number is seconds; a string is a Go duration (`"5m"`, `"1h30m"`, `"90s"`, `"500ms"`); `0` unloads the
 * model as soon as its last request ends; a negative value (`-1`, `"-1m"`) keeps it loaded until it is
 * unloaded explicitly or evicted. Unlike Ollama (default 5 minutes), a model a request sets nothing for
 * follows `--idle-unload` (or its config entry's `idle-unload`), and stays loaded when neither is set.
 */
import { badRequest } from "../../errors.ts";

/** Milliseconds of idleness before the model unloads; `null`: never (until unloaded or evicted). */
export type KeepAliveMs = number | null;

const UNITS_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** The longest finite keep-alive, in ms (about 24.8 days: the most a Node.js timer waits). */
export const MAX_KEEP_ALIVE_MS = 2 ** 31 - 1;

/**
 * Parses a request's `keep_alive`; `undefined` and `null` give `undefined` (not set).
 * A finite duration longer than {@link MAX_KEEP_ALIVE_MS} counts as forever.
 * @throws ApiError 400 (`param: "keep_alive"`) for a value that is neither a number nor a duration.
 */
export function parseKeepAlive(value: unknown): KeepAliveMs | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw invalid(value);
    return fromMs(value * 1000);
  }
  if (typeof value !== "string") throw invalid(value);
  const text = value.trim();
  if (text === "0" || text === "-0" || text === "+0") return 0;
  const match = /^([+-]?)((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+$/.exec(text);
  if (!match) throw invalid(value);
  let ms = 0;
  for (const part of text.replace(/^[+-]/, "").matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/g)) {
    ms += Number(part[1]) * (UNITS_MS[part[2] as string] ?? 0);
  }
  return fromMs(match[1] === "-" ? -ms : ms);
}

function fromMs(ms: number): KeepAliveMs {
  if (ms < 0 || ms > MAX_KEEP_ALIVE_MS) return null;
  return Math.round(ms);
}

function invalid(value: unknown) {
  return badRequest(
    `keep_alive must be a number of seconds or a duration such as "5m", "1h30m" or "90s" (0 unloads the model after this request, a negative value keeps it loaded), got ${JSON.stringify(value)}.`,
    "keep_alive",
  );
}

/**
 * Parsers of the operational flag values that are not plain integers: rates (`--rate-limit 60/min`),
 * byte sizes (`--max-body-size 8mb`), durations in seconds and origin lists. Each throws a
 * {@link ConfigError} naming the flag.
 */
import { ConfigError } from "./ConfigError.ts";

/** A request rate: at most `requests` per `windowSeconds`. */
export type RateLimit = { requests: number; windowSeconds: number };

const RATE_UNITS: Record<string, number> = {
  s: 1,
  sec: 1,
  second: 1,
  m: 60,
  min: 60,
  minute: 60,
  h: 3600,
  hour: 3600,
};

/**
 * Parses `N/unit` (unit: `s`, `min`, `h`; also `second`, `minute`, `hour`) or a bare `N` (per minute).
 * @throws ConfigError for anything else, or N < 1.
 */
export function parseRateLimit(value: string, flag = "--rate-limit"): RateLimit {
  const match = /^\s*(\d+)\s*(?:\/\s*([a-z]+))?\s*$/i.exec(value);
  const unit = (match?.[2] ?? "min").toLowerCase();
  const windowSeconds = RATE_UNITS[unit];
  const requests = Number(match?.[1]);
  if (!match || windowSeconds === undefined || !Number.isSafeInteger(requests) || requests < 1) {
    throw new ConfigError(`${flag} must look like 60/min, 5/s or 1000/h, got '${value}'.`);
  }
  return { requests, windowSeconds };
}

const SIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};

/**
 * Parses a byte size: a number of bytes, or with a binary unit (`512kb`, `8mb`, `1gb`: 1 kb = 1024 bytes).
 * @throws ConfigError for anything else or a size below 1 byte.
 */
export function parseByteSize(value: string, flag = "--max-body-size"): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = SIZE_UNITS[(match?.[2] ?? "").toLowerCase()];
  const bytes = match && unit !== undefined ? Math.floor(Number(match[1]) * unit) : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes < 1) {
    throw new ConfigError(`${flag} must be a size such as 1048576, 512kb or 8mb, got '${value}'.`);
  }
  return bytes;
}

/**
 * Parses a duration in seconds (a non-negative number, fractions allowed).
 * @throws ConfigError for anything else.
 */
export function parseSeconds(value: string, flag: string): number {
  const seconds = Number(value);
  if (value.trim() === "" || !Number.isFinite(seconds) || seconds < 0) {
    throw new ConfigError(`${flag} must be a number of seconds, got '${value}'.`);
  }
  return seconds;
}

/**
 * Parses `--allowed-origins` values: each may itself be a comma-separated list or a JSON list (as
 * vLLM's `--allowed-origins '["https://a.example"]'`). `*` allows every origin.
 * @throws ConfigError for an origin that is neither `*` nor a `scheme://host[:port]` URL origin.
 */
export function parseOrigins(values: readonly string[], flag = "--allowed-origins"): string[] {
  const origins: string[] = [];
  for (const value of values) {
    let items: unknown;
    if (value.trim().startsWith("[")) {
      try {
        items = JSON.parse(value);
      } catch {
        throw new ConfigError(`${flag}: '${value}' is not a valid JSON list.`);
      }
    }
    const list = Array.isArray(items) ? items : value.split(",");
    for (const item of list) {
      const origin = String(item).trim();
      if (origin === "") continue;
      if (origin !== "*" && !isOrigin(origin)) {
        throw new ConfigError(`${flag}: '${origin}' is not an origin such as https://app.example.com or *.`);
      }
      origins.push(origin === "*" ? origin : new URL(origin).origin);
    }
  }
  return [...new Set(origins)];
}

function isOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return url.origin === value.replace(/\/$/, "") && url.origin !== "null";
  } catch {
    return false;
  }
}

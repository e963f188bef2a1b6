/**
 * The production-operations part of the `lmserve serve` configuration: API keys, rate and size limits,
 * timeouts, request caps, CORS origins, request logging and graceful shutdown. `serveConfig.ts` merges it
 * into the one frozen `ServeConfig`.
 */
import { z } from "zod";
import { ConfigError } from "./ConfigError.ts";
import { parseByteSize, parseOrigins, parseRateLimit, parseSeconds } from "./values.ts";

/** The raw operational flags as the CLI parser (or a config file) hands them over. */
export type OperationsFlags = {
  /** `--api-key KEY`, repeatable. */
  apiKey?: string[];
  /** `--protect-metrics`: `/metrics` needs the API key too. */
  protectMetrics?: boolean;
  /** `--rate-limit N/min`. */
  rateLimit?: string;
  /** `--max-body-size SIZE`. */
  maxBodySize?: string;
  /** `--receive-timeout SECONDS`. */
  receiveTimeout?: string;
  /** `--timeout-keep-alive SECONDS` (uvicorn's / vLLM's name). */
  timeoutKeepAlive?: string;
  /** `--max-tokens-cap N`. */
  maxTokensCap?: string;
  /** `--max-n N`. */
  maxN?: string;
  /** `--allowed-origins ORIGIN`, repeatable, or a comma-separated / JSON list. */
  allowedOrigins?: string[];
  /** `--log-requests`: log prompts and outputs. */
  logRequests?: boolean;
  /** `--shutdown-timeout SECONDS`. */
  shutdownTimeout?: string;
};

/** The validated operational settings (part of `ServeConfig`). */
export const OperationsConfigSchema = z.object({
  /** Accepted bearer tokens; empty = no authentication. */
  apiKeys: z.array(z.string().min(1)),
  /** Whether `/metrics` requires a key (health endpoints never do). */
  protectMetrics: z.boolean(),
  /** Requests allowed per key (per client address without keys) and window; absent = unlimited. */
  rateLimit: z.object({ requests: z.number().int().min(1), windowSeconds: z.number().positive() }).optional(),
  /** Largest request body in bytes; larger is a 413. Default 8 MiB. */
  maxBodySize: z.number().int().min(1),
  /** Seconds allowed to receive a request's headers and body. Default 60. */
  receiveTimeout: z.number().positive(),
  /** Seconds an idle keep-alive connection stays open. Default 5 (as uvicorn / vLLM). */
  timeoutKeepAlive: z.number().positive(),
  /** Largest `max_tokens` / `max_completion_tokens` a request may ask for; absent = the context. */
  maxTokensCap: z.number().int().min(1).optional(),
  /** Largest `n` / `best_of` a request may ask for; absent = the schema's 16. */
  maxN: z.number().int().min(1).optional(),
  /** CORS origins allowed to call the API (`*` = any); empty = no CORS headers. */
  allowedOrigins: z.array(z.string()),
  /** Log prompts and outputs (never logged otherwise). */
  logRequests: z.boolean(),
  /** Seconds in-flight requests get to finish after SIGTERM/SIGINT. Default 30. */
  shutdownTimeout: z.number().min(0),
});

/** Validated operational settings. */
export type OperationsConfig = z.infer<typeof OperationsConfigSchema>;

/**
 * Parses the operational flags, with their defaults.
 * @param envApiKey `LMSERVE_API_KEY` (serveConfig.ts reads the environment), added to the `--api-key` keys.
 * @throws ConfigError naming the flag for a malformed value.
 */
export function operationsSettings(flags: OperationsFlags, envApiKey: string | undefined): OperationsConfig {
  const apiKeys = [...(flags.apiKey ?? [])];
  if (envApiKey !== undefined && envApiKey.trim() !== "") apiKeys.push(envApiKey.trim());
  if (apiKeys.some((key) => key.trim() === "")) throw new ConfigError("--api-key must not be empty.");
  return {
    apiKeys: [...new Set(apiKeys)],
    protectMetrics: flags.protectMetrics ?? false,
    ...(flags.rateLimit !== undefined ? { rateLimit: parseRateLimit(flags.rateLimit) } : {}),
    maxBodySize: parseByteSize(flags.maxBodySize ?? "8mb"),
    receiveTimeout: positive(
      parseSeconds(flags.receiveTimeout ?? "60", "--receive-timeout"),
      "--receive-timeout",
    ),
    timeoutKeepAlive: positive(
      parseSeconds(flags.timeoutKeepAlive ?? "5", "--timeout-keep-alive"),
      "--timeout-keep-alive",
    ),
    ...optionalCount("maxTokensCap", flags.maxTokensCap, "--max-tokens-cap"),
    ...optionalCount("maxN", flags.maxN, "--max-n"),
    allowedOrigins: parseOrigins(flags.allowedOrigins ?? []),
    logRequests: flags.logRequests ?? false,
    shutdownTimeout: parseSeconds(flags.shutdownTimeout ?? "30", "--shutdown-timeout"),
  };
}

function positive(seconds: number, flag: string): number {
  if (seconds <= 0) throw new ConfigError(`${flag} must be more than 0 seconds.`);
  return seconds;
}

function optionalCount<Key extends string>(
  key: Key,
  value: string | undefined,
  flag: string,
): Partial<Record<Key, number>> {
  if (value === undefined) return {};
  const count = Number(value);
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new ConfigError(`${flag} must be a positive integer, got '${value}'.`);
  }
  return { [key]: count } as Partial<Record<Key, number>>;
}

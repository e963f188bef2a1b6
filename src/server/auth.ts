import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { unauthorized } from "../errors.ts";
import { sendError } from "./errorBody.ts";

/** Options of {@link registerAuth}. */
export type AuthOptions = {
  /** Accepted bearer tokens (`--api-key`, `LMSERVE_API_KEY`); empty: authentication is off. */
  apiKeys: readonly string[];
  /** Also require a key on `/metrics` (`--protect-metrics`). */
  protectMetrics: boolean;
};

/**
 * Whether a path needs the API key: every `/v1/*` route except the health probes (`/v1/health/*`),
 * `/rerank`, `/v2/rerank`, `/score`, vLLM's tokenizer routes `/tokenize` and `/detokenize` (open in vLLM; here they cost model CPU, so
 * they are protected), llama-server's `/models`, `/models/load` and `/models/unload`, and `/metrics` with `--protect-metrics`. `/health`, `/openapi.json`, `/docs`
 * and the web UI's files stay open. `url` may carry a query string.
 */
export function requiresApiKey(url: string, protectMetrics: boolean): boolean {
  const path = url.split("?", 1)[0] ?? url;
  if (path.startsWith("/v1/health/") || path === "/v1/health") return false;
  if (path === "/v1" || path.startsWith("/v1/")) return true;
  if (path === "/tokenize" || path === "/detokenize") return true;
  // llama-server's router routes: the model list, loading and unloading models.
  if (path === "/models" || path === "/models/load" || path === "/models/unload") return true;
  // llama-server's and vLLM's rerank and score paths run the model, as the /v1 ones do.
  if (path === "/rerank" || path === "/v2/rerank" || path === "/score") return true;
  return protectMetrics && (path === "/metrics" || path.startsWith("/metrics/"));
}

/**
 * The bearer token of a request (`Authorization: Bearer TOKEN`, scheme case-insensitive as RFC 7235
 * says), or undefined when there is none.
 */
export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== "string") return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * The API key of a request: the bearer token, else Anthropic's `x-api-key` header; undefined when
 * there is neither.
 */
export function requestApiKey(request: FastifyRequest): string | undefined {
  const header = request.headers["x-api-key"];
  return bearerToken(request) ?? (typeof header === "string" && header.length > 0 ? header : undefined);
}

/**
 * Compares a token against every key in constant time: both sides are hashed to SHA-256 first (equal
 * lengths for `timingSafeEqual`), and every key is compared, whichever matches.
 */
export function keyMatches(token: string, keyDigests: readonly Buffer[]): boolean {
  const digest = sha256(token);
  let matched = false;
  for (const key of keyDigests) matched = timingSafeEqual(digest, key) || matched;
  return matched;
}

/** The key each request authenticated with (set by {@link registerAuth}'s hook). */
const authenticated = new WeakMap<FastifyRequest, string>();

/**
 * The API key a request authenticated with: one of `--api-key`'s, once {@link registerAuth}'s hook
 * accepted it; undefined when authentication is off or the route needs no key.
 */
export function authenticatedKey(request: FastifyRequest): string | undefined {
  return authenticated.get(request);
}

/**
 * Checks `Authorization: Bearer KEY` (or Anthropic's `x-api-key: KEY`) on every route {@link requiresApiKey} names, before anything else
 * runs for the request: a missing or wrong key is a 401 with `WWW-Authenticate: Bearer` and the error
 * body. CORS preflights (`OPTIONS`) carry no credentials and pass (the CORS layer answers them).
 */
export function registerAuth(app: FastifyInstance, options: AuthOptions): void {
  if (options.apiKeys.length === 0) return;
  const digests = options.apiKeys.map(sha256);
  app.addHook("onRequest", async (request, reply) => {
    if (request.method === "OPTIONS") return;
    // Both the raw path and the matched route pattern are checked, so no spelling of a protected
    // route's path (dot segments, encodings) can reach it without a key.
    const route = request.routeOptions.url;
    const needsKey =
      requiresApiKey(request.url, options.protectMetrics) ||
      (route !== undefined && requiresApiKey(route, options.protectMetrics));
    if (!needsKey) return;
    const token = requestApiKey(request);
    if (token !== undefined && keyMatches(token, digests)) {
      authenticated.set(request, token);
      return;
    }
    return sendError(request, reply, unauthorized(token !== undefined));
  });
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

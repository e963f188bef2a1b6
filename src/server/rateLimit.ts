import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { RateLimit } from "../config/values.ts";
import { rateLimited } from "../errors.ts";
import { requestApiKey, requiresApiKey } from "./auth.ts";
import { sendError } from "./errorBody.ts";
import { formatResetDuration, RateLimiter } from "./RateLimiter.ts";

/**
 * Per-key request rate limit (`--rate-limit N/min`) on the API routes (those `auth.ts` protects: `/v1/*`
 * but the health probes, `/tokenize`, `/detokenize`). The identity is the API key when keys are
 * configured (checked before this hook runs), else the client address. Every such response carries
 * OpenAI's `x-ratelimit-limit-requests`, `x-ratelimit-remaining-requests` and
 * `x-ratelimit-reset-requests`; a request over the limit is a 429 with `Retry-After`.
 */
export function registerRateLimit(
  app: FastifyInstance,
  options: { rateLimit: RateLimit | undefined; keyed: boolean },
): void {
  const { rateLimit } = options;
  if (rateLimit === undefined) return;
  const limiter = new RateLimiter(rateLimit.requests, rateLimit.windowSeconds);
  const window = describeWindow(rateLimit.windowSeconds);
  app.addHook("onRequest", async (request, reply) => {
    if (request.method === "OPTIONS" || !requiresApiKey(request.url, false)) return;
    const decision = limiter.take(identityOf(request, options.keyed));
    reply.header("x-ratelimit-limit-requests", String(decision.limit));
    reply.header("x-ratelimit-remaining-requests", String(decision.remaining));
    reply.header("x-ratelimit-reset-requests", formatResetDuration(decision.resetSeconds));
    if (!decision.allowed) {
      return sendError(request, reply, rateLimited(decision.limit, window, decision.retryAfterSeconds));
    }
  });
}

/** The rate-limited identity: a digest of the API key (never the key itself), else the client address. */
function identityOf(request: FastifyRequest, keyed: boolean): string {
  const token = keyed ? requestApiKey(request) : undefined;
  if (token !== undefined) return `key:${createHash("sha256").update(token).digest("base64url")}`;
  return `ip:${request.ip}`;
}

function describeWindow(seconds: number): string {
  if (seconds === 1) return "second";
  if (seconds === 60) return "minute";
  if (seconds === 3600) return "hour";
  return `${seconds} seconds`;
}

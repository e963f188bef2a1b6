import cors from "@fastify/cors";
import type { FastifyInstance } from "fastify";

/** Response headers a browser script may read: request ids, rate-limit state, `Retry-After`. */
const EXPOSED_HEADERS = [
  "x-request-id",
  "inference-id",
  "retry-after",
  "x-ratelimit-limit-requests",
  "x-ratelimit-remaining-requests",
  "x-ratelimit-reset-requests",
];

/**
 * Cross-origin access for browser clients (`--allowed-origins`), with preflight answers, through
 * `@fastify/cors`. No origins (the default): no CORS headers at all, so browsers on other origins
 * cannot call the API. `*` allows any origin. Allowed request headers are those the preflight asks for
 * (`Authorization`, `Content-Type`, the OpenAI SDK's `X-Stainless-*`), as `@fastify/cors` reflects them.
 * Must be registered before the authentication hook, so that a 401 carries the CORS headers too.
 */
export async function registerCors(app: FastifyInstance, allowedOrigins: readonly string[]): Promise<void> {
  if (allowedOrigins.length === 0) return;
  await app.register(cors, {
    origin: allowedOrigins.includes("*") ? "*" : [...allowedOrigins],
    methods: ["GET", "HEAD", "POST", "OPTIONS"],
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600,
    strictPreflight: false,
  });
}

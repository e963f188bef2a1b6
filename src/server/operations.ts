import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import type { OperationsConfig } from "../config/operations.ts";
import { shuttingDown } from "../errors.ts";
import { registerAuth } from "./auth.ts";
import { registerCors } from "./cors.ts";
import { sendError } from "./errorBody.ts";
import { InFlightRequests } from "./InFlightRequests.ts";
import { collectRoutes } from "./openapi.ts";
import { registerRateLimit } from "./rateLimit.ts";
import { registerRequestCaps } from "./requestCaps.ts";
import { registerRequestLog } from "./requestLog.ts";

/** The operational settings the HTTP layer applies (from `ServeConfig`; see `config/operations.ts`). */
export type OperationsOptions = Omit<OperationsConfig, "maxBodySize" | "shutdownTimeout">;

/** Settings of an app built without any (in-process tests): no keys, no limits, no CORS. */
export const DEFAULT_OPERATIONS: OperationsOptions = {
  apiKeys: [],
  protectMetrics: false,
  allowedOrigins: [],
  logRequests: false,
  receiveTimeout: 60,
  timeoutKeepAlive: 5,
};

/** Answered as usual while the server drains for shutdown: the process is still alive. */
const LIVENESS_ROUTE = "/v1/health/live";

/**
 * Adds the production-operations layer to the app, before its routes are registered:
 * - Node's HTTP timeouts (`--receive-timeout` for headers and body, `--timeout-keep-alive`);
 * - the route list for the OpenAPI document, the in-flight request set for graceful shutdown;
 * - per request, in this order: the request log, a 503 while draining, CORS, the API key, the rate
 *   limit; then, on parsed bodies, the `max_tokens` / `n` caps.
 * The routes come after it, from `routes/index.ts`.
 */
export function registerOperations(app: FastifyInstance, options: OperationsOptions): void {
  const receiveTimeoutMs = Math.round(options.receiveTimeout * 1000);
  app.server.requestTimeout = receiveTimeoutMs;
  app.server.headersTimeout = receiveTimeoutMs;
  app.server.keepAliveTimeout = Math.round(options.timeoutKeepAlive * 1000);

  collectRoutes(app);
  const inFlight = new InFlightRequests();
  app.decorate("inFlight", inFlight);
  registerRequestLog(app, { logRequests: options.logRequests });
  app.addHook("onRequest", async (request, reply) => {
    // While draining, readiness (`/health`, `/v1/health/ready`) and every other route answer 503.
    if (!inFlight.draining || request.routeOptions.url === LIVENESS_ROUTE) return;
    reply.header("connection", "close");
    return sendError(request, reply, shuttingDown());
  });

  // CORS is a plugin (loaded when the app boots); authentication and the rate limit come after it so
  // that their 401 / 429 carry the CORS headers. The plugin shares the app's scope (skip-override).
  const guards: FastifyPluginAsync = async (instance) => {
    await registerCors(instance, options.allowedOrigins);
    registerAuth(instance, { apiKeys: options.apiKeys, protectMetrics: options.protectMetrics });
    registerRateLimit(instance, { rateLimit: options.rateLimit, keyed: options.apiKeys.length > 0 });
  };
  app.register(Object.assign(guards, { [Symbol.for("skip-override")]: true }));
  registerRequestCaps(app, { maxTokensCap: options.maxTokensCap, maxN: options.maxN });
}

import { randomUUID } from "node:crypto";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  LogController,
} from "fastify";
import {
  ApiError,
  type ApiErrorCode,
  malformedJson,
  methodNotAllowed,
  payloadTooLarge,
  routeNotFound,
  toApiError,
  unsupportedMediaType,
} from "../errors.ts";
import type { AppContext } from "./appContext.ts";
import { sendError } from "./errorBody.ts";
import { answerClientError, answerFrameworkError } from "./frameworkErrors.ts";
import { registerJsonBodyParser } from "./jsonBody.ts";
import { DEFAULT_OPERATIONS, type OperationsOptions, registerOperations } from "./operations.ts";
import { registerRoutes } from "./routes/index.ts";
import type { UiOptions } from "./ui.ts";

/** Options of {@link buildApp}. */
export type AppOptions = {
  logger: FastifyBaseLogger | false;
  /** Largest accepted request body, in bytes. Defaults to 8 MiB. */
  bodyLimit?: number;
  /** Serve the web UI (playground, dashboard) at `/` (`--no-ui` turns it off). Defaults to off. */
  ui?: UiOptions | false;
  /** API keys, rate limit, caps, CORS, timeouts, request logging (`operations.ts`). Defaults to none. */
  operations?: OperationsOptions;
};

/**
 * Builds the Fastify application: JSON parsing, request ids, error mapping and every route.
 * Errors of any layer become the documented error body with the right status.
 */
export function buildApp(context: AppContext, options: AppOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger === false ? undefined : options.logger,
    logger: options.logger === false ? false : undefined,
    bodyLimit: options.bodyLimit ?? 8 * 1024 * 1024,
    // One log line per request comes from requestLog.ts; the 503 while shutting down from operations.ts.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: false,
    // Errors before any hook runs (undecodable URL, unparsable HTTP) get the documented error body too.
    frameworkErrors: answerFrameworkError,
    clientErrorHandler: answerClientError,
    genReqId: (request: import("node:http").IncomingMessage) => {
      // The client's id is echoed (and logged) only when it is 1-200 visible ASCII characters.
      const given = request.headers["x-request-id"];
      return typeof given === "string" && /^[\x21-\x7e]{1,200}$/.test(given) ? given : randomUUID();
    },
  } as Parameters<typeof Fastify>[0]) as unknown as FastifyInstance;

  // JSON only: any other Content-Type on a request with a body is a 415.
  app.removeContentTypeParser("text/plain");
  registerJsonBodyParser(app);

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    reply.header("inference-id", request.id);
  });

  app.setErrorHandler((error, request, reply) => {
    // A body that does not parse (or a QUERY without Content-Type) on a path or method that does not
    // exist: the 404/405 comes first.
    if (request.is404 && isBodyError(error)) {
      return sendError(request, reply, unmatchedRoute(request.method, request.url));
    }
    return sendError(request, reply, fromFrameworkError(error, request));
  });
  // The methods of every route path (`:param` matches one path segment, `*` the rest), so that a known
  // path with another method is a 405, not a 404. The static files' catch-all `/*` does not count.
  const routeMethods = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  app.addHook("onRoute", (route) => {
    if (route.url === "/*") return;
    const entry = routeMethods.get(route.url) ?? {
      pattern: new RegExp(
        `^${route.url
          .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
          .replace(/:[^/]+/g, "[^/]+")
          .replace(/\*/g, ".+")}$`,
      ),
      methods: new Set<string>(),
    };
    for (const method of [route.method].flat()) entry.methods.add(method);
    routeMethods.set(route.url, entry);
  });
  /** 405 for a known path with another method, else 404. */
  const unmatchedRoute = (method: string, url: string): ApiError => {
    const path = url.split("?")[0] ?? url;
    const allowed = new Set<string>();
    for (const { pattern, methods } of routeMethods.values()) {
      if (pattern.test(path)) for (const routeMethod of methods) allowed.add(routeMethod);
    }
    return allowed.size > 0 && !allowed.has(method)
      ? methodNotAllowed(method, path, [...allowed].sort())
      : routeNotFound(method, url);
  };
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, unmatchedRoute(request.method, request.url)),
  );

  const operations = options.operations ?? DEFAULT_OPERATIONS;
  registerOperations(app, operations);
  registerRoutes(app, context, {
    keyed: operations.apiKeys.length > 0,
    protectMetrics: operations.protectMetrics,
    ui: options.ui ?? false,
  });

  return app;
}

/** Errors of reading the body: Fastify's (`FST_ERR_CTP_*`, QUERY's missing Content-Type) and our JSON parser's. */
function isBodyError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  if (error instanceof ApiError) return code === "malformed_json" || code === "forbidden_json_key";
  return (
    typeof code === "string" &&
    (code.startsWith("FST_ERR_CTP_") || code === "FST_ERR_ROUTE_MISSING_CONTENT_TYPE")
  );
}

/** Maps Fastify's own errors (body parsing, limits) and anything unexpected to an {@link ApiError}. */
function fromFrameworkError(error: unknown, request: FastifyRequest): ApiError {
  if (error instanceof ApiError) return error;
  const { code, statusCode, message } = error as { code?: string; statusCode?: number; message?: string };
  switch (code) {
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return unsupportedMediaType(request.headers["content-type"]);
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return malformedJson("the body is empty");
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return malformedJson(message ?? "invalid JSON");
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return payloadTooLarge(request.routeOptions.bodyLimit);
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new ApiError(400, "invalid_request_error", "invalid_content_length", "Invalid Content-Length.");
  }
  if (error instanceof SyntaxError || (statusCode === 400 && /JSON/i.test(message ?? ""))) {
    return malformedJson(message ?? "invalid JSON");
  }
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
    return new ApiError(
      statusCode,
      "invalid_request_error",
      // Fastify's own code (`FST_ERR_*`, lower-cased) for a 4xx of its own that has none of ours.
      (code?.toLowerCase() ?? "bad_request") as ApiErrorCode,
      message ?? "Bad request.",
    );
  }
  return toApiError(error);
}

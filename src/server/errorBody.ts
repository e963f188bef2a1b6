import type { FastifyReply, FastifyRequest } from "fastify";
import type { ApiError } from "../errors.ts";
import type { AnthropicErrorBody } from "../protocol/anthropicMessages.ts";
import { anthropicErrorType } from "../serving/adapters/anthropicMessages.ts";

/**
 * The JSON error body: OpenAI's `{error: {message, type, param, code}}` (so the official SDKs raise
 * typed errors) plus NIM's top-level `object: "error"`, `message`, `type`, `param` and `code` (the
 * HTTP status as an integer), plus FastAPI's `detail` list on a 422.
 */
export type ErrorBody = {
  object: "error";
  message: string;
  type: string;
  param: string | null;
  code: number;
  error: { message: string; type: string; param: string | null; code: string };
  detail?: { loc: (string | number)[]; msg: string; type: string }[];
};

/** Builds the body of an error response or of a final SSE error event. */
export function errorBody(error: ApiError): ErrorBody {
  const body: ErrorBody = {
    object: "error",
    message: error.message,
    type: error.type,
    param: error.param,
    code: error.status,
    error: { message: error.message, type: error.type, param: error.param, code: error.code },
  };
  if (error.detail) body.detail = error.detail;
  return body;
}

/** The response headers an error adds (`Retry-After` and its own). */
export function errorHeaders(error: ApiError): Record<string, string> {
  const headers: Record<string, string> = { ...error.headers };
  if (error.retryAfterSeconds !== undefined)
    headers["retry-after"] = String(Math.ceil(error.retryAfterSeconds));
  return headers;
}

/**
 * The error body of the Anthropic routes (`/v1/messages*`): `{type: "error", error: {type, message}}`
 * with Anthropic's error types (`invalid_request_error`, `authentication_error`, `not_found_error`,
 * `rate_limit_error`, `overloaded_error`, `api_error`), so the Anthropic SDKs raise their typed errors.
 */
export function anthropicErrorBody(error: ApiError): AnthropicErrorBody {
  return { type: "error", error: { type: anthropicErrorType(error.status), message: error.message } };
}

/**
 * Sends an error as the JSON error body (headers already sent: the connection is just closed); on the
 * Anthropic routes (`/v1/messages*`) in Anthropic's shape, where a schema violation (our 422, FastAPI's
 * status as vLLM returns it) is a 400 `invalid_request_error`, as Anthropic's API answers a missing
 * `max_tokens`.
 */
export function sendError(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  // A changed model file is logged once, by its watch (startServer.ts), not on every refused request.
  if (error.status >= 500 && error.code !== "model_file_changed")
    request.log.error({ err: error.cause ?? error }, "request failed");
  const anthropic = isAnthropicPath(request.url);
  const body = anthropic ? anthropicErrorBody(error) : errorBody(error);
  const status = anthropic && error.status === 422 ? 400 : error.status;
  return reply.code(status).headers(errorHeaders(error)).send(body);
}

/** Paths answered in Anthropic's shape, errors included (see {@link sendError}). */
export function isAnthropicPath(url: string): boolean {
  const path = url.split("?", 1)[0] ?? url;
  return path === "/v1/messages" || path.startsWith("/v1/messages/");
}

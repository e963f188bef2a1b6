import type { ApiError } from "../errors.ts";

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

/**
 * The one error taxonomy of lmserve. Every failure a client can see is an {@link ApiError}: it carries
 * the HTTP status, the OpenAI error `type`, a stable `code` and a message that says what to change.
 * `server/errorBody.ts` turns it into the JSON body (OpenAI's `{error: {...}}` plus NIM's top-level
 * fields) or into a final SSE event.
 */
import {
  AdapterUnloadedError,
  CapacityExceededError,
  EngineClosedError,
  EngineError,
  GRAMMAR_MASK_TIME_LIMIT_MS,
  GrammarUnenforceableError,
  QueueFullError,
  RequestTimeoutError,
} from "./engine/errors.ts";
import { CompilerFailureError, ConstraintError } from "./structured/errors.ts";

/**
 * Every `type` an {@link ApiError} carries: OpenAI's names (its SDKs raise typed errors from the
 * status; the type is shown to the user). docs/errors.md lists them.
 */
export const API_ERROR_TYPES = [
  "invalid_request_error",
  "not_found_error",
  "rate_limit_error",
  "server_error",
  "service_unavailable",
] as const;

/** The OpenAI error `type` of an {@link ApiError}. */
export type ApiErrorType = (typeof API_ERROR_TYPES)[number];

/**
 * Every stable `code` an {@link ApiError} carries, one per reason a client can act on; docs/errors.md
 * lists each with its status (`test/unit/server/errorCodes.test.ts` checks the two agree).
 */
export const API_ERROR_CODES = [
  "invalid_value",
  "unsupported_field",
  "context_length_exceeded",
  "cap_exceeded",
  "chat_template_error",
  "chat_template_limit",
  "invalid_chat_template",
  "invalid_url",
  "malformed_json",
  "forbidden_json_key",
  "malformed_request",
  "invalid_content_length",
  "bad_request",
  "validation_error",
  "invalid_api_key",
  "model_not_found",
  "route_not_found",
  "method_not_allowed",
  "request_timeout",
  "body_too_large",
  "unsupported_media_type",
  "headers_too_large",
  "rate_limit_exceeded",
  "internal_error",
  "overloaded",
  "model_file_changed",
  "shutting_down",
  "model_not_loaded",
  "model_unloading",
  "model_unloaded",
  "model_load_failed",
  "model_capacity",
  "lora_not_found",
  "lora_load_failed",
] as const;

/**
 * The stable `code` of an {@link ApiError}; `fst_err_*` passes on the code of a 4xx that Fastify
 * itself raised (lower-cased), for the few it raises that have no code of ours.
 */
export type ApiErrorCode = (typeof API_ERROR_CODES)[number] | `fst_err_${string}`;

/** One entry of FastAPI's 422 `detail` list, as vLLM/NIM return it. */
export type ValidationIssue = { loc: (string | number)[]; msg: string; type: string };

/** Options shared by every {@link ApiError} constructor call. */
export type ApiErrorOptions = {
  /** The request field the error is about (OpenAI's `param`), e.g. `"max_tokens"` or `"messages[2].content"`. */
  param?: string | null;
  /** Seconds a client should wait before retrying (sent as `Retry-After`); for 429 and 503. */
  retryAfterSeconds?: number;
  /** FastAPI-style validation details; only for 422. */
  detail?: ValidationIssue[];
  /** Extra response headers. */
  headers?: Record<string, string>;
  cause?: unknown;
};

/**
 * An error with everything needed to answer the client.
 * `type` follows OpenAI's names (`invalid_request_error`, `authentication_error`, `not_found_error`,
 * `rate_limit_error`, `server_error`, `service_unavailable`); `code` is a stable snake_case identifier.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ApiErrorType;
  readonly code: ApiErrorCode;
  readonly param: string | null;
  readonly retryAfterSeconds: number | undefined;
  readonly detail: ValidationIssue[] | undefined;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    type: ApiErrorType,
    code: ApiErrorCode,
    message: string,
    options: ApiErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ApiError";
    this.status = status;
    this.type = type;
    this.code = code;
    this.param = options.param ?? null;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.detail = options.detail;
    this.headers = options.headers ?? {};
  }
}

/** 400: a value is out of range, fields conflict, or the request cannot be served as asked. */
export function badRequest(
  message: string,
  param: string | null = null,
  code: ApiErrorCode = "invalid_value",
): ApiError {
  return new ApiError(400, "invalid_request_error", code, message, { param });
}

/** 400: the body is not valid JSON. */
export function malformedJson(message: string): ApiError {
  return new ApiError(
    400,
    "invalid_request_error",
    "malformed_json",
    `The request body is not valid JSON: ${message}`,
  );
}

/** 422: the body violates the request schema (wrong type, missing required field). */
export function validationFailed(detail: ValidationIssue[]): ApiError {
  const first = detail[0];
  const where = first ? formatFieldPath(first.loc) : "";
  const message = first
    ? `${where ? `${where}: ` : ""}${first.msg}`
    : "The request does not match the schema.";
  return new ApiError(422, "invalid_request_error", "validation_error", message, {
    param: where || null,
    detail,
  });
}

/** 404: no served model has this name. */
export function modelNotFound(model: string, available: readonly string[]): ApiError {
  return new ApiError(
    404,
    "not_found_error",
    "model_not_found",
    `The model \`${model}\` does not exist. Available models: ${available.join(", ")}.`,
    { param: "model" },
  );
}

/**
 * 404: no LoRA adapter is served under this name (vLLM's `NotFoundError` of `/v1/unload_lora_adapter`),
 * or it was unloaded before the request was queued; `param` names the field that gave it.
 */
export function loraNotFound(
  name: string,
  param = "lora_name",
  message = `The lora adapter '${name}' cannot be found.`,
): ApiError {
  return new ApiError(404, "not_found_error", "lora_not_found", message, { param });
}

/** 400: the LoRA adapter file does not load (llama.cpp's reason follows: not an adapter, another base model). */
export function loraLoadFailed(name: string, reason: string): ApiError {
  return new ApiError(
    400,
    "invalid_request_error",
    "lora_load_failed",
    `The lora adapter '${name}' could not be loaded: ${reason}`,
    { param: "lora_path" },
  );
}

/** 404: no route at this path and method. */
export function routeNotFound(method: string, url: string): ApiError {
  return new ApiError(404, "not_found_error", "route_not_found", `No route for ${method} ${url}.`);
}

/**
 * 405: the path exists but not for this method (as FastAPI, vLLM's server, answers), with an `Allow`
 * header listing the methods it takes.
 */
export function methodNotAllowed(method: string, path: string, allowed: readonly string[]): ApiError {
  return new ApiError(
    405,
    "invalid_request_error",
    "method_not_allowed",
    `${method} is not allowed on ${path}; use ${allowed.join(" or ")}.`,
    { headers: { allow: allowed.join(", ") } },
  );
}

/** 415: the request's Content-Type is not JSON. */
export function unsupportedMediaType(contentType: string | undefined): ApiError {
  return new ApiError(
    415,
    "invalid_request_error",
    "unsupported_media_type",
    `Unsupported Content-Type ${contentType ? `'${contentType}'` : "(none)"}: send 'application/json'.`,
  );
}

/** 503: the server cannot take the request now (queue full, model loading, shutting down). */
export function overloaded(message: string, retryAfterSeconds = 1): ApiError {
  return new ApiError(503, "service_unavailable", "overloaded", message, { retryAfterSeconds });
}

/**
 * 401: no API key, or not one of the server's (`--api-key`). Type and code as OpenAI's
 * (`invalid_request_error` / `invalid_api_key`); `WWW-Authenticate: Bearer` as RFC 6750 section 3 asks,
 * with `error="invalid_token"` when a key was given but is wrong.
 */
export function unauthorized(keyGiven: boolean): ApiError {
  return new ApiError(
    401,
    "invalid_request_error",
    "invalid_api_key",
    keyGiven
      ? "Incorrect API key provided. Send one of the server's keys as 'Authorization: Bearer KEY'."
      : "You didn't provide an API key. Send it as 'Authorization: Bearer KEY'.",
    {
      headers: {
        "www-authenticate": keyGiven
          ? 'Bearer realm="lmserve", error="invalid_token"'
          : 'Bearer realm="lmserve"',
      },
    },
  );
}

/** 429: the key (or client) exceeded `--rate-limit`; `Retry-After` says when a request is allowed again. */
export function rateLimited(limit: number, window: string, retryAfterSeconds: number): ApiError {
  return new ApiError(
    429,
    "rate_limit_error",
    "rate_limit_exceeded",
    `Rate limit reached: ${limit} requests per ${window}. Retry after ${Math.ceil(retryAfterSeconds)} s.`,
    { retryAfterSeconds },
  );
}

/** 413: the body is larger than `--max-body-size`. */
export function payloadTooLarge(limitBytes: number): ApiError {
  return new ApiError(
    413,
    "invalid_request_error",
    "body_too_large",
    `The request body is larger than the server's limit of ${limitBytes} bytes (--max-body-size).`,
  );
}

/**
 * 503: the model's file changed on disk while served (truncated or rewritten in place), so the server
 * stops serving it rather than crash on the memory-mapped file (`models/modelFileWatch.ts`).
 */
export function modelFileChanged(model: string, reason: string): ApiError {
  return new ApiError(
    503,
    "service_unavailable",
    "model_file_changed",
    `The model '${model}' is no longer served: its file changed on disk while loaded (${reason}). Restart the server; replace model files by rename, never rewrite them in place.`,
  );
}

/** 503: the server is shutting down (SIGTERM/SIGINT); also the reason in-flight work is ended with. */
export function shuttingDown(): ApiError {
  return new ApiError(
    503,
    "service_unavailable",
    "shutting_down",
    "The server is shutting down. Retry on another replica.",
    { retryAfterSeconds: 1 },
  );
}

/**
 * 503: the model is servable but not loaded, and `--models-autoload` is off (llama-server's router:
 * "model is not loaded"); `POST /models/load` loads it.
 */
export function modelNotLoaded(model: string): ApiError {
  return new ApiError(
    503,
    "service_unavailable",
    "model_not_loaded",
    `The model '${model}' is not loaded and this server does not load models on demand (--no-models-autoload): load it with POST /models/load {"model": "${model}"}.`,
    { param: "model", retryAfterSeconds: 1 },
  );
}

/** 503: the model is being unloaded (`POST /models/unload`, eviction, `keep_alive`); retry once it is gone. */
export function modelUnloading(model: string): ApiError {
  return new ApiError(
    503,
    "service_unavailable",
    "model_unloading",
    `The model '${model}' is being unloaded: it takes no new requests until it is unloaded; retry then (it loads again on demand when autoload is on).`,
    { param: "model", retryAfterSeconds: 1 },
  );
}

/**
 * 503: the reason a request still running on a model is ended when the model's unload waited past
 * `--shutdown-timeout` (a stream ends with it as its final error event).
 */
export function modelUnloaded(model: string, timeoutSeconds: number): ApiError {
  return new ApiError(
    503,
    "service_unavailable",
    "model_unloaded",
    `The model '${model}' was unloaded: this request was still running ${timeoutSeconds} s after the unload began (--shutdown-timeout) and was ended.`,
    { retryAfterSeconds: 1 },
  );
}

/** 503: the model failed to load (its reason, one line); the next load retries. */
export function modelLoadFailed(model: string, reason: string): ApiError {
  return new ApiError(
    503,
    "service_unavailable",
    "model_load_failed",
    `The model '${model}' failed to load: ${reason}`,
    { param: "model" },
  );
}

/**
 * 503: loading the model would pass `--models-max` or `--memory-budget` even after unloading every
 * idle model; the message gives the numbers (bytes).
 */
export function modelCapacity(message: string): ApiError {
  return new ApiError(503, "service_unavailable", "model_capacity", message, {
    param: "model",
    retryAfterSeconds: 1,
  });
}

/** 500: an unexpected failure; the message never carries a stack trace. */
export function internalError(message = "The server failed to process the request."): ApiError {
  return new ApiError(500, "server_error", "internal_error", message);
}

/**
 * Turns any thrown value into an {@link ApiError}: the one place where the engine's own errors
 * (`engine/errors.ts`) and the guided-decoding compiler's (`structured/errors.ts`) get their status, type
 * and code. Unknown errors become a 500 that hides
 * internals (the original is kept as its `cause`, for the log).
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof QueueFullError) {
    return overloaded(
      `The server is at capacity: ${error.waiting} requests are already waiting. Retry later.`,
    );
  }
  if (error instanceof CapacityExceededError) {
    return badRequest(
      `This request needs ${error.requested} generations (prompts x n or best_of), more than this server can hold at once (${error.slots} slots + ${error.maxWaiting} waiting). Lower n or best_of, or send fewer prompts.`,
      "n",
    );
  }
  if (error instanceof EngineClosedError) return overloaded("The server is shutting down.");
  if (error instanceof AdapterUnloadedError) return loraNotFound(error.adapter, "model");
  if (error instanceof ConstraintError) return badRequest(error.message, error.param);
  if (error instanceof CompilerFailureError) return internalError(error.message);
  if (error instanceof GrammarUnenforceableError) {
    return badRequest(
      `The guided-decoding grammar is too costly to enforce: after ${error.generated} tokens its next token mask took over ${GRAMMAR_MASK_TIME_LIMIT_MS} ms (or allowed no token that may be drawn), so the generation was ended rather than continued unconstrained. Simplify the grammar (fewer optional items in a row, common prefixes merged); see docs/structured-output.md.`,
      null,
      "cap_exceeded",
    );
  }
  if (error instanceof RequestTimeoutError) {
    return new ApiError(
      504,
      "server_error",
      "request_timeout",
      `The request did not finish within the server's request timeout of ${error.seconds} s.`,
    );
  }
  const internal = internalError();
  return new ApiError(internal.status, internal.type, internal.code, internal.message, { cause: error });
}

/**
 * The error a generation's abort reason stands for when the server ended it (request timeout,
 * shutdown deadline: an {@link ApiError} or an engine error), or undefined when the client went away.
 */
export function serverAbortError(reason: unknown): ApiError | undefined {
  return reason instanceof ApiError || reason instanceof EngineError ? toApiError(reason) : undefined;
}

/**
 * Renders a field path `messages[2].content` style, as OpenAI's `param`; a FastAPI `loc`'s leading
 * "body" is dropped.
 */
export function formatFieldPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (part === "body" && out === "") continue;
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

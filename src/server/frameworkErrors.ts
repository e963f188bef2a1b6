/**
 * The two failures that happen before Fastify runs any hook, answered with the documented error body
 * like every other error: a URL that does not decode (Fastify's `frameworkErrors` option), and a
 * request Node's HTTP parser refuses (its `clientErrorHandler` option: a malformed request line,
 * headers over 16 KiB, a request not received within `--receive-timeout`).
 */
import { randomUUID } from "node:crypto";
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, badRequest } from "../errors.ts";
import { errorBody, errorHeaders } from "./errorBody.ts";

/** Answers a routing-time error (`FST_ERR_BAD_URL` and the like) with the error body and request ids. */
export function answerFrameworkError(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const apiError =
    error.code === "FST_ERR_BAD_URL"
      ? badRequest("The URL is not valid: a percent-encoded part does not decode.", null, "invalid_url")
      : badRequest(error.message || "Bad request.", null, "bad_request");
  void reply
    .code(apiError.status)
    .header("x-request-id", request.id)
    .header("inference-id", request.id)
    .headers(errorHeaders(apiError))
    .send(errorBody(apiError));
}

/**
 * Answers a request the HTTP parser refused, on the raw socket (no request object exists), then closes
 * the connection. Nothing is written if a response has already started on it, and nothing at all for
 * a connection the client has reset (as Fastify's own handler).
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === "ECONNRESET" || error.code === "EPIPE") return;
  if (socket.writable && socket.bytesWritten === 0) {
    const apiError =
      error.code === "HPE_HEADER_OVERFLOW"
        ? new ApiError(
            431,
            "invalid_request_error",
            "headers_too_large",
            "The request headers are larger than 16 KiB.",
          )
        : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? new ApiError(
              408,
              "invalid_request_error",
              "request_timeout",
              "The request was not received in time (--receive-timeout).",
            )
          : new ApiError(
              400,
              "invalid_request_error",
              "malformed_request",
              "The request is not valid HTTP/1.1.",
            );
    const body = JSON.stringify(errorBody(apiError));
    const id = randomUUID();
    socket.write(
      `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status]}\r\n` +
        "Content-Type: application/json; charset=utf-8\r\n" +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${id}\r\nInference-Id: ${id}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

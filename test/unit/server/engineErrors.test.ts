import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CapacityExceededError,
  EngineClosedError,
  QueueFullError,
  RequestTimeoutError,
} from "../../../src/engine/errors.ts";
import { ApiError, serverAbortError, shuttingDown, toApiError } from "../../../src/errors.ts";

describe("toApiError: the engine's errors as API errors", () => {
  it("maps a full queue and a closed engine to 503 with Retry-After", () => {
    for (const error of [new QueueFullError(4), new EngineClosedError()]) {
      const api = toApiError(error);
      assert.equal(api.status, 503);
      assert.equal(api.type, "service_unavailable");
      assert.equal(api.code, "overloaded");
      assert.equal(api.retryAfterSeconds, 1);
    }
    assert.match(toApiError(new QueueFullError(4)).message, /4 requests are already waiting/);
  });

  it("maps more generations than the scheduler can hold to a 400 naming n", () => {
    const api = toApiError(new CapacityExceededError(40, 4, 32));
    assert.equal(api.status, 400);
    assert.equal(api.param, "n");
    assert.match(api.message, /needs 40 generations .* \(4 slots \+ 32 waiting\)/);
  });

  it("maps the request timeout to a 504 request_timeout", () => {
    const api = toApiError(new RequestTimeoutError(2));
    assert.equal(api.status, 504);
    assert.equal(api.code, "request_timeout");
    assert.match(api.message, /timeout of 2 s/);
  });

  it("keeps an ApiError, and hides anything else behind a 500 whose cause is the original", () => {
    const own = shuttingDown();
    assert.equal(toApiError(own), own);
    const failure = new Error("native step failed");
    const api = toApiError(failure);
    assert.equal(api.status, 500);
    assert.equal(api.code, "internal_error");
    assert.ok(!api.message.includes("native"));
    assert.equal(api.cause, failure);
  });

  it("tells the server's abort reasons from a client that went away", () => {
    assert.equal(serverAbortError(new Error("client disconnected")), undefined);
    assert.equal(serverAbortError(undefined), undefined);
    assert.equal(serverAbortError(new RequestTimeoutError(1))?.status, 504);
    assert.ok(serverAbortError(shuttingDown()) instanceof ApiError);
  });
});

import assert from "node:assert/strict";
import { ApiError } from "../../src/errors.ts";
import type { ErrorBody } from "../../src/server/errorBody.ts";

/**
 * The ApiError `run` throws.
 * @throws AssertionError when `run` returns, or throws anything other than an ApiError.
 */
export function thrownApiError(run: () => unknown): ApiError {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof ApiError, String(error));
    return error;
  }
  assert.fail("did not throw");
}

/**
 * Asserts an HTTP response is an error body of the documented shape: `status`, `object: "error"`,
 * `error.param`, the message's words, and `error.type` when `type` is given.
 * @throws AssertionError on any difference (the status assertion shows the body).
 */
export function assertErrorResponse(
  response: { statusCode: number; json(): unknown },
  status: number,
  param: string | null,
  message: RegExp,
  type?: string,
): void {
  assert.equal(response.statusCode, status, JSON.stringify(response.json()));
  const body = response.json() as ErrorBody;
  assert.equal(body.object, "error");
  if (type !== undefined) assert.equal(body.error.type, type);
  assert.equal(body.error.param, param);
  assert.match(body.message, message);
}

import assert from "node:assert/strict";
import { ApiError } from "../../src/errors.ts";

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

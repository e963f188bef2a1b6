/**
 * The errors the guided-decoding compiler raises. They say what is wrong with a constraint in the
 * compiler's terms (the field it came from, the keyword and JSON pointer, the regex construct, llama.cpp's
 * message); `toApiError` in `src/errors.ts` is the one place that maps them to the API's status, type and
 * code, as it maps the engine's (`engine/errors.ts`). This file imports nothing, so that both the worker
 * thread and `src/errors.ts` can use it.
 */

/**
 * A constraint that cannot be compiled or enforced as sent: the client's to fix (mapped to a 400
 * `invalid_request_error`). `param` names the request field (`guided_json`, `response_format`,
 * `tools[0].function.parameters`, …), null when none applies.
 */
export class ConstraintError extends Error {
  /** The request field the constraint came from; null when none applies. */
  readonly param: string | null;

  /** @param param Defaults to null. */
  constructor(message: string, param: string | null = null) {
    super(message);
    this.name = new.target.name;
    this.param = param;
  }
}

/** The compiler itself failed (its worker closed, stopped or crashed): not the client's fault (mapped to a 500). */
export class CompilerFailureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

import { setMaxListeners } from "node:events";
import type {
  GenerationDelta,
  GenerationObserver,
  GenerationRequest,
  GenerationResult,
} from "../engine/types.ts";
import { serverAbortError, toApiError } from "../errors.ts";
import type { EngineModel } from "./engine.ts";
import { reportGenerationStart } from "./generationStart.ts";

/** Receives the output of the choices of one API request; `choice` is the choice's `index`. */
export type ChoicesObserver = (choice: number, delta: GenerationDelta) => void;

/**
 * Submits one generation per choice and resolves with their results in choice order. Aborting
 * `signal` (client gone) aborts every choice; if one choice fails the others are aborted and the
 * failure is thrown (as an ApiError). A choice the server aborted (request timeout, shutdown deadline)
 * rejects with the error its abort reason stands for. The first output of any choice is reported as
 * the request's start (`generationStart.ts`).
 * @throws ApiError 503 synchronously when the scheduler's queue cannot take them all (400 when it never could).
 */
export function runChoices(
  scheduler: EngineModel,
  requests: readonly GenerationRequest[],
  observer: ChoicesObserver,
  signal: AbortSignal,
): Promise<GenerationResult[]> {
  try {
    scheduler.assertCapacity(requests.length);
  } catch (error) {
    throw toApiError(error);
  }
  const controller = new AbortController();
  // Every choice's generation listens on this signal: n can reach 16 (plus the scheduler's timers).
  setMaxListeners(4 * requests.length + 10, controller.signal);
  const forward = () => controller.abort(signal.reason);
  if (signal.aborted) forward();
  else signal.addEventListener("abort", forward, { once: true });
  const runs = requests.map((request, choice) =>
    scheduler
      .submit(
        request,
        startReporting(signal, (delta) => observer(choice, delta)),
        controller.signal,
      )
      .catch((error: unknown) => {
        controller.abort(error);
        throw error;
      }),
  );
  return Promise.all(runs)
    .then((results) => {
      // A generation the server aborted (request timeout, shutdown) fails the request with that error.
      for (const result of results) {
        const serverError = serverAbortError(result.abortReason);
        if (serverError) throw serverError;
      }
      return results;
    })
    .finally(() => signal.removeEventListener("abort", forward));
}

/**
 * A generation observer that reports the request's start (`generationStart.ts`) when the engine gives
 * the job a slot (`onStart`), or at the latest on its first output.
 */
function startReporting(signal: AbortSignal, onDelta: GenerationObserver["onDelta"]): GenerationObserver {
  return {
    onStart: () => reportGenerationStart(signal),
    onDelta: (delta) => {
      reportGenerationStart(signal);
      onDelta(delta);
    },
  };
}

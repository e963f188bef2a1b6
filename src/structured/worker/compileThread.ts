/**
 * The worker thread of `ConstraintCompiler` (`compileService.ts`): says `{ ready: true }`, then compiles
 * each constraint it is sent with `compileConstraint` (and its cache), one at a time. A format's automaton
 * (used where a schema intersects or negates a `format`) is built on the first constraint that needs it:
 * 0–55 ms a format on the 2-core VM (`regex` the largest, `email` 21 ms), where building all of them ahead
 * of use took ~0.5 s of CPU and left ~28 MiB resident in the worker (its young generation grown by the
 * build's garbage) in every server, guided requests or not.
 *
 * Messages in: {@link CompileJob}. Messages out: {@link CompileReply}, with the same `id`.
 */
import { parentPort } from "node:worker_threads";
import { type CompileOptions, type ConstraintKind, compileConstraint } from "../compile.ts";
import { ConstraintError } from "../errors.ts";

/** One constraint to compile. */
export type CompileJob = { id: number; kind: ConstraintKind; spec: unknown; options: CompileOptions };

/** A {@link ConstraintError} as plain data (errors lose their class crossing threads). */
export type ConstraintErrorData = Pick<ConstraintError, "message" | "param">;

/** The answer to a {@link CompileJob}: the GBNF text, the constraint error the compiler threw, or an unexpected failure. */
export type CompileReply =
  | { id: number; ok: true; gbnf: string }
  | { id: number; ok: false; error: ConstraintErrorData }
  | { id: number; ok: false; failure: string };

const port = parentPort;
if (port === null) throw new Error("compileThread.ts runs only as a worker thread (see compileService.ts).");
port.postMessage({ ready: true });

port.on("message", (job: CompileJob) => {
  let reply: CompileReply;
  try {
    reply = { id: job.id, ok: true, gbnf: compileConstraint(job.kind, job.spec, job.options).gbnf };
  } catch (error) {
    if (error instanceof ConstraintError) {
      const { message, param } = error;
      reply = { id: job.id, ok: false, error: { message, param } };
    } else reply = { id: job.id, ok: false, failure: error instanceof Error ? error.message : String(error) };
  }
  port.postMessage(reply);
});

// The worker thread of `TemplateSandbox.ts`: renders Jinja chat templates with `@huggingface/jinja`, off
// the main thread, under the limits the sandbox passes in `workerData`. Plain JavaScript so that the
// worker starts without the TypeScript loader (tsx's hooks are not inherited by worker threads).
//
// Messages in: `{ id, template, variables }`. Messages out: `{ id, ok: true, text }` or
// `{ id, ok: false, stage: "parse" | "render" | "limit", message }`. The deadline and the memory
// limit are enforced from outside (the sandbox terminates this worker); here only the limits a template
// can be refused for cheaply: `range()` size (as jinja2's sandbox, `MAX_RANGE`) and output length.
import { parentPort, workerData } from "node:worker_threads";
import { Environment, Template } from "@huggingface/jinja";
import { installJinjaExtensions } from "./jinjaExtensions.mjs";

installJinjaExtensions();

/** @type {{ maxRange: number, maxOutputChars: number }} */
const limits = workerData;

/** Thrown by the bounded `range()`; told apart from a template's own errors. */
class LimitError extends Error {}

// `@huggingface/jinja` builds `range()`'s whole list up front (a billion items crash V8 with "Invalid
// array length"); every render's globals are set through `Environment#set`, so the bounded version is
// swapped in there.
const plainSet = Environment.prototype.set;
Environment.prototype.set = function set(name, value) {
  return plainSet.call(this, name, name === "range" ? boundedRange : value);
};

/**
 * Python's `range(stop)` / `range(start, stop[, step])`, refused beyond `limits.maxRange` items as
 * jinja2's `ImmutableSandboxedEnvironment` (which vLLM renders with) refuses ranges over 100,000.
 */
function boundedRange(start, stop, step = 1) {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  if (![start, stop, step].every(Number.isInteger)) throw new Error("range() takes integers");
  if (step === 0) throw new Error("range() step must not be zero");
  const count = Math.max(0, Math.ceil((stop - start) / step));
  if (count > limits.maxRange)
    throw new LimitError(
      `range() of ${count} items is larger than the sandbox allows (${limits.maxRange}), as jinja2's sandbox.`,
    );
  return Array.from({ length: count }, (_, index) => start + index * step);
}

const MAX_CACHED = 32;
/** @type {Map<string, Template>} */
const parsed = new Map();

function templateFor(text) {
  const cached = parsed.get(text);
  if (cached) return cached;
  const template = new Template(text);
  if (parsed.size >= MAX_CACHED) parsed.delete(parsed.keys().next().value);
  parsed.set(text, template);
  return template;
}

function messageOf(error) {
  return error instanceof Error ? error.message : String(error);
}

parentPort?.on("message", ({ id, template, variables }) => {
  let compiled;
  try {
    compiled = templateFor(template);
  } catch (error) {
    parentPort?.postMessage({ id, ok: false, stage: "parse", message: messageOf(error) });
    return;
  }
  try {
    const text = compiled.render(variables);
    if (text.length > limits.maxOutputChars) {
      parentPort?.postMessage({
        id,
        ok: false,
        stage: "limit",
        message: `the rendered prompt has ${text.length} characters, more than the sandbox allows (${limits.maxOutputChars}).`,
      });
      return;
    }
    parentPort?.postMessage({ id, ok: true, text });
  } catch (error) {
    // A RangeError here is V8's own string or array limit ("Invalid string length"): a limit, not a bug.
    const stage = error instanceof LimitError || error instanceof RangeError ? "limit" : "render";
    parentPort?.postMessage({ id, ok: false, stage, message: messageOf(error) });
  }
});

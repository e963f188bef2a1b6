/**
 * One full garbage collection of the main thread's heap, run after a model load: reading a GGUF's metadata
 * makes tens of MiB of short-lived objects (a 152k-token vocabulary's `tokenizer.ggml.tokens` and `merges`
 * arrays, ~300k strings), which otherwise stay resident until V8's memory reducer runs after some seconds
 * of idle, or never while requests keep the server busy. Measured on the synthetic Qwen2.5-0.5B (2-core VM,
 * after `bench/peer.ts`'s warm-up requests): 21–30 MiB less RSS; the collection blocks the event loop a
 * few tens of ms (38 ms for 300k strings beside 200k live objects).
 *
 * Node exposes no collection call without `--expose-gc`; the flag is set for the moment it takes to get
 * V8's `gc` function in a fresh `vm` context (the main context's global never sees it), then cleared, so
 * worker threads started later do not get it either.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Collects the main thread's garbage now (synchronously). Never throws: without V8's `gc` it does nothing. */
export function collectGarbage(): void {
  let gc: unknown;
  try {
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("typeof gc === 'function' ? gc : undefined");
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
  if (typeof gc === "function") gc();
}

#!/usr/bin/env node
// Runs every `*.test.ts` file under the given folders (default: test/) with Node's test runner and tsx.
// Usage: node scripts/run-tests.mjs [--model-free] [DIR|FILE ...]
// --model-free leaves out the files that read a model (stories260K, a llama.cpp vocabulary GGUF, a
// generated one), themselves or through the test helpers they import: `npm run test:fast` is
// `--model-free test/unit test/http`, the tier a contributor runs without ../shared/models.
// The servers the tests start (`node bin/lmserve.js`) run the TypeScript sources through tsx, unless
// LMSERVE_FROM_SOURCE=0 is set: then they run the compiled build (dist/, `npm run build:server`), as
// `npm test` does after building (see bin/lmserve.js).
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/** Lists the test files below `path`, sorted, as relative paths. */
function collect(path) {
  if (statSync(path).isFile()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((name) => {
      const child = join(path, name);
      if (statSync(child).isDirectory()) return name === "fixtures" ? [] : collect(child);
      return name.endsWith(".test.ts") ? [child] : [];
    });
}

/** What a test or helper that reads a model names: the shared models, a vocabulary GGUF, the model writers. */
const MODEL_MARKERS =
  /\b(?:sharedModelsDir|defaultModelPath|startTestServer|useTestServer|writeSyntheticModel|writeSyntheticEncoder)\b|stories260K|ggml-vocab-|make-model/;

/** Whether `file`, or a module of test/helpers/, test/unit/ or test/http/ it imports (transitively), reads a model. */
function readsModel(file, seen = new Set()) {
  const path = resolve(file);
  if (seen.has(path) || !existsSync(path)) return false;
  seen.add(path);
  const source = readFileSync(path, "utf8");
  if (MODEL_MARKERS.test(source)) return true;
  for (const [, specifier] of source.matchAll(/\bfrom\s+["'](\.[^"']+)["']/g)) {
    const target = resolve(dirname(path), specifier);
    const local = ["test/helpers", "test/unit", "test/http"].some((folder) =>
      target.startsWith(resolve(folder)),
    );
    if (local && readsModel(target, seen)) return true;
  }
  return false;
}

const args = process.argv.slice(2);
const modelFree = args.includes("--model-free");
const roots = args.filter((arg) => arg !== "--model-free");
const collected = (roots.length > 0 ? roots : ["test"]).flatMap(collect);
const files = modelFree ? collected.filter((file) => !readsModel(file)) : collected;
if (modelFree) console.log(`model-free: ${files.length} of ${collected.length} test files`);
const concurrency = process.env.TEST_CONCURRENCY ?? "2";
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, "--test-reporter=spec", ...files],
  { stdio: "inherit", env: { ...process.env, LMSERVE_FROM_SOURCE: process.env.LMSERVE_FROM_SOURCE ?? "1" } },
);
process.exit(result.status ?? 1);

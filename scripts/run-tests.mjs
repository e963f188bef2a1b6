#!/usr/bin/env node
// Runs every `*.test.ts` file under the given folders (default: test/) with Node's test runner and tsx.
// Usage: node scripts/run-tests.mjs [DIR|FILE ...]
// The servers the tests start (`node bin/lmserve.js`) run the TypeScript sources through tsx, unless
// LMSERVE_FROM_SOURCE=0 is set: then they run the compiled build (dist/, `npm run build:server`), as
// `npm test` does after building (see bin/lmserve.js).
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

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

const roots = process.argv.slice(2);
const files = (roots.length > 0 ? roots : ["test"]).flatMap(collect);
const concurrency = process.env.TEST_CONCURRENCY ?? "2";
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, "--test-reporter=spec", ...files],
  { stdio: "inherit", env: { ...process.env, LMSERVE_FROM_SOURCE: process.env.LMSERVE_FROM_SOURCE ?? "1" } },
);
process.exit(result.status ?? 1);

#!/usr/bin/env node
// Compiles the server (src/, TypeScript) to plain JavaScript in dist/ (`npm run build:server`): what
// `npm start`, the `lmserve` command and the Docker image run, so that no TypeScript loader runs at run time.
// tsc emits with tsconfig.build.json (types are checked by `npm run typecheck`, not here); the plain
// JavaScript modules of src/ (*.mjs: the chat-template worker and its Jinja extensions) are copied beside
// the output, except the tsx entry of worker threads, which only the sources need. The build is written
// to a temporary folder (.dist-PID/) that then replaces dist/, so that a server started meanwhile never
// finds a half-written dist/.
// Usage: node scripts/build-server.mjs
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");
const dist = join(root, "dist");
const staging = join(root, `.dist-${process.pid}`);
/** Source-only modules: the worker entry that registers tsx (`structured/worker/tsWorker.mjs`). */
const SOURCE_ONLY = new Set([join("structured", "worker", "tsWorker.mjs")]);

/** Lists the files below `dir` whose names end with `suffix`, as absolute paths. */
function filesBelow(dir, suffix) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return filesBelow(path, suffix);
    return entry.name.endsWith(suffix) ? [path] : [];
  });
}

rmSync(staging, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const result = spawnSync(
  process.execPath,
  [tsc, "-p", join(root, "tsconfig.build.json"), "--outDir", staging],
  { stdio: "inherit" },
);
if (result.status !== 0) {
  rmSync(staging, { recursive: true, force: true });
  console.error("build-server: tsc failed");
  process.exit(result.status ?? 1);
}
for (const file of filesBelow(src, ".mjs")) {
  const path = relative(src, file);
  if (SOURCE_ONLY.has(path)) continue;
  mkdirSync(dirname(join(staging, path)), { recursive: true });
  copyFileSync(file, join(staging, path));
}
const old = `${staging}-old`;
if (existsSync(dist)) renameSync(dist, old);
renameSync(staging, dist);
rmSync(old, { recursive: true, force: true });

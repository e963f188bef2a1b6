#!/usr/bin/env node
// Entry point of the `lmserve` command: runs the compiled build (dist/, written by `npm run build`), plain
// JavaScript, so that no TypeScript loader runs at run time. The TypeScript sources (src/) run through tsx
// (a dev dependency) instead with LMSERVE_FROM_SOURCE=1, and in a checkout whose dist/ is missing or older
// than a file of src/ (edited since the last build; one line on stderr says so). LMSERVE_FROM_SOURCE=0
// insists on dist/ (`npm test` runs the suite so, right after building).
import { existsSync, readdirSync, statSync } from "node:fs";

const compiled = new URL("../dist/cli/main.js", import.meta.url);
const sources = new URL("../src/", import.meta.url);

/** Newest modification time (ms) of the files below `dir`. */
function newestBelow(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true }))
    if (entry.isFile()) newest = Math.max(newest, statSync(`${entry.parentPath}/${entry.name}`).mtimeMs);
  return newest;
}

/** Whether the sources should run: asked for, or dist/ missing or stale where tsx can run them. */
function runSources() {
  const asked = process.env.LMSERVE_FROM_SOURCE;
  if (asked === "1" || asked === "0") return asked === "1";
  if (!existsSync(compiled)) return true;
  if (!existsSync(sources)) return false;
  if (newestBelow(sources) <= statSync(compiled).mtimeMs) return false;
  console.error(
    "lmserve: dist/ is older than src/: running the sources through tsx (`npm run build` compiles them)",
  );
  return true;
}

if (runSources()) {
  let register;
  try {
    ({ register } = await import("tsx/esm/api"));
  } catch {
    console.error(
      "lmserve: cannot load tsx to run the sources (LMSERVE_FROM_SOURCE=1, or dist/ missing or older than src/): run `npm run build`",
    );
    process.exit(1);
  }
  register();
  await import("../src/cli/main.ts");
} else {
  if (!existsSync(compiled)) {
    console.error("lmserve: no compiled build (dist/cli/main.js): run `npm run build`");
    process.exit(1);
  }
  await import(compiled.href);
}

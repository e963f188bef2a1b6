/**
 * The compiled build (`dist/`, `npm run build:server`; issue 29): plain JavaScript that needs no TypeScript
 * loader. Runs on the build (`LMSERVE_FROM_SOURCE=0`, as `npm test` after building), skipped from the
 * sources; the rest of the suite's servers then run it too.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, it } from "node:test";
import { projectRoot } from "../../src/paths.ts";
import { serverVersion } from "../../src/version.ts";

const dist = resolve(projectRoot, "dist");
const onBuild = process.env.LMSERVE_FROM_SOURCE === "0";

/** The files below `dir`, as absolute paths. */
function filesBelow(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesBelow(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

describe("compiled build (dist/)", {
  skip: onBuild ? false : "runs with LMSERVE_FROM_SOURCE=0 (npm test)",
}, () => {
  it("is JavaScript only, imports no tsx, and every relative import names a file of it", () => {
    const files = filesBelow(dist);
    assert.ok(files.length > 100, `${files.length} files`);
    for (const file of files) {
      assert.match(file, /\.m?js$/, file);
      const text = readFileSync(file, "utf8");
      assert.doesNotMatch(text, /from "tsx|import\("tsx/, file);
      for (const [, specifier] of text.matchAll(/(?:from |import\()"(\.[^"]+)"/g))
        assert.ok(existsSync(resolve(dirname(file), specifier as string)), `${file}: ${specifier}`);
    }
    for (const worker of ["chat/templateWorker.mjs", "structured/worker/compileThread.js"])
      assert.ok(existsSync(join(dist, worker)), worker);
  });

  it("bin/lmserve.js runs it without resolving any module of tsx", () => {
    // A module resolve hook that refuses tsx's files: the command must not need them.
    const hooks = `export async function resolve(specifier, context, next) {
      const found = await next(specifier, context);
      if (found.url.includes("/node_modules/tsx/")) throw new Error("tsx resolved: " + found.url);
      return found;
    }`;
    const register = `import { register } from "node:module";
      register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
    const result = spawnSync(
      process.execPath,
      [
        "--import",
        `data:text/javascript,${encodeURIComponent(register)}`,
        resolve(projectRoot, "bin/lmserve.js"),
        "--version",
      ],
      { encoding: "utf8", env: { ...process.env, LMSERVE_FROM_SOURCE: "0" } },
    );
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout.trim(), serverVersion);
    const fromSource = spawnSync(
      process.execPath,
      [
        "--import",
        `data:text/javascript,${encodeURIComponent(register)}`,
        resolve(projectRoot, "bin/lmserve.js"),
        "--version",
      ],
      { encoding: "utf8", env: { ...process.env, LMSERVE_FROM_SOURCE: "1" } },
    );
    assert.notEqual(fromSource.status, 0, "the hook refuses tsx when the sources run");
    assert.match(fromSource.stderr, /^lmserve: cannot load tsx to run the sources/);
  });
});

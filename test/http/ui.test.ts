/**
 * The web UI's routes in-process (no model, no port): `registerUi` serving a build folder (the "UI not
 * built" page while it is missing, hashed assets cached for a year, nothing outside the folder), and the
 * app with the UI on: the page's CSP, the API's JSON 404s and 405s beside the static catch-all. The
 * real build, served by the real server, is `test/e2e/uiServing.test.ts`.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import Fastify from "fastify";
import { buildApp } from "../../src/server/app.ts";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { registerUi } from "../../src/server/ui.ts";
import { fakeContext } from "../helpers/fakeEngine.ts";

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "lmserve-ui-"));
  dirs.push(dir);
  return dir;
};
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("registerUi", () => {
  it("answers a 'UI not built' page while the build is missing, and the UI once it is built", async () => {
    const dist = join(tempDir(), "dist");
    const app = Fastify();
    registerUi(app, { distDir: dist });
    const response = await app.inject({ method: "GET", url: "/" });
    assert.equal(response.statusCode, 200);
    assert.match(response.headers["content-type"] as string, /^text\/html/);
    assert.match(response.body, /UI not built — run <code>npm run build<\/code>/);
    assert.equal((await app.inject({ method: "GET", url: "/assets/app.js" })).statusCode, 404);
    // Built while the server runs: served without a restart.
    mkdirSync(join(dist, "assets"), { recursive: true });
    writeFileSync(join(dist, "index.html"), "<!doctype html><title>built</title>");
    writeFileSync(join(dist, "assets", "app.js"), "1");
    assert.equal((await app.inject({ method: "GET", url: "/" })).body, "<!doctype html><title>built</title>");
    assert.equal((await app.inject({ method: "GET", url: "/assets/app.js" })).body, "1");
    await app.close();
  });

  it("serves the files of a build folder, each at its own path, and nothing else", async () => {
    const dist = tempDir();
    mkdirSync(join(dist, "assets"));
    writeFileSync(join(dist, "index.html"), "<!doctype html><title>t</title>");
    writeFileSync(join(dist, "assets", "app-abc123.js"), "console.log(1)");
    const app = Fastify();
    registerUi(app, { distDir: dist });
    const index = await app.inject({ method: "GET", url: "/" });
    assert.equal(index.body, "<!doctype html><title>t</title>");
    assert.equal(index.headers["cache-control"], "no-cache");
    const script = await app.inject({ method: "GET", url: "/assets/app-abc123.js" });
    assert.equal(script.body, "console.log(1)");
    assert.match(script.headers["content-type"] as string, /javascript/);
    assert.equal(script.headers["cache-control"], "public, max-age=31536000, immutable");
    assert.equal(script.headers["x-content-type-options"], "nosniff");
    // A rebuild while the server runs brings new hashed names: they are served at once.
    writeFileSync(join(dist, "assets", "app-def456.js"), "console.log(2)");
    assert.equal((await app.inject({ method: "GET", url: "/assets/app-def456.js" })).body, "console.log(2)");
    for (const url of ["/other", "/assets/", "/assets", "/../package.json", "/assets/../../package.json"]) {
      assert.equal((await app.inject({ method: "GET", url })).statusCode, 404, url);
    }
    assert.equal((await app.inject({ method: "POST", url: "/index.html" })).statusCode, 404);
    await app.close();
  });
});

describe("the app with the web UI on (buildApp ui option)", () => {
  it("serves the page with its CSP, and keeps the API's JSON 404s and 405s", async () => {
    const dist = tempDir();
    mkdirSync(join(dist, "assets"));
    writeFileSync(join(dist, "index.html"), "<!doctype html><title>ui</title>");
    writeFileSync(join(dist, "assets", "app-1.css"), "body{}");
    const app = buildApp(fakeContext(), { logger: false, ui: { distDir: dist } });
    try {
      const page = await app.inject({ method: "GET", url: "/" });
      assert.equal(page.statusCode, 200);
      assert.match(page.headers["content-type"] as string, /^text\/html/);
      assert.equal(page.headers["cache-control"], "no-cache");
      assert.match(page.headers["content-security-policy"] as string, /default-src 'self'/);
      assert.match(page.headers["content-security-policy"] as string, /frame-ancestors 'none'/);
      assert.equal(page.body, "<!doctype html><title>ui</title>");
      const css = await app.inject({ method: "GET", url: "/assets/app-1.css" });
      assert.match(css.headers["content-type"] as string, /^text\/css/);
      for (const url of ["/v1/nope", "/nope", "/assets/missing.js", "/index.htm"]) {
        const missing = await app.inject({ method: "GET", url });
        assert.equal(missing.statusCode, 404, url);
        assert.equal((missing.json() as ErrorBody).error.code, "route_not_found", url);
      }
      const wrongMethod = await app.inject({ method: "GET", url: "/v1/chat/completions" });
      assert.equal(wrongMethod.statusCode, 405);
      assert.equal(wrongMethod.headers.allow, "POST");
      assert.equal((wrongMethod.json() as ErrorBody).error.code, "method_not_allowed");
      const postRoot = await app.inject({ method: "POST", url: "/", payload: { a: 1 } });
      assert.equal(postRoot.statusCode, 405);
      assert.match(postRoot.headers.allow as string, /GET/);
      assert.equal((await app.inject({ method: "GET", url: "/v1/models" })).statusCode, 200);
    } finally {
      await app.close();
    }
  });

  it("is off by default: / is a JSON 404", async () => {
    const app = buildApp(fakeContext(), { logger: false });
    try {
      const response = await app.inject({ method: "GET", url: "/" });
      assert.equal(response.statusCode, 404);
      assert.equal((response.json() as ErrorBody).error.code, "route_not_found");
    } finally {
      await app.close();
    }
  });
});

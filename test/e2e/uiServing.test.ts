import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import Fastify from "fastify";
import { registerUi } from "../../src/server/ui.ts";
import { ensureUiBuilt, uiDistDir } from "../helpers/browser.ts";
import { startTestServer, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

describe("the web UI served at /", () => {
  let server: TestServer;
  before(async () => {
    ensureUiBuilt();
    server = await startTestServer();
  });
  after(async () => {
    await server.stop();
  });

  it("serves the built index.html at / with a same-origin CSP and no caching", async () => {
    const response = await fetch(`${server.url}/`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^text\/html/);
    assert.equal(response.headers.get("cache-control"), "no-cache");
    assert.match(response.headers.get("content-security-policy") ?? "", /default-src 'self'/);
    assert.equal(await response.text(), readFileSync(join(uiDistDir, "index.html"), "utf8"));
  });

  it("serves every asset the page references, hashed and cached for a year, all from this server", async () => {
    const html = await (await fetch(`${server.url}/`)).text();
    const assets = [...html.matchAll(/(?:src|href)="\.\/(assets\/[^"]+)"/g)].map((match) => match[1]);
    assert.ok(
      assets.some((path) => path?.endsWith(".js")) && assets.some((path) => path?.endsWith(".css")),
      html,
    );
    assert.doesNotMatch(html, /(?:src|href)="(?:https?:)?\/\//, "no external script or stylesheet");
    for (const path of assets) {
      const response = await fetch(`${server.url}/${path}`);
      assert.equal(response.status, 200, path);
      assert.equal(response.headers.get("cache-control"), "public, max-age=31536000, immutable");
      const text = await response.text();
      assert.doesNotMatch(
        text,
        /https?:\/\/(?!www\.w3\.org\/2000\/svg)[a-z]/i,
        `${path} loads nothing from elsewhere`,
      );
    }
  });

  it("leaves the API alone: unknown paths are still JSON 404s (405s for a wrong method), /v1 and /health answer as before", async () => {
    for (const path of ["/v1/nope", "/nope", "/assets/missing.js", "/index.htm", "/assets/"]) {
      const response = await fetch(`${server.url}${path}`);
      assert.equal(response.status, 404, path);
      const body = (await response.json()) as { error: { code: string } };
      assert.equal(body.error.code, "route_not_found", path);
    }
    // A known path with another method is a 405 naming the allowed ones (as FastAPI answers).
    const get = await fetch(`${server.url}/v1/chat/completions`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST");
    assert.equal(((await get.json()) as { error: { code: string } }).error.code, "method_not_allowed");
    const post = await server.post("/", { a: 1 });
    assert.equal(post.status, 405);
    assert.match(post.headers.get("allow") ?? "", /GET/);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] };
    assert.equal(models.data[0]?.id, "stories260K");
  });
});

describe("--no-ui", () => {
  const server = useTestServer(["--no-ui"]);

  it("serves no page at /: a JSON 404, the API unchanged", async () => {
    for (const path of ["/", "/index.html"]) {
      const response = await fetch(`${server.url}${path}`);
      assert.equal(response.status, 404, path);
      assert.equal(((await response.json()) as { error: { code: string } }).error.code, "route_not_found");
    }
    assert.equal((await fetch(`${server.url}/v1/models`)).status, 200);
  });
});

describe("registerUi", () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "lmserve-ui-"));
    dirs.push(dir);
    return dir;
  };
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

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

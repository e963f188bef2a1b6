import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { ensureUiBuilt, uiDistDir } from "../helpers/browser.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

describe("the web UI served at /", () => {
  before(() => ensureUiBuilt());
  const server = useTestServer();

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
      // Two URLs are names, never fetched: SVG's namespace, and the base URI @cfworker/json-schema resolves
      // `$id`s against outside a page (the Chromium test checks that no request leaves this server).
      assert.doesNotMatch(
        text,
        /https?:\/\/(?!www\.w3\.org\/2000\/svg|github\.com\/cfworker\b)[a-z]/i,
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

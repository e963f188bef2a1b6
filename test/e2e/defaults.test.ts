/**
 * Defaults users reach for (issue 15): `model` is optional (absent or null) on every route and then
 * means the first served model, whose id the response names; an unknown model stays a 404.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startTestServer, TEST_MODEL, type TestServer } from "../helpers/testServer.ts";

describe("model defaults", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.stop();
  });

  const BODIES: Record<string, Record<string, unknown>> = {
    "/v1/completions": { prompt: "Once upon a time", max_tokens: 4, temperature: 0 },
    "/v1/chat/completions": { messages: [{ role: "user", content: "Hi" }], max_tokens: 4, temperature: 0 },
    "/tokenize": { prompt: "Once upon a time" },
  };

  it("a request without model, or with model null, is served by the first model and names it", async () => {
    for (const [path, body] of Object.entries(BODIES)) {
      for (const model of [undefined, null]) {
        const response = await server.post(path, { ...body, model });
        assert.equal(response.status, 200, path);
        const json = (await response.json()) as { model?: string };
        if (path !== "/tokenize") assert.equal(json.model, TEST_MODEL);
      }
    }
    const stream = await server.post("/v1/chat/completions", {
      ...BODIES["/v1/chat/completions"],
      stream: true,
    });
    assert.equal(stream.status, 200);
    assert.match(await stream.text(), /"model":"stories260K"/);
  });

  it("an unknown model is still a 404 naming it", async () => {
    for (const [path, body] of Object.entries(BODIES)) {
      const response = await server.post(path, { ...body, model: "nope" });
      assert.equal(response.status, 404, path);
      const json = (await response.json()) as { message: string };
      assert.match(json.message, /nope/);
    }
  });
});

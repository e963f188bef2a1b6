/**
 * Defaults users reach for (issue 15): `model` is optional (absent or null) on every route and then
 * means the first served model, whose id the response names; an unknown model stays a 404.
 * `system_fingerprint` names the version and the engine build on every response and chunk.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { serverVersion } from "../../src/version.ts";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of stream) items.push(item);
  return items;
}

describe("model defaults", () => {
  const server = useTestServer();

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

  it("system_fingerprint is one string on chat and completions responses and on every chunk", async () => {
    const pattern = new RegExp(`^lmserve-${serverVersion.replaceAll(".", "\\.")}-[0-9a-f]{12}$`);
    const completion = await server.client.completions.create({
      model: TEST_MODEL,
      prompt: "Hi",
      max_tokens: 2,
    });
    assert.match(completion.system_fingerprint ?? "", pattern);
    const chat = await server.client.chat.completions.create({
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 2,
    });
    assert.equal(chat.system_fingerprint, completion.system_fingerprint);
    const chunks = [
      ...(await collect(
        await server.client.chat.completions.create({
          model: TEST_MODEL,
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 2,
          stream: true,
          stream_options: { include_usage: true },
        }),
      )),
      ...(await collect(
        await server.client.completions.create({
          model: TEST_MODEL,
          prompt: "Hi",
          max_tokens: 2,
          stream: true,
        }),
      )),
    ];
    assert.ok(chunks.length > 3);
    for (const chunk of chunks) assert.equal(chunk.system_fingerprint, completion.system_fingerprint);
  });
});

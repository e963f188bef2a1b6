/**
 * A chat template that renders nothing for the messages (found by a QA pass: it was a 500 from the
 * engine) is a 400 naming `messages`, on chat, Anthropic Messages and Responses, streamed or not; no slot
 * stays busy.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

describe("an empty rendered chat prompt", () => {
  let dir: string;
  let template: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "lmserve-empty-"));
    template = join(dir, "content-only.jinja");
    writeFileSync(template, "{% for m in messages %}{{ m.content }}{% endfor %}");
  });
  const server = useTestServer(() => ["--chat-template", template]);
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("is a 400 naming messages, never a 500", async () => {
    const empty = [{ role: "user", content: "" }];
    for (const [path, body] of [
      ["/v1/chat/completions", { model: TEST_MODEL, messages: empty, max_tokens: 3 }],
      ["/v1/chat/completions", { model: TEST_MODEL, messages: empty, max_tokens: 3, stream: true }],
      ["/v1/messages", { model: TEST_MODEL, messages: empty, max_tokens: 3 }],
      ["/v1/responses", { model: TEST_MODEL, input: empty }],
    ] as const) {
      const response = await server.post(path, body);
      assert.equal(response.status, 400, `${path}: ${await response.clone().text()}`);
      assert.match(await response.text(), /empty/);
    }
    // The same server answers a prompt with text.
    const ok = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Once upon a time" }],
      max_tokens: 3,
    });
    assert.equal(ok.status, 200);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /^vllm:num_requests_running\{[^}]*\} 0$/m);
  });
});

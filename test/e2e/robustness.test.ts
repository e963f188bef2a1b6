/**
 * Issue #14 on a real server: no single request may stop it. Template bombs under
 * `--trust-request-chat-template`, unknown methods, prototype-looking JSON keys, a model file truncated
 * while served.
 */
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, rmSync, statSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { defaultModelPath } from "../../src/paths.ts";
import { startTestServer, TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

/**
 * Polls `GET url` every 50 ms until `stop()`; `answered()` counts the answers so far, `stop()` returns the
 * slowest answer in ms and whether all were 200.
 */
function pollHealth(url: string): {
  answered(): number;
  stop(): Promise<{ slowestMs: number; allOk: boolean; count: number }>;
} {
  let running = true;
  let slowestMs = 0;
  let allOk = true;
  let count = 0;
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(10_000) });
      await response.arrayBuffer();
      slowestMs = Math.max(slowestMs, Date.now() - started);
      allOk &&= response.status === 200;
      count++;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    answered: () => count,
    stop: async () => {
      running = false;
      await loop;
      return { slowestMs, allOk, count };
    },
  };
}

describe("no single request stops the server", () => {
  const server = useTestServer(["--trust-request-chat-template"], { exitCode: 0 });

  const chat = (chatTemplate: string) =>
    server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Once upon a time" }],
      max_tokens: 4,
      chat_template: chatTemplate,
    });

  it("answers a range() bomb with a 400 naming chat_template, at once", async () => {
    const response = await chat("{% for i in range(1000000000) %}x{% endfor %}");
    assert.equal(response.status, 400);
    const body = (await response.json()) as { error: { param: string; code: string; message: string } };
    assert.equal(body.error.param, "chat_template");
    assert.equal(body.error.code, "chat_template_limit");
    // "At once": refused by the range() limit itself, not by the 5 s render deadline.
    assert.match(body.error.message, /range\(\) of 1000000000 items/);
    assert.doesNotMatch(body.error.message, /longer than/);
  });

  it("ends nested loops at the deadline with a 400 while /health stays fast", async (_t) => {
    const health = pollHealth(server.url);
    const started = Date.now();
    const [chatResponse, tokenizeResponse] = await Promise.all([
      chat("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"),
      server.post("/tokenize", {
        model: TEST_MODEL,
        messages: [{ role: "user", content: "hi" }],
        chat_template: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      }),
    ]);
    const elapsed = Date.now() - started;
    const _answeredDuring = health.answered();
    const { slowestMs, allOk, count } = await health.stop();
    for (const response of [chatResponse, tokenizeResponse]) {
      assert.equal(response.status, 400);
      const body = (await response.json()) as { error: { param: string; message: string } };
      assert.equal(body.error.param, "chat_template");
      assert.match(body.error.message, /longer than 5 s/);
    }
    // The deadline is a lower bound; how long past it the answer comes depends on the machine's load.
    assert.ok(elapsed >= 5_000, `the bombs took ${elapsed} ms (deadline 5 s)`);
    // The event loop kept answering while the workers looped: several checks, none waiting out the bombs.
    assert.ok(allOk && count >= 3, `${count} health checks, all 200: ${allOk}`);
    assert.ok(slowestMs < elapsed / 2, `slowest /health took ${slowestMs} ms of the bombs' ${elapsed} ms`);
    // The server still generates with the model's own template.
    const ok = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Once upon a time" }],
      max_tokens: 4,
    });
    assert.equal(ok.status, 200);
  });

  it("answers an unknown method on a known path with 405 and Allow, even QUERY without a body", async () => {
    for (const method of ["QUERY", "PROPFIND", "DELETE"]) {
      const response = await fetch(`${server.url}/v1/health/live`, { method });
      assert.equal(response.status, 405, method);
      assert.equal(response.headers.get("allow"), "GET, HEAD");
      const body = (await response.json()) as { error: { code: string } };
      assert.equal(body.error.code, "method_not_allowed");
    }
    const unknown = await fetch(`${server.url}/v1/nowhere`, { method: "QUERY" });
    assert.equal(unknown.status, 404);
  });

  it("refuses __proto__ and constructor.prototype keys with a 400 that names them, not 'invalid JSON'", async () => {
    const cases: [string, string][] = [
      [`{"model":"${TEST_MODEL}","prompt":"a","__proto__":{"polluted":true}}`, "__proto__"],
      [
        `{"model":"${TEST_MODEL}","prompt":"a","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"constructor":{"prototype":{}}}}}}`,
        "response_format.json_schema.schema.constructor",
      ],
      [`{"model":"${TEST_MODEL}","prompt":"a","nvext":{"\u005f_proto__":1}}`, "nvext.__proto__"],
    ];
    for (const [raw, path] of cases) {
      const response = await server.post("/v1/completions", raw);
      assert.equal(response.status, 400, raw);
      const body = (await response.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, "forbidden_json_key");
      assert.ok(body.error.message.includes(`\`${path}\``), body.error.message);
      assert.doesNotMatch(body.error.message, /not valid JSON/);
    }
    // A `constructor` key that is plain data is just an unknown field, ignored as any other.
    const plain = await server.post("/v1/completions", {
      model: TEST_MODEL,
      prompt: "a",
      max_tokens: 1,
      constructor: "x",
    });
    assert.equal(plain.status, 200);
    // Malformed JSON still says so.
    const malformed = await server.post("/v1/completions", '{"model":');
    assert.equal(malformed.status, 400);
    assert.equal(((await malformed.json()) as { error: { code: string } }).error.code, "malformed_json");
  });
});

describe("a model file truncated while served", () => {
  it("stops serving that model with a 503 and fails readiness, logging one line, instead of dying (SIGBUS)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "lmserve-truncate-"));
    const path = join(dir, "copy.gguf");
    copyFileSync(defaultModelPath, path);
    const server = await startTestServer([path, "--served-model-name", TEST_MODEL]);
    try {
      const generate = () =>
        server.post("/v1/completions", { model: TEST_MODEL, prompt: "Once upon", max_tokens: 4 });
      assert.equal((await generate()).status, 200);
      assert.equal((await fetch(`${server.url}/v1/health/ready`)).status, 200);
      truncateSync(path, Math.floor(statSync(path).size / 2));
      for (let attempt = 0; attempt < 3; attempt++) {
        const refused = await generate();
        assert.equal(refused.status, 503);
        const body = (await refused.json()) as { error: { code: string; message: string } };
        assert.equal(body.error.code, "model_file_changed");
        assert.match(body.error.message, /shrank from \d+ to \d+ bytes.*replace model files by rename/);
      }
      const ready = await fetch(`${server.url}/v1/health/ready`);
      assert.equal(ready.status, 503);
      assert.equal(((await ready.json()) as { error: { code: string } }).error.code, "model_file_changed");
      assert.equal((await fetch(`${server.url}/v1/health/live`)).status, 200);
      assert.equal(server.process.exitCode, null, "the process is alive");
      assert.equal(server.process.signalCode, null);
      const lines = server.logs.filter((line) => String(line.msg).startsWith("model file changed on disk"));
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.equal(lines[0]?.path, path);
      assert.equal(server.logs.filter((line) => line.level === 50).length, 1, "no other error lines");
    } finally {
      assert.equal(await server.stop(), 0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

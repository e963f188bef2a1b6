/**
 * `--rate-limit` (429 with OpenAI's `x-ratelimit-*` headers and `Retry-After`, the SDK's
 * RateLimitError), `--log-requests`, and `/metrics` open without `--protect-metrics`, on a real server
 * without API keys (the limit then applies per client address).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import OpenAI from "openai";
import { TEST_MODEL, waitForRequestLog } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const LIMIT = 4;

describe("rate limit and request logging", () => {
  const server = useTestServer(() => ["--rate-limit", `${LIMIT}/min`, "--log-requests"], { exitCode: 0 });

  it("logs the prompt and the output with --log-requests", async () => {
    const id = `logged-${Date.now()}`;
    const completion = await server.client.completions.create(
      { model: TEST_MODEL, prompt: "The purple elephant", max_tokens: 6, temperature: 0 },
      { headers: { "x-request-id": id } },
    );
    const line = await waitForRequestLog(server, id);
    assert.equal((line.request as { prompt: string }).prompt, "The purple elephant");
    assert.deepEqual(line.output, [completion.choices[0]?.text]);
  });

  it("counts down x-ratelimit-remaining-requests, then answers 429 with Retry-After", async () => {
    const remaining: number[] = [];
    let refused: Response | undefined;
    for (let i = 0; i <= LIMIT && !refused; i++) {
      const response = await fetch(`${server.url}/v1/models`);
      assert.equal(response.headers.get("x-ratelimit-limit-requests"), String(LIMIT));
      assert.match(response.headers.get("x-ratelimit-reset-requests") ?? "", /^(\d+m)?\d+(\.\d+)?(ms|s)$/);
      if (response.status === 429) refused = response;
      else {
        assert.equal(response.status, 200);
        remaining.push(Number(response.headers.get("x-ratelimit-remaining-requests")));
        await response.arrayBuffer();
      }
    }
    assert.ok(refused, "no request was refused");
    assert.deepEqual(
      remaining,
      [...remaining].sort((a, b) => b - a),
      "remaining only goes down",
    );
    assert.equal(remaining.at(-1), 0);
    assert.equal(refused.headers.get("x-ratelimit-remaining-requests"), "0");
    const retryAfter = Number(refused.headers.get("retry-after"));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
    const body = (await refused.json()) as { code: number; error: { type: string; code: string } };
    assert.equal(body.code, 429);
    assert.equal(body.error.type, "rate_limit_error");
    assert.equal(body.error.code, "rate_limit_exceeded");
  });

  it("makes the official client raise RateLimitError", async () => {
    await assert.rejects(
      server.client.chat.completions.create({
        model: TEST_MODEL,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 2,
      }),
      (error: unknown) =>
        error instanceof OpenAI.RateLimitError &&
        error.status === 429 &&
        error.headers.get("x-ratelimit-limit-requests") === String(LIMIT),
    );
  });

  it("does not limit health probes or /metrics, which stay open without --protect-metrics", async () => {
    for (const path of ["/v1/health/ready", "/health", "/metrics"]) {
      const response = await fetch(`${server.url}${path}`);
      assert.equal(response.status, 200, path);
      assert.equal(response.headers.get("x-ratelimit-limit-requests"), null, path);
    }
  });
});

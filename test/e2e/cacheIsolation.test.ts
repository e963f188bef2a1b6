/**
 * Prefix-cache isolation on a real server (issue 31, vLLM's `cache_salt`, CVE-2025-46570): cached prompt
 * cells are reused only within one isolation domain (the request's `cache_salt`, else its API key),
 * and `--prefix-cache-scope global` shares them across keys again. `cached_tokens` is the witness: a
 * reused prompt reports every token but the last as cached.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const KEYS = ["ka", "kb"] as const;

/** A prompt of a few hundred tokens (the test model's context is small), distinct per `tag`. */
function longPrompt(tag: string): string {
  return `${tag}. ${"Once upon a time, a little girl named Lily went to the park with her mom. ".repeat(12)}`;
}

type Usage = { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };

/** Sends a completion of `prompt` under `key` (and `cacheSalt` when given); returns its usage. */
async function complete(
  server: TestServer,
  key: string,
  prompt: string,
  cacheSalt?: string,
): Promise<{ promptTokens: number; cached: number }> {
  const response = await server.post(
    "/v1/completions",
    {
      model: TEST_MODEL,
      prompt,
      max_tokens: 2,
      temperature: 0,
      ...(cacheSalt !== undefined ? { cache_salt: cacheSalt } : {}),
    },
    { authorization: `Bearer ${key}` },
  );
  assert.equal(response.status, 200, await response.clone().text());
  const usage = ((await response.json()) as { usage: Usage }).usage;
  return { promptTokens: usage.prompt_tokens, cached: usage.prompt_tokens_details?.cached_tokens ?? -1 };
}

describe("prefix-cache isolation (cache_salt, --prefix-cache-scope)", () => {
  describe("default scope: one domain per API key", () => {
    const server = useTestServer(() => KEYS.flatMap((key) => ["--api-key", key]), { exitCode: 0 });

    it("reuses a prompt under one key, never under another key", async () => {
      const prompt = longPrompt("keys");
      const first = await complete(server, "ka", prompt);
      assert.ok(first.promptTokens >= 200, `the prompt has ${first.promptTokens} tokens`);
      assert.equal(first.cached, 0);
      assert.equal((await complete(server, "ka", prompt)).cached, first.promptTokens - 1);
      assert.equal((await complete(server, "kb", prompt)).cached, 0);
      // kb now has its own copy; ka's survives beside it.
      assert.equal((await complete(server, "kb", prompt)).cached, first.promptTokens - 1);
      assert.equal((await complete(server, "ka", prompt)).cached, first.promptTokens - 1);
    });

    it("joins keys that give the same cache_salt and splits one key's requests by salt", async () => {
      const prompt = longPrompt("salted");
      const first = await complete(server, "ka", prompt, "team-1");
      assert.equal(first.cached, 0);
      const full = first.promptTokens - 1;
      // The same salt under another key: one domain (as vLLM, where the salt alone seeds the block hashes).
      assert.equal((await complete(server, "kb", prompt, "team-1")).cached, full);
      // Another salt, or no salt (the key's own domain), under the same key: another domain.
      assert.equal((await complete(server, "ka", prompt, "team-2")).cached, 0);
      assert.equal((await complete(server, "ka", prompt)).cached, 0);
      assert.equal((await complete(server, "ka", prompt, "team-1")).cached, full);
    });

    it("isolates chat, Responses and Messages the same way", async () => {
      const content = longPrompt("chat");
      const chat = async (key: string, salt?: string) => {
        const response = await server.post(
          "/v1/chat/completions",
          {
            model: TEST_MODEL,
            messages: [{ role: "user", content }],
            max_tokens: 2,
            ...(salt !== undefined ? { cache_salt: salt } : {}),
          },
          { authorization: `Bearer ${key}` },
        );
        assert.equal(response.status, 200, await response.clone().text());
        const usage = ((await response.json()) as { usage: Usage }).usage;
        return { promptTokens: usage.prompt_tokens, cached: usage.prompt_tokens_details?.cached_tokens };
      };
      const first = await chat("ka");
      assert.equal(first.cached, 0);
      assert.equal((await chat("kb")).cached, 0);
      assert.equal((await chat("ka")).cached, first.promptTokens - 1);

      const responses = async (key: string, salt?: string) => {
        const response = await server.post(
          "/v1/responses",
          {
            model: TEST_MODEL,
            input: content,
            max_output_tokens: 2,
            ...(salt !== undefined ? { cache_salt: salt } : {}),
          },
          { authorization: `Bearer ${key}` },
        );
        assert.equal(response.status, 200, await response.clone().text());
        const body = (await response.json()) as {
          usage: { input_tokens_details: { cached_tokens: number } };
        };
        return body.usage.input_tokens_details.cached_tokens;
      };
      assert.equal(await responses("ka", "resp-salt"), 0);
      assert.ok((await responses("kb", "resp-salt")) > 0, "the same salt shares across keys");

      const messages = async (key: string, salt?: string) => {
        const response = await server.post(
          "/v1/messages",
          {
            model: TEST_MODEL,
            messages: [{ role: "user", content }],
            max_tokens: 2,
            ...(salt !== undefined ? { cache_salt: salt } : {}),
          },
          { "x-api-key": key },
        );
        assert.equal(response.status, 200, await response.clone().text());
        const body = (await response.json()) as { usage: { cache_read_input_tokens: number } };
        return body.usage.cache_read_input_tokens;
      };
      assert.equal(await messages("ka", "msg-salt"), 0);
      assert.equal(await messages("kb", "msg-salt-other"), 0);
      assert.ok((await messages("kb", "msg-salt")) > 0, "the same salt shares across keys");
    });

    it("refuses an empty or non-string cache_salt as a validation error naming it, on every generation route", async () => {
      const bodies: [string, Record<string, unknown>][] = [
        ["/v1/completions", { model: TEST_MODEL, prompt: "Hi", max_tokens: 1 }],
        [
          "/v1/chat/completions",
          { model: TEST_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 },
        ],
        ["/v1/responses", { model: TEST_MODEL, input: "Hi", max_output_tokens: 1 }],
        ["/v1/messages", { model: TEST_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }],
      ];
      for (const [path, body] of bodies) {
        for (const salt of ["", 7]) {
          const response = await server.post(
            path,
            { ...body, cache_salt: salt },
            { authorization: "Bearer ka" },
          );
          const text = await response.text();
          // As every field here: a bad value is a 400, a wrong type a 422 (FastAPI's, as vLLM's), except
          // on Anthropic's route, which answers every invalid body with a 400.
          const expected = salt === "" || path === "/v1/messages" ? 400 : 422;
          assert.equal(response.status, expected, `${path} ${JSON.stringify(salt)}: ${text}`);
          // Anthropic's error shape has no `param`: the message names the field on every route.
          const error = JSON.parse(text) as { error: { param?: string; message: string } };
          if (path !== "/v1/messages") assert.equal(error.error.param, "cache_salt", text);
          assert.match(error.error.message, /^cache_salt: /, text);
          if (salt === "") assert.match(error.error.message, /non-empty string/, text);
        }
      }
    });
  });

  describe("--prefix-cache-scope global", () => {
    const server = useTestServer(
      () => [...KEYS.flatMap((key) => ["--api-key", key]), "--prefix-cache-scope", "global"],
      { exitCode: 0 },
    );

    it("shares the cache across keys, and cache_salt still splits it", async () => {
      const prompt = longPrompt("global");
      const first = await complete(server, "ka", prompt);
      assert.equal(first.cached, 0);
      assert.equal((await complete(server, "kb", prompt)).cached, first.promptTokens - 1);
      assert.equal((await complete(server, "kb", prompt, "private")).cached, 0);
    });
  });
});

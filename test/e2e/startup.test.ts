/**
 * The first screen of `lmserve serve` (issue 32): a busy port fails before the model loads, the
 * listening line in JSON and pretty form, and the embedded default model's output cap.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { resolve } from "node:path";
import { describe, it } from "node:test";
import { projectRoot } from "../../src/paths.ts";

const bin = resolve(projectRoot, "bin/lmserve.js");
const STORIES = resolve(projectRoot, "../shared/models/stories260K.gguf");

/** Starts `lmserve ARGS`, resolves once `matcher` matches a stdout line, with the process. */
async function startUntil(args: string[], matcher: RegExp) {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  const line = await new Promise<string>((resolvePromise, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const found = stdout.split("\n").find((text) => matcher.test(text));
      if (found !== undefined) resolvePromise(found);
    });
    child.once("exit", (code) => reject(new Error(`exited ${code} before listening: ${stdout}`)));
  });
  return { child, line, stdout: () => stdout, stop: () => child.kill("SIGTERM") };
}

describe("lmserve serve startup", () => {
  it("a busy port fails at once with one line and exit 2, before the model loads", async () => {
    const holder = createServer();
    await new Promise<void>((done) => holder.listen({ host: "127.0.0.1", port: 0 }, done));
    const port = (holder.address() as { port: number }).port;
    try {
      const result = spawnSync(
        process.execPath,
        [bin, "serve", "--host", "127.0.0.1", "--port", String(port)],
        {
          encoding: "utf8",
          timeout: 60_000,
        },
      );
      assert.equal(result.status, 2);
      const stderr = result.stderr.trim();
      assert.equal(stderr.split("\n").length, 1, stderr);
      assert.match(
        stderr,
        new RegExp(`^lmserve: error: Cannot listen on 127\\.0\\.0\\.1:${port}: EADDRINUSE`),
      );
      assert.doesNotMatch(result.stdout, /model loaded/, "no model was loaded");
    } finally {
      holder.close();
    }
  });

  it("a Matryoshka width wider than the model's embeddings fails with one line and exit 2", () => {
    const result = spawnSync(
      process.execPath,
      [bin, "serve", STORIES, "--port", "0", "--matryoshka-dimensions", "32,100,200"],
      { encoding: "utf8", timeout: 60_000 },
    );
    assert.equal(result.status, 2);
    const stderr = result.stderr.trim();
    assert.equal(stderr.split("\n").length, 1, stderr);
    assert.match(
      stderr,
      /^lmserve: error: --matryoshka-dimensions 100,200: wider than stories260K's embeddings \(64 dimensions\)/,
    );
    assert.doesNotMatch(result.stdout, /listening/);
  });

  it("without a model, serves the embedded default with a 256-token default output, said in the JSON listening line", async () => {
    const server = await startUntil(["serve", "--port", "0", "--log-format", "json"], /"msg":"listening"/);
    try {
      const listening = JSON.parse(server.line) as { url: string; api: string; defaultMaxTokens?: number };
      assert.equal(listening.defaultMaxTokens, 256);
      assert.equal(listening.api, `${listening.url}/v1`, "the JSON line names the API's base URL too");
      const post = (body: object) =>
        fetch(`${listening.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: "stories260K",
            messages: [{ role: "user", content: "Hi" }],
            ...body,
          }),
        }).then(
          (response) =>
            response.json() as Promise<{
              usage: { completion_tokens: number };
              choices: { finish_reason: string }[];
            }>,
        );
      const capped = await post({});
      assert.equal(capped.usage.completion_tokens, 256);
      assert.equal(capped.choices[0]?.finish_reason, "length");
      // An explicit max_tokens is not bounded by the default (it is no --max-tokens-cap).
      const explicit = await post({ max_tokens: 300 });
      assert.equal(explicit.usage.completion_tokens, 300);
    } finally {
      server.stop();
    }
  });

  it("--max-tokens-cap replaces the default; --log-format pretty prints a readable listening line", async () => {
    const server = await startUntil(
      ["serve", "--port", "0", "--log-format", "pretty", "--max-tokens-cap", "2000"],
      /listening on /,
    );
    try {
      const match =
        /INFO {2}listening on (http:\/\/127\.0\.0\.1:\d+) \(API at (http:\/\/127\.0\.0\.1:\d+)\/v1, UI at \/\)$/.exec(
          server.line,
        );
      assert.ok(match, server.line);
      assert.equal(match[2], match[1]);
      assert.doesNotMatch(server.line, /stop at/);
      // One line per fact: Fastify's own "Server listening at" line is not printed beside ours.
      assert.doesNotMatch(server.stdout(), /Server listening at/);
      assert.equal(
        server
          .stdout()
          .split("\n")
          .filter((text) => /listening/i.test(text)).length,
        1,
      );
    } finally {
      server.stop();
    }
  });
});

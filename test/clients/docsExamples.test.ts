// The examples of docs/clients.md run against a real server: every fenced block whose info string is
// `sh example` (run with sh) or `js example` (run as an ES module by node from the project root, so the
// installed clients resolve), with only `http://127.0.0.1:8000` replaced by the test server's address.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { projectRoot } from "../../src/paths.ts";
import { type ProcessOutput, runProcess } from "../helpers/runProcess.ts";
import { startTestServer, type TestServer } from "../helpers/testServer.ts";

type Example = { heading: string; language: "sh" | "js"; code: string };

/** The runnable examples of a Markdown document, each with the heading it sits under. */
function examplesOf(markdown: string): Example[] {
  const examples: Example[] = [];
  let heading = "";
  const pattern = /^(#{1,6}) (.+)$|^```(sh|js) example\n([\s\S]*?)^```$/gm;
  for (const match of markdown.matchAll(pattern)) {
    if (match[2] !== undefined) heading = match[2];
    else examples.push({ heading, language: match[3] as "sh" | "js", code: match[4] ?? "" });
  }
  return examples;
}

/** Runs one example to completion. */
function run(example: Example, baseUrl: string): Promise<ProcessOutput> {
  const code = example.code.replaceAll("http://127.0.0.1:8000", baseUrl);
  return example.language === "sh"
    ? runProcess("sh", ["-c", code])
    : runProcess(process.execPath, ["--input-type=module", "--eval", code]);
}

const examples = examplesOf(readFileSync(resolve(projectRoot, "docs/clients.md"), "utf8"));

describe("docs/clients.md examples", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.stop();
  });

  it("has one example per client", () => {
    assert.deepEqual(
      examples.map((example) => example.heading),
      [
        "curl",
        "openai (official Node.js SDK)",
        "Vercel AI SDK",
        "LangChain",
        "Embeddings (openai SDK)",
        "Responses (openai SDK)",
        "Anthropic Messages (@anthropic-ai/sdk)",
      ],
    );
  });

  it("curl prints a chat completion", async () => {
    const example = examples.find((e) => e.heading === "curl");
    assert.ok(example);
    const { status, stdout, stderr } = await run(example, server.url);
    assert.equal(status, 0, stderr);
    const body = JSON.parse(stdout) as { object: string; choices: { message: { content: string } }[] };
    assert.equal(body.object, "chat.completion");
    assert.ok((body.choices[0]?.message.content ?? "").length > 0);
  });

  for (const heading of [
    "openai (official Node.js SDK)",
    "Vercel AI SDK",
    "LangChain",
    "Responses (openai SDK)",
    "Anthropic Messages (@anthropic-ai/sdk)",
  ]) {
    it(`${heading} prints the model's text`, async () => {
      const example = examples.find((e) => e.heading === heading);
      assert.ok(example);
      const { status, stdout, stderr } = await run(example, server.url);
      assert.equal(status, 0, stderr);
      assert.equal(stderr, "");
      assert.ok(stdout.trim().length > 0, "printed something");
      if (heading === "Vercel AI SDK") assert.match(stdout, /\n\d+ tokens\n$/);
    });
  }

  it("Embeddings (openai SDK) prints one 64-wide vector per input", async () => {
    const example = examples.find((e) => e.heading === "Embeddings (openai SDK)");
    assert.ok(example);
    const { status, stdout, stderr } = await run(example, server.url);
    assert.equal(status, 0, stderr);
    assert.equal(stdout.trim(), "2 64");
  });
});

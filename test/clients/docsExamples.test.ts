// The examples of docs/clients.md run against a real server: every fenced block whose info string is
// `sh example` (run with sh), `js example` (run as an ES module by node from the project root, so the
// installed clients resolve) or `python example` (run by python3 where the packages it imports are
// installed; always checked for syntax), with only `http://127.0.0.1:8000` replaced by the test server's
// address.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, it } from "node:test";
import { projectRoot } from "../../src/paths.ts";
import { type ProcessOutput, runProcess } from "../helpers/runProcess.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

type Example = { heading: string; language: "sh" | "js" | "python"; code: string };

/** The runnable examples of a Markdown document, each with the heading it sits under. */
function examplesOf(markdown: string): Example[] {
  const examples: Example[] = [];
  let heading = "";
  const pattern = /^(#{1,6}) (.+)$|^```(sh|js|python) example\n([\s\S]*?)^```$/gm;
  for (const match of markdown.matchAll(pattern)) {
    if (match[2] !== undefined) heading = match[2];
    else examples.push({ heading, language: match[3] as Example["language"], code: match[4] ?? "" });
  }
  return examples;
}

/** Runs one example to completion. */
function run(example: Example, baseUrl: string): Promise<ProcessOutput> {
  const code = example.code.replaceAll("http://127.0.0.1:8000", baseUrl);
  if (example.language === "sh") return runProcess("sh", ["-c", code]);
  if (example.language === "python") return runProcess("python3", ["-c", code]);
  return runProcess(process.execPath, ["--input-type=module", "--eval", code]);
}

const hasPython = spawnSync("python3", ["--version"]).status === 0;

/** The top-level modules a Python example imports (`import x`, `from x import y`). */
function pythonImports(code: string): string[] {
  const names = [...code.matchAll(/^(?:from|import) (\w+)/gm)].map((match) => match[1] ?? "");
  return [...new Set(names)];
}

const importable = new Map<string, boolean>();
/** Why a Python example cannot run here (python3 or one of its packages is missing), or false. */
function pythonSkip(example: Example): string | false {
  if (!hasPython) return "python3 is not installed";
  const missing = pythonImports(example.code).filter((name) => {
    if (!importable.has(name))
      importable.set(name, spawnSync("python3", ["-c", `import ${name}`]).status === 0);
    return importable.get(name) !== true;
  });
  return missing.length > 0
    ? `the Python package(s) ${missing.join(", ")} are not installed (pip install ${missing.join(" ")})`
    : false;
}

const examples = examplesOf(readFileSync(resolve(projectRoot, "docs/clients.md"), "utf8"));

describe("docs/clients.md examples", () => {
  const server = useTestServer();

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
        "openai (Python): chat and streaming",
        "openai (Python): tool calls",
        "openai (Python): structured output with Pydantic",
        "openai (Python): embeddings",
        "openai (Python): Responses",
        "openai (Python): logprobs",
        "anthropic (Python): messages and streaming",
        "anthropic (Python): tools and count_tokens",
      ],
    );
  });

  it("every Python example is valid Python", {
    skip: hasPython ? false : "python3 is not installed",
  }, async () => {
    for (const example of examples.filter((e) => e.language === "python")) {
      const { status, stderr } = await runProcess("python3", [
        "-c",
        "import ast, sys; ast.parse(sys.argv[1])",
        example.code,
      ]);
      assert.equal(status, 0, `${example.heading}: ${stderr}`);
    }
  });

  /** What each Python example must print (checked beyond a clean exit and some output). */
  const pythonOutput: Record<string, RegExp> = {
    "openai (Python): tool calls": /^get_weather \{'city': '[^']*'\}$/m,
    "openai (Python): structured output with Pydantic": /^.{0,24} \d{4}$/m,
    "openai (Python): embeddings": /^2 64$/m,
    "openai (Python): Responses": /^(completed|incomplete) [\s\S]*\n\[(completed|incomplete)\]$/m,
    "openai (Python): logprobs": /^'.*' -?\d+(\.\d+)? \[.*\]$/m,
    "anthropic (Python): tools and count_tokens": /^get_weather \{'city': '[^']*'\}\n\d+$/m,
  };
  for (const example of examples.filter((e) => e.language === "python")) {
    it(`${example.heading} runs`, { skip: pythonSkip(example) }, async () => {
      const { status, stdout, stderr } = await run(example, server.url);
      assert.equal(status, 0, stderr);
      assert.ok(stdout.trim().length > 0, "printed something");
      const expected = pythonOutput[example.heading];
      if (expected) assert.match(stdout, expected);
    });
  }

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

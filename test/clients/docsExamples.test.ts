// The examples of docs/clients.md run against a real server: every fenced block whose info string is
// `sh example` (run with sh), `js example` (run as an ES module by node from the project root, so the
// installed clients resolve) or `python example` (run by python3 where the packages it imports are
// installed; always checked for syntax), with only `http://127.0.0.1:8000` replaced by the test server's
// address. The server serves stories260K and, for the section on embedding and rerank models,
// random-weight encoders under the names the examples use (bge-small-en-v1.5-f16, a `bert` embedding
// model with cls pooling; jina-reranker-v1-tiny-en-f16, a `jina-bert-v2` reranker), written at test time.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { before, describe, it } from "node:test";
import { writeSyntheticEncoder } from "../../bench/gguf/syntheticEncoder.ts";
import { defaultModelPath, projectRoot } from "../../src/paths.ts";
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

const VOCAB = resolve(projectRoot, "native/build/llama.cpp/models/ggml-vocab-bert-bge.gguf");
const ENCODER_SHAPE = { hidden: 64, layers: 2, heads: 4, ffn: 128, context: 128 };

describe("docs/clients.md examples", () => {
  const dir = mkdtempSync(join(tmpdir(), "lmserve-docs-examples-"));
  const embedder = join(dir, "bge-small-en-v1.5-f16.gguf");
  const reranker = join(dir, "jina-reranker-v1-tiny-en-f16.gguf");
  before(async () => {
    // At the writer's default spread (0.02) every text's cls vector is nearly one (cosine 1.000 to 3 places).
    await writeSyntheticEncoder({
      shape: ENCODER_SHAPE,
      vocabPath: VOCAB,
      outPath: embedder,
      seed: 21,
      std: 0.3,
    });
    await writeSyntheticEncoder({
      architecture: "jina-bert-v2",
      shape: ENCODER_SHAPE,
      vocabPath: VOCAB,
      outPath: reranker,
      seed: 22,
      rerank: true,
    });
  });
  const server = useTestServer(() => [defaultModelPath, embedder, reranker]);

  it("has one example per client", () => {
    assert.deepEqual(
      examples.map((example) => example.heading),
      [
        "curl",
        "openai (official Node.js SDK)",
        "Vercel AI SDK",
        "LangChain",
        "Embeddings (openai SDK)",
        "Embeddings on an encoder model (openai SDK)",
        "Embeddings with LangChain (OpenAIEmbeddings)",
        "Rerank, Cohere's shape (/v2/rerank)",
        "Rerank, Jina's shape (/v1/rerank, fetch)",
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

  it("Embeddings on an encoder model (openai SDK) prints two 64-wide vectors and their cosine", async () => {
    const example = examples.find((e) => e.heading === "Embeddings on an encoder model (openai SDK)");
    assert.ok(example);
    const { status, stdout, stderr } = await run(example, server.url);
    assert.equal(status, 0, stderr);
    const match = /^2 64 (-?\d\.\d{3})$/.exec(stdout.trim());
    assert.ok(match, stdout);
    const cosine = Number(match[1]);
    assert.ok(cosine > -1.001 && cosine < 0.999, `cosine ${cosine} of two different texts`);
  });

  it("Embeddings with LangChain (OpenAIEmbeddings) prints two documents and a query vector, 64 wide", async () => {
    const example = examples.find((e) => e.heading === "Embeddings with LangChain (OpenAIEmbeddings)");
    assert.ok(example);
    const { status, stdout, stderr } = await run(example, server.url);
    assert.equal(status, 0, stderr);
    assert.equal(stdout.trim(), "2 64");
  });

  it("Rerank, Cohere's shape (/v2/rerank) prints the top 2 of 3 documents, sorted, with meta", async () => {
    const example = examples.find((e) => e.heading === "Rerank, Cohere's shape (/v2/rerank)");
    assert.ok(example);
    const { status, stdout, stderr } = await run(example, server.url);
    assert.equal(status, 0, stderr);
    const body = JSON.parse(stdout) as {
      model: string;
      results: { index: number; relevance_score: number }[];
      meta: { billed_units: { search_units: number } };
    };
    assert.equal(body.model, "jina-reranker-v1-tiny-en-f16");
    assert.equal(body.results.length, 2);
    assert.ok(body.results.every((result) => [0, 1, 2].includes(result.index)));
    assert.ok((body.results[0]?.relevance_score as number) >= (body.results[1]?.relevance_score as number));
    assert.equal(body.meta.billed_units.search_units, 1);
  });

  it("Rerank, Jina's shape (/v1/rerank, fetch) prints the top 2 documents with their text, and the tokens", async () => {
    const example = examples.find((e) => e.heading === "Rerank, Jina's shape (/v1/rerank, fetch)");
    assert.ok(example);
    const { status, stdout, stderr } = await run(example, server.url);
    assert.equal(status, 0, stderr);
    const documents = ["paris is the capital of france", "bananas are yellow", "the eiffel tower"];
    const lines = stdout.trim().split("\n");
    assert.equal(lines.length, 3, stdout);
    for (const line of lines.slice(0, 2)) {
      const match = /^(\d) (-?\d+\.\d{4}) (.+)$/.exec(line);
      assert.ok(match, line);
      assert.equal(match[3], documents[Number(match[1])]);
    }
    assert.match(lines[2] as string, /^\d+ tokens$/);
  });
});

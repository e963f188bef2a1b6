/**
 * `/v1/embeddings` end to end through the official `openai` client on stories260K (64-wide hidden state):
 * shape, normalisation, base64 round trip, batch order, determinism, token-id inputs, the errors, and
 * embeddings running beside a generation in the same step loop.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const WIDTH = 64;

function norm(vector: number[]): number {
  return Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
}

function close(a: number[], b: number[], tolerance = 1e-4): boolean {
  return (
    a.length === b.length && a.every((value, index) => Math.abs(value - (b[index] as number)) <= tolerance)
  );
}

describe("/v1/embeddings", () => {
  const server = useTestServer(["--max-num-seqs", "4"]);

  it("returns one unit-length vector per input, in order, with usage", async () => {
    const response = await server.client.embeddings.create({
      model: TEST_MODEL,
      input: ["Once upon a time", "The dog ran to the park", "Lily"],
    });
    assert.equal(response.object, "list");
    assert.equal(response.model, TEST_MODEL);
    assert.deepEqual(
      response.data.map((entry) => entry.index),
      [0, 1, 2],
    );
    for (const entry of response.data) {
      assert.equal(entry.embedding.length, WIDTH);
      assert.ok(Math.abs(norm(entry.embedding) - 1) < 1e-5);
    }
    assert.ok(response.usage.prompt_tokens > 3);
    assert.equal(response.usage.total_tokens, response.usage.prompt_tokens);
    // Batch order: each vector equals the one of its input alone.
    for (const [index, input] of ["Once upon a time", "The dog ran to the park", "Lily"].entries()) {
      const alone = await server.client.embeddings.create({ model: TEST_MODEL, input });
      assert.ok(close(alone.data[0]?.embedding ?? [], response.data[index]?.embedding ?? []), input);
    }
    // Different texts differ.
    assert.ok(!close(response.data[0]?.embedding ?? [], response.data[1]?.embedding ?? [], 1e-3));
  });

  it("is deterministic, takes token ids, and round-trips base64 (little-endian float32)", async () => {
    const text = "A little bird sang";
    const a = await server.client.embeddings.create({
      model: TEST_MODEL,
      input: text,
      encoding_format: "float",
    });
    const b = await server.client.embeddings.create({
      model: TEST_MODEL,
      input: text,
      encoding_format: "float",
    });
    assert.deepEqual(a.data[0]?.embedding, b.data[0]?.embedding);
    const tokenized = (await (
      await server.post("/tokenize", { model: TEST_MODEL, prompt: text })
    ).json()) as {
      tokens: number[];
    };
    const byIds = await server.client.embeddings.create({ model: TEST_MODEL, input: [tokenized.tokens] });
    assert.ok(close(byIds.data[0]?.embedding ?? [], a.data[0]?.embedding ?? []));
    const raw = await server.post("/v1/embeddings", {
      model: TEST_MODEL,
      input: text,
      encoding_format: "base64",
    });
    const body = (await raw.json()) as { data: { embedding: string }[] };
    const bytes = Buffer.from(body.data[0]?.embedding ?? "", "base64");
    const decoded = Array.from({ length: bytes.length / 4 }, (_, index) => bytes.readFloatLE(index * 4));
    assert.equal(decoded.length, WIDTH);
    assert.ok(close(decoded, a.data[0]?.embedding ?? [], 1e-7));
  });

  it("refuses what it cannot serve with a 400 naming the field", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ input: "" }, "input"],
      [{ input: [] }, "input"],
      [{ input: ["ok", ""] }, "input[1]"],
      [{ input: "hello", dimensions: 8 }, "dimensions"],
      [{ input: [[1, 2, 999999]] }, "input[0][2]"],
      [{ input: "word ".repeat(3000) }, "input"],
    ];
    for (const [fields, param] of cases) {
      const response = await server.post("/v1/embeddings", { model: TEST_MODEL, ...fields });
      const body = (await response.json()) as { error: { param: string; message: string } };
      assert.equal(response.status, 400, JSON.stringify(fields).slice(0, 60));
      assert.equal(body.error.param, param);
    }
    const longOne = await server.post("/v1/embeddings", { model: TEST_MODEL, input: "word ".repeat(3000) });
    assert.match(
      ((await longOne.json()) as { error: { message: string } }).error.message,
      /tokens, more than/,
    );
  });

  it("runs beside a generation in the same step loop", async () => {
    const stream = server.client.completions.create({
      model: TEST_MODEL,
      prompt: "Once upon a time",
      max_tokens: 200,
      ignore_eos: true,
      stream: true,
    } as Parameters<typeof server.client.completions.create>[0] & { stream: true });
    const embeddings = server.client.embeddings.create({ model: TEST_MODEL, input: ["one", "two", "three"] });
    let chunks = 0;
    for await (const _ of await stream) chunks++;
    assert.ok(chunks > 10);
    assert.equal((await embeddings).data.length, 3);
  });
});

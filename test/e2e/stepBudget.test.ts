/**
 * `--max-num-batched-tokens` (issue 29): the step budget changes how prompts are chunked, never what is
 * generated: at temperature 0 the streamed text is the same with a budget of 8 tokens a step as with
 * the default, and no step holds more tokens than the budget.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readSse, TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const PROMPTS = [
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.",
  "The dog",
  "One day, a big red ball rolled under the tree and Tom ran to get it, but the ball was stuck and he was sad.",
  "Mom said",
];

/** Streams every prompt at once at temperature 0; resolves with each stream's text, in prompt order. */
async function streamTexts(server: TestServer): Promise<string[]> {
  return Promise.all(
    PROMPTS.map(async (prompt) => {
      const response = await server.post("/v1/completions", {
        model: TEST_MODEL,
        prompt,
        max_tokens: 48,
        temperature: 0,
        ignore_eos: true,
        stream: true,
      });
      assert.equal(response.status, 200);
      const events = (await readSse(response)).filter((event) => event !== "[DONE]") as {
        choices: { text: string }[];
      }[];
      return events.map((event) => event.choices[0]?.text ?? "").join("");
    }),
  );
}

/** The `vllm:iteration_tokens_total` histogram: its sample count and the count of steps of at most `le` tokens. */
async function iterationSteps(server: TestServer, le: number): Promise<{ count: number; atMost: number }> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const value = (prefix: string) =>
    Number(
      text
        .split("\n")
        .find((line) => line.startsWith(prefix))
        ?.split(" ")
        .at(-1),
    );
  return {
    count: value("vllm:iteration_tokens_total_count"),
    atMost: value(`vllm:iteration_tokens_total_bucket{le="${le}"`),
  };
}

describe("step budget (--max-num-batched-tokens)", () => {
  const wide = useTestServer(["--max-num-seqs", "4"]);
  const narrow = useTestServer(["--max-num-seqs", "4", "--max-num-batched-tokens", "8"]);

  it("streams the same text at temperature 0 with a budget of 8 as with the default", async () => {
    const [reference, budgeted] = [await streamTexts(wide), await streamTexts(narrow)];
    assert.ok(reference.every((text) => text.length > 0));
    assert.deepEqual(budgeted, reference);
  });

  it("never runs a step of more tokens than the budget, and chunks the long prompts", async () => {
    const narrowSteps = await iterationSteps(narrow, 8);
    assert.ok(narrowSteps.count > 0);
    assert.equal(narrowSteps.atMost, narrowSteps.count);
    // With the default budget the long prompts go in whole: some step holds more than 8 tokens.
    const wideSteps = await iterationSteps(wide, 8);
    assert.ok(wideSteps.atMost < wideSteps.count);
  });

  it("logs the step budget at startup", () => {
    const loaded = (server: TestServer) =>
      server.logs.find((entry) => entry.msg === "model loaded")?.maxNumBatchedTokens;
    assert.equal(loaded(narrow), 8);
    assert.equal(loaded(wide), 2048); // the CPU's default
  });
});

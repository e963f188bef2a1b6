/**
 * Client grammars under the mask engine's limits (issue 31), through the real server on stories260K: an
 * ambiguous grammar of optional items in a row (`("a"|"b"|"")` 300 times, then "c": 601 parse stacks at
 * once) is enforced, never dropped (it used to come back as free text: an empty mask let the raw argmax
 * through), and the 150-item one, which used to hold every step for seconds, does not change what a plain
 * stream running beside it generates (correctness and order, not wall-clock).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readSse, TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

/** `("a"|"b"|"")` `items` times in a row, then "c": any a/b string of at most `items` letters, then c. */
const optionalRun = (items: number): string => `root ::= ${Array(items).fill('("a"|"b"|"")').join(" ")} "c"`;

const server = useTestServer(["--max-num-seqs", "4"]);

/** POSTs a completion request; the status and parsed body. */
async function complete(body: Record<string, unknown>): Promise<{
  status: number;
  json: { error: { message: string }; choices: { text: string; finish_reason: string }[] };
}> {
  const response = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: TEST_MODEL, prompt: "Once upon a time", ...body }),
  });
  return { status: response.status, json: await response.json() };
}

/** Checks a completion under `optionalRun(items)`: a match when it stopped, a prefix of one when cut. */
function assertOptionalRun(
  choice: { text: string; finish_reason: string },
  items: number,
  label: string,
): void {
  const letters = choice.text.replace(/c$/, "");
  assert.match(letters, /^[ab]*$/, `${label}: only a and b before the c: ${JSON.stringify(choice.text)}`);
  assert.ok(letters.length <= items, `${label}: at most ${items} letters`);
  if (choice.finish_reason === "stop")
    assert.match(choice.text, /c$/, `${label}: a stopped output ends in c`);
  else assert.equal(choice.finish_reason, "length", label);
}

describe("ambiguous client grammars", () => {
  it("the 300-item optional run is enforced (or ended with a clear error), never free text", async () => {
    for (const [seed, temperature] of [
      [0, 0],
      [1, 1],
      [2, 1.5],
    ] as const) {
      const { status, json } = await complete({
        max_tokens: 24,
        temperature,
        seed,
        guided_grammar: optionalRun(300),
      });
      if (status !== 200) {
        assert.equal(status, 400, JSON.stringify(json));
        assert.match(json.error.message, /grammar is too costly/);
        continue;
      }
      assertOptionalRun(json.choices[0] ?? { text: "", finish_reason: "none" }, 300, `seed ${seed}`);
    }
  });

  it("streams the 150-item run beside a plain stream without changing the plain stream's text", async () => {
    const plain = { max_tokens: 48, temperature: 0 };
    const stream = async (body: Record<string, unknown>) => {
      const response = await fetch(`${server.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: TEST_MODEL, prompt: "Once upon a time", stream: true, ...body }),
      });
      assert.equal(response.status, 200);
      const events = (await readSse(response)) as {
        choices?: { text: string; finish_reason: string | null }[];
      }[];
      const choices = events.flatMap((event) => event.choices ?? []);
      return {
        text: choices.map((choice) => choice.text).join(""),
        finish: choices.map((choice) => choice.finish_reason).find((reason) => reason !== null),
      };
    };
    const alone = await stream(plain);
    const [guided, beside] = await Promise.all([
      stream({ max_tokens: 24, temperature: 1.5, seed: 7, guided_grammar: optionalRun(150) }),
      stream(plain),
    ]);
    assert.equal(beside.text, alone.text, "the plain stream's text does not depend on its neighbour");
    assert.equal(beside.finish, alone.finish);
    assertOptionalRun({ text: guided.text, finish_reason: guided.finish ?? "" }, 150, "guided stream");
  });
});

/**
 * `--jump-forward` through the real server on stories260K: a chat `response_format` json_schema with long
 * fixed keys, streamed and not, with and without logprobs. Streamed text equals the non-streamed text at
 * temperature 0; forced tokens count as completion tokens (usage) and, with logprobs, are reported with
 * logprob 0 and themselves as the only top entry; the output stays valid; `/metrics` counts the forced
 * tokens. The same request on a server without the flag gives valid output and forces nothing.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ajvValidator } from "../helpers/structuredAjv.ts";
import { readSse, TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const SCHEMA = {
  type: "object",
  properties: {
    name_of_the_main_character: { type: "string", maxLength: 12 },
    number_of_friends_in_the_story: { type: "integer", minimum: 0, maximum: 9 },
    the_story_has_a_happy_ending: { type: "boolean" },
  },
  required: ["name_of_the_main_character", "number_of_friends_in_the_story", "the_story_has_a_happy_ending"],
  additionalProperties: false,
};
const valid = ajvValidator(SCHEMA);

type Body = Record<string, unknown>;

const request = (extra: Body = {}): Body => ({
  model: TEST_MODEL,
  messages: [{ role: "user", content: "Tell me about Lily." }],
  max_tokens: 200,
  temperature: 0,
  response_format: { type: "json_schema", json_schema: { name: "story", schema: SCHEMA, strict: true } },
  ...extra,
});

async function forcedTokensMetric(server: TestServer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split("\n").find((row) => row.startsWith("lmserve:jump_forward_tokens_total{"));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

describe("--jump-forward", () => {
  const jumping = useTestServer(["--jump-forward"]);
  const plain = useTestServer();

  it("streamed equals non-streamed; forced tokens are completion tokens; the output is valid", async () => {
    const whole = (await (await jumping.post("/v1/chat/completions", request())).json()) as Body;
    const choice = (whole.choices as Body[])[0] as { message: { content: string }; finish_reason: string };
    assert.equal(choice.finish_reason, "stop");
    const content = choice.message.content;
    assert.equal(valid(JSON.parse(content)), true, content);
    const events = await readSse(
      await jumping.post(
        "/v1/chat/completions",
        request({ stream: true, stream_options: { include_usage: true } }),
      ),
    );
    const streamed = events
      .filter((event): event is Body => typeof event === "object")
      .map((event) => ((event.choices as Body[] | undefined)?.[0]?.delta as Body | undefined)?.content ?? "")
      .join("");
    assert.equal(streamed, content);
    const usage = (events.at(-2) as Body).usage as { completion_tokens: number };
    assert.equal(usage.completion_tokens, (whole.usage as { completion_tokens: number }).completion_tokens);
    assert.ok((await forcedTokensMetric(jumping)) >= 10, "the key names were appended, not sampled");
  });

  it("logprobs: one entry per token; forced tokens have logprob 0 and themselves as the top entry", async () => {
    const whole = (await (
      await jumping.post("/v1/chat/completions", request({ logprobs: true, top_logprobs: 2 }))
    ).json()) as Body;
    const choice = (whole.choices as Body[])[0] as {
      message: { content: string };
      logprobs: {
        content: { token: string; logprob: number; top_logprobs: { token: string; logprob: number }[] }[];
      };
    };
    const entries = choice.logprobs.content;
    assert.equal(entries.length, (whole.usage as { completion_tokens: number }).completion_tokens);
    // The last entry may be the end-of-sequence token, which has no text in the content.
    assert.ok(
      entries
        .map((entry) => entry.token)
        .join("")
        .startsWith(choice.message.content),
    );
    const forced = entries.filter((entry) => entry.logprob === 0 && entry.top_logprobs.length === 1);
    assert.ok(forced.length >= 10, `forced entries: ${forced.length}`);
    for (const entry of forced) assert.deepEqual(entry.top_logprobs[0]?.token, entry.token);
  });

  it("without the flag the same request forces nothing and is valid too", async () => {
    const whole = (await (await plain.post("/v1/chat/completions", request())).json()) as Body;
    const content = ((whole.choices as Body[])[0] as { message: { content: string } }).message.content;
    assert.equal(valid(JSON.parse(content)), true, content);
    assert.equal(await forcedTokensMetric(plain), 0);
  });
});

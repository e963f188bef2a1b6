/**
 * Every constraint spelling is enforced or refused, never ignored (issue 15): llama-server's top-level
 * `grammar` and `json_schema`, `response_format: {type: "json_object", schema}` (instructor's
 * JSON_SCHEMA mode; llama-server, Together, Fireworks) and `{type: "json_schema", schema}` on both
 * endpoints; the two-constraints rule across every spelling; and the peers' fields this server cannot
 * honour (`functions`, `n_predict`, `typical_p`, ...) refused with a 400 unless they hold their no-op value.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import {
  assertStoppedValid,
  type Body,
  type Check,
  ENDPOINTS,
  fixture,
  fullMatch,
  GuidedClient,
  jsonCheck,
} from "../helpers/guidedHttp.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const SMALL_SCHEMA = {
  type: "object",
  properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: 0, maximum: 9 } },
  required: ["ok", "n"],
};
const YES_NO_GRAMMAR = fixture("grammars/yes-no-reason.gbnf");

const SPELLINGS: { name: string; fields: Body; check: Check }[] = [
  {
    name: "grammar (llama-server)",
    fields: { grammar: YES_NO_GRAMMAR },
    check: fullMatch("(yes|no): [a-z][a-z ]{0,30}\\."),
  },
  {
    name: "json_schema (llama-server)",
    fields: { json_schema: SMALL_SCHEMA },
    check: jsonCheck(SMALL_SCHEMA),
  },
  {
    name: "response_format json_object with schema",
    fields: { response_format: { type: "json_object", schema: SMALL_SCHEMA } },
    check: jsonCheck(SMALL_SCHEMA),
  },
  {
    name: "response_format json_schema with schema beside type",
    fields: { response_format: { type: "json_schema", schema: SMALL_SCHEMA } },
    check: jsonCheck(SMALL_SCHEMA),
  },
];

describe("constraint spellings and peer fields", () => {
  let client: GuidedClient;

  const server = useTestServer(["--max-num-seqs", "4"]);
  before(async () => {
    client = new GuidedClient(server);
  });

  for (const { name, fields, check } of SPELLINGS) {
    it(`${name}: greedy and streamed output on both endpoints stops and satisfies the constraint`, async () => {
      for (const endpoint of ENDPOINTS) {
        const [choice] = await client.generate(endpoint, { ...fields, temperature: 0 });
        assert.equal(choice?.finish, "stop", `${endpoint}: ${JSON.stringify(choice?.text)}`);
        assertStoppedValid(`${name} ${endpoint}`, choice ? [choice] : [], check);
        const [streamed] = await client.stream(endpoint, { ...fields, temperature: 0 });
        assert.equal(streamed?.text, choice?.text);
      }
    });
  }

  it("two constraints in any spellings are a 400 naming both fields", async () => {
    const pairs: [Body, string, string][] = [
      [{ grammar: YES_NO_GRAMMAR, guided_choice: ["a"] }, "guided_choice", "grammar"],
      [{ json_schema: SMALL_SCHEMA, guided_json: SMALL_SCHEMA }, "guided_json", "json_schema"],
      [
        { json_schema: SMALL_SCHEMA, response_format: { type: "json_object", schema: SMALL_SCHEMA } },
        "json_schema",
        "response_format.schema",
      ],
      [
        { grammar: YES_NO_GRAMMAR, structured_outputs: { json_object: true } },
        "structured_outputs.json_object",
        "grammar",
      ],
      [
        {
          response_format: {
            type: "json_schema",
            schema: SMALL_SCHEMA,
            json_schema: { name: "x", schema: SMALL_SCHEMA },
          },
        },
        "response_format.json_schema.schema",
        "response_format.schema",
      ],
      [{ nvext: { guided_regex: "a+" }, json_schema: SMALL_SCHEMA }, "nvext.guided_regex", "json_schema"],
    ];
    for (const endpoint of ENDPOINTS) {
      for (const [fields, first, second] of pairs) {
        const { status, json } = await client.post(endpoint, fields);
        assert.equal(status, 400, JSON.stringify(fields));
        assert.ok(json.message?.includes(first) && json.message.includes(second), json.message);
      }
    }
  });

  it("a schema under response_format type text, and a malformed top-level grammar, are 400s", async () => {
    for (const endpoint of ENDPOINTS) {
      const text = await client.post(endpoint, { response_format: { type: "text", schema: SMALL_SCHEMA } });
      assert.equal(text.status, 400);
      assert.equal((text.json.error as Body).param, "response_format.schema");
      const bad = await client.post(endpoint, { grammar: "root ::= (" });
      assert.equal(bad.status, 400);
      assert.equal((bad.json.error as Body).param, "grammar");
      const stop = await client.post(endpoint, { json_schema: SMALL_SCHEMA, stop: ["}"] });
      assert.equal(stop.status, 400);
      assert.equal((stop.json.error as Body).param, "stop");
    }
  });

  it("peers' fields this server cannot honour are a 400 naming them; their no-op values pass", async () => {
    const refused: Body[] = [
      { functions: [{ name: "f", parameters: {} }] },
      { function_call: "auto" },
      { modalities: ["text", "audio"] },
      { audio: { voice: "alloy", format: "wav" } },
      { n_predict: 8 },
      { typical_p: 0.5 },
      { mirostat: 2 },
      { dry_multiplier: 0.8 },
      { xtc_probability: 0.5 },
      { allowed_token_ids: [1, 2] },
      { bad_words: ["the"] },
      { logits_processors: ["x"] },
      { use_beam_search: true },
      { truncate_prompt_tokens: 10 },
      { skip_special_tokens: false },
    ];
    const accepted: Body = {
      functions: [],
      modalities: ["text"],
      typical_p: 1,
      mirostat: 0,
      dry_multiplier: 0,
      xtc_probability: 0,
      bad_words: [],
      logits_processors: [],
      use_beam_search: false,
      skip_special_tokens: true,
      n_predict: null,
    };
    for (const endpoint of ENDPOINTS) {
      for (const fields of refused) {
        const { status, json } = await client.post(endpoint, { ...fields, max_tokens: 4 });
        const [name] = Object.keys(fields);
        assert.equal(status, 400, `${endpoint} ${name}`);
        const error = json.error as Body;
        assert.equal(error.param, name);
        assert.equal(error.code, "unsupported_field");
        assert.match(json.message ?? "", /not supported by this server/);
      }
      const [choice] = await client.generate(endpoint, { ...accepted, max_tokens: 4 });
      assert.ok(choice);
    }
  });
});

/**
 * Guided decoding through the real server (issue 5): every request spelling of a constraint on both
 * endpoints, streaming, `n > 1`, logprobs, the 400s (two constraints, unknown backend, refused schema
 * keywords, malformed GBNF, fields that would break the constraint), `json_object` whitespace, the
 * openai client's `chat.completions.parse()`, and a sample of the schema / regex / choice corpus at
 * temperature 1 with 3 seeds. Every output that finishes with `stop` must satisfy its constraint;
 * outputs cut by `max_tokens` are only counted.
 */
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { projectRoot } from "../../src/paths.ts";
import {
  assertStoppedValid,
  type Body,
  type Check,
  ENDPOINTS,
  type Endpoint,
  fixture,
  fullMatch,
  GuidedClient,
  isObject,
  jsonCheck,
  schemaFixture,
  whitespaceRuns,
} from "../helpers/guidedHttp.ts";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const SMALL_SCHEMA = {
  type: "object",
  properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: 0, maximum: 9 } },
  required: ["ok", "n"],
};
const CHOICES = ["yes", "no", "maybe"];
const YES_NO_GRAMMAR = fixture("grammars/yes-no-reason.gbnf");
const REGEX = "[A-Z][a-z]+ [a-z]+\\.";
/** One constraint per kind, with the check of a stopped output. */
const KINDS = {
  json: { spec: SMALL_SCHEMA, check: jsonCheck(SMALL_SCHEMA) },
  regex: { spec: REGEX, check: fullMatch(REGEX) },
  choice: { spec: CHOICES, check: (text: string) => CHOICES.includes(text) },
  grammar: { spec: YES_NO_GRAMMAR, check: fullMatch("(yes|no): [a-z][a-z ]{0,30}\\.") },
};

/** Every spelling of a constraint. `open`: json_object, whose greedy output may run to the limit. */
const SPELLINGS: { name: string; fields: Body; check: Check; open?: boolean }[] = [
  ...Object.entries(KINDS).flatMap(([kind, { spec, check }]) => [
    { name: `guided_${kind}`, fields: { [`guided_${kind}`]: spec }, check },
    { name: `nvext.guided_${kind}`, fields: { nvext: { [`guided_${kind}`]: spec } }, check },
    { name: `structured_outputs.${kind}`, fields: { structured_outputs: { [kind]: spec } }, check },
  ]),
  {
    name: "guided_json (JSON string)",
    fields: { guided_json: JSON.stringify(SMALL_SCHEMA) },
    check: KINDS.json.check,
  },
  {
    name: "response_format json_schema",
    fields: {
      response_format: {
        type: "json_schema",
        json_schema: { name: "small", description: "a flag and a digit", schema: SMALL_SCHEMA, strict: true },
      },
    },
    check: KINDS.json.check,
  },
  {
    name: "structured_outputs.json_object",
    fields: { structured_outputs: { json_object: true } },
    check: isObject,
    open: true,
  },
  {
    name: "response_format json_object",
    fields: { response_format: { type: "json_object" } },
    check: isObject,
    open: true,
  },
];

describe("guided decoding over HTTP", () => {
  let client: GuidedClient;

  const server = useTestServer(["--max-num-seqs", "4"]);
  before(async () => {
    client = new GuidedClient(server);
  });

  for (const { name, fields, check, open } of SPELLINGS) {
    it(`${name}: greedy output on both endpoints ${open ? "is a JSON object or its prefix" : "stops and satisfies the constraint"}`, async () => {
      for (const endpoint of ENDPOINTS) {
        const [choice] = await client.generate(endpoint, { ...fields, temperature: 0 });
        const text = JSON.stringify(choice?.text);
        if (open) assert.ok(choice?.text.startsWith("{"), text);
        else assert.equal(choice?.finish, "stop", `${endpoint}: ${text}`);
        assertStoppedValid(`${name} ${endpoint}`, choice ? [choice] : [], check);
      }
    });
  }

  it("guided_whitespace_pattern (all spellings) replaces the JSON whitespace", async () => {
    const pattern = "\n  ";
    for (const [endpoint, fields] of [
      ["completions", { guided_json: SMALL_SCHEMA, guided_whitespace_pattern: pattern }],
      ["chat", { nvext: { guided_json: SMALL_SCHEMA, guided_whitespace_pattern: pattern } }],
      ["chat", { structured_outputs: { json: SMALL_SCHEMA, whitespace_pattern: pattern } }],
    ] as const) {
      const [choice] = await client.generate(endpoint, { ...fields, temperature: 0 });
      assert.equal(choice?.finish, "stop");
      assert.ok(jsonCheck(SMALL_SCHEMA)(choice.text), choice.text);
      const runs = whitespaceRuns(choice.text);
      assert.ok(runs.length >= 3, JSON.stringify(choice.text));
      assert.deepEqual(new Set(runs), new Set([pattern]), JSON.stringify(choice.text));
    }
  });

  it("json_object output is an object with bounded whitespace (n = 4, temperature 1)", async () => {
    let stopped = 0;
    for (const endpoint of ENDPOINTS) {
      const choices = await client.generate(endpoint, {
        response_format: { type: "json_object" },
        temperature: 1,
        seed: 7,
        n: 4,
        max_tokens: 256,
      });
      stopped += assertStoppedValid(`json_object ${endpoint}`, choices, isObject);
      for (const { text } of choices) {
        assert.ok(text.startsWith("{"), JSON.stringify(text));
        for (const run of whitespaceRuns(text))
          assert.match(run, /^(?: |\n{1,2}[ \t]{0,20})$/, JSON.stringify(text));
      }
    }
    assert.ok(stopped >= 1, "at least one json_object output completed");
  });

  it("streamed text equals the non-streamed text and validates (greedy, and seeded n = 2)", async () => {
    const cases: [Body, Check][] = [
      [{ guided_json: schemaFixture("api-sentiment") }, jsonCheck(schemaFixture("api-sentiment"))],
      [{ guided_regex: "[αβγ]+ü|\\d{3}-\\d{4}" }, fullMatch("[αβγ]+ü|\\d{3}-\\d{4}")],
      [{ guided_choice: ["日本", "café", "naïve"] }, (t) => ["日本", "café", "naïve"].includes(t)],
      [{ response_format: { type: "json_object" } }, isObject],
    ];
    for (const endpoint of ENDPOINTS) {
      for (const [fields, check] of cases) {
        for (const sampling of [{ temperature: 0 }, { temperature: 1, seed: 21, n: 2 }]) {
          const body = { ...fields, ...sampling };
          const plain = await client.generate(endpoint, body);
          const streamed = await client.stream(endpoint, body);
          assert.deepEqual(streamed, plain, `${endpoint} ${JSON.stringify(body).slice(0, 80)}`);
          assertStoppedValid(`${endpoint} streamed`, streamed, check);
        }
      }
    }
  });

  it("n = 3 gives three choices that each satisfy the constraint", async () => {
    const schema = schemaFixture("oneof-objects");
    for (const endpoint of ENDPOINTS) {
      const choices = await client.generate(endpoint, { guided_json: schema, n: 3, temperature: 1, seed: 3 });
      assert.deepEqual(
        choices.map((c) => c.index),
        [0, 1, 2],
      );
      assert.ok(assertStoppedValid(`n=3 ${endpoint}`, choices, jsonCheck(schema)) >= 1);
    }
  });

  it("prompt logprobs and echo under a constraint: the prompt's raw logprobs, the answer constrained", async () => {
    const prompt = "Once upon a time";
    const { json } = await client.post("completions", {
      prompt,
      guided_choice: CHOICES,
      prompt_logprobs: 1,
      echo: true,
      logprobs: 1,
      temperature: 0,
    });
    const [choice] = json.choices as {
      text: string;
      prompt_logprobs: (Record<string, { logprob: number }> | null)[];
      logprobs: { tokens: string[]; token_logprobs: (number | null)[] };
    }[];
    assert.ok(choice);
    assert.ok(choice.text.startsWith(prompt));
    assert.ok(CHOICES.includes(choice.text.slice(prompt.length)), choice.text);
    assert.equal(choice.prompt_logprobs[0], null);
    assert.ok(choice.prompt_logprobs.length >= 2);
    for (const entry of choice.prompt_logprobs.slice(1)) {
      for (const { logprob } of Object.values(entry ?? {})) assert.ok(logprob <= 0);
    }
    // echo: the prompt's tokens first (the first without a logprob), then the constrained answer's.
    assert.equal(choice.logprobs.token_logprobs[0], null);
    assert.ok(choice.logprobs.tokens.join("").includes(choice.text), choice.logprobs.tokens.join(""));
  });

  it("logprobs under a constraint: present, the sampled token in the top list, only allowed tokens", async () => {
    const { json } = await client.post("completions", {
      guided_regex: "[a-z]+",
      logprobs: 3,
      max_tokens: 8,
      temperature: 1,
      seed: 4,
    });
    const logprobs = (json.choices as Body[])[0]?.logprobs as {
      tokens: string[];
      token_logprobs: number[];
      top_logprobs: Record<string, number>[];
    };
    assert.ok(logprobs.tokens.length >= 1 && logprobs.tokens.length <= 8);
    logprobs.tokens.forEach((token, i) => {
      const top = logprobs.top_logprobs[i] as Record<string, number>;
      assert.equal(top[token], logprobs.token_logprobs[i]);
      assert.ok((logprobs.token_logprobs[i] as number) <= 0);
      // The grammar masks the distribution: every alternative is lower-case letters (or EOS).
      for (const alternative of Object.keys(top)) assert.match(alternative, /^(?:[a-z]+|<\/s>)$/);
    });
    const chat = await client.post("chat", {
      guided_choice: CHOICES,
      logprobs: true,
      top_logprobs: 20,
      temperature: 1,
      seed: 5,
    });
    const [choice] = chat.json.choices as {
      message: { content: string };
      logprobs: { content: { token: string; logprob: number; top_logprobs: { token: string }[] }[] };
    }[];
    assert.ok(choice && CHOICES.includes(choice.message.content));
    const entries = choice.logprobs.content;
    assert.ok(entries.length >= 1);
    let text = "";
    for (const entry of entries) {
      assert.ok(
        entry.top_logprobs.some((alternative) => alternative.token === entry.token),
        entry.token,
      );
      for (const { token } of entry.top_logprobs) {
        assert.ok(
          token === "</s>" || CHOICES.some((c) => c.startsWith(text + token)),
          `alternative ${JSON.stringify(token)} after ${JSON.stringify(text)}`,
        );
      }
      text += entry.token === "</s>" ? "" : entry.token;
    }
    assert.equal(text, choice.message.content);
  });

  it("byte tokens that would spell invalid UTF-8 are never allowed (surrogates, overlong forms, stray bytes)", async () => {
    // stories260K's byte-fallback tokens: <0xNN> is token 3 + NN. Biased to the top, they would spell
    // U+D800.. (ED A0 80), an overlong 'A' (C1 81) or a lone continuation byte (80); llama.cpp's UTF-8
    // decoder takes them all, and the text would show U+FFFD.
    const byte = (b: number): string => String(3 + b);
    for (const bias of [
      { [byte(0xed)]: 100, [byte(0xa0)]: 100 },
      { [byte(0xc1)]: 100, [byte(0x81)]: 100 },
      { [byte(0x80)]: 100, [byte(0xbf)]: 100 },
      { [byte(0xf4)]: 100, [byte(0x90)]: 100, [byte(0x80)]: 90 },
    ]) {
      for (const endpoint of ENDPOINTS) {
        const [choice] = await client.generate(endpoint, {
          guided_json: { type: "string", maxLength: 3 },
          logit_bias: bias,
          max_tokens: 24,
          temperature: 0,
        });
        const text = choice?.text ?? "";
        assert.equal(choice?.finish, "stop", `${JSON.stringify(bias)} ${endpoint}: ${JSON.stringify(text)}`);
        assert.ok(!text.includes("\ufffd"), `${JSON.stringify(bias)} ${endpoint}: ${JSON.stringify(text)}`);
        const value = JSON.parse(text) as string;
        assert.ok([...value].length <= 3, JSON.stringify(value));
        assert.ok(
          ![...value].some(
            (c) => (c.codePointAt(0) as number) >= 0xd800 && (c.codePointAt(0) as number) <= 0xdfff,
          ),
        );
      }
    }
  });

  it("two constraints in one request are a 400 naming both fields", async () => {
    const pairs: [Body, string, string][] = [
      [
        { guided_json: SMALL_SCHEMA, response_format: { type: "json_object" } },
        "guided_json",
        "response_format",
      ],
      [
        { structured_outputs: { regex: "a" }, guided_choice: ["a"] },
        "guided_choice",
        "structured_outputs.regex",
      ],
      [
        { guided_json: SMALL_SCHEMA, nvext: { guided_json: SMALL_SCHEMA } },
        "guided_json",
        "nvext.guided_json",
      ],
      [
        { structured_outputs: { json_object: true, grammar: YES_NO_GRAMMAR } },
        "structured_outputs.grammar",
        "structured_outputs.json_object",
      ],
    ];
    for (const endpoint of ENDPOINTS) {
      for (const [fields, first, second] of pairs) {
        const { status, json } = await client.post(endpoint, fields);
        assert.equal(status, 400);
        assert.ok(json.message?.includes(first) && json.message.includes(second), json.message);
      }
    }
  });

  it("guided_decoding_backend: our names are accepted, anything else is a 400", async () => {
    for (const backend of ["auto", "gbnf", "llama.cpp", "llamacpp"]) {
      const [choice] = await client.generate("completions", {
        guided_choice: CHOICES,
        guided_decoding_backend: backend,
        temperature: 0,
      });
      assert.ok(CHOICES.includes(choice?.text ?? ""));
    }
    await client.refused(
      "completions",
      { guided_choice: CHOICES, guided_decoding_backend: "xgrammar" },
      "guided_decoding_backend",
      /xgrammar/,
    );
    await client.refused(
      "chat",
      { guided_regex: "a", nvext: { guided_decoding_backend: "outlines" } },
      "nvext.guided_decoding_backend",
    );
  });

  it("every refused schema of the corpus is a 400 naming the keyword and its path", async () => {
    const files = readdirSync(join(projectRoot, "test/fixtures/schemas")).filter((f) =>
      f.startsWith("refuse-"),
    );
    assert.ok(files.length >= 15);
    for (const [i, file] of files.sort().entries()) {
      const {
        schema,
        keyword,
        path: pointer,
      } = JSON.parse(fixture(`schemas/${file}`)) as {
        schema: Record<string, unknown>;
        keyword: string;
        path: string;
      };
      const endpoint = ENDPOINTS[i % 2] as Endpoint;
      const [fields, param] =
        i % 3 === 0
          ? [{ guided_json: schema }, "guided_json"]
          : i % 3 === 1
            ? [
                { response_format: { type: "json_schema", json_schema: { name: "x", schema } } },
                "response_format.json_schema.schema",
              ]
            : [{ structured_outputs: { json: JSON.stringify(schema) } }, "structured_outputs.json"];
      const message = await client.refused(endpoint, fields, param);
      assert.ok(message.includes(keyword) && message.includes(pointer), `${file}: ${message}`);
    }
  });

  it("a malformed grammar or regex is a 400 with the parser's message", async () => {
    await client.refused(
      "completions",
      { guided_grammar: fixture("grammars/malformed.gbnf") },
      "guided_grammar",
      /parse: error parsing grammar: expecting '\)' at end of input \(line \d+, column \d+\)/,
    );
    await client.refused(
      "chat",
      { structured_outputs: { grammar: "root ::= foo" } },
      "structured_outputs.grammar",
      /foo/,
    );
    await client.refused("chat", { guided_regex: "(a" }, "guided_regex");
    await client.refused("completions", { guided_regex: "(a)\\1" }, "guided_regex", /backreference/i);
    // A whitespace pattern that admits anything but JSON whitespace would break the JSON.
    await client.refused(
      "chat",
      { guided_json: SMALL_SCHEMA, guided_whitespace_pattern: "\\s*" },
      "guided_whitespace_pattern",
      /JSON whitespace/,
    );
  });

  it("fields that would break the constraint are a 400 naming the field", async () => {
    const conflicts: [Body, string][] = [
      [{ ignore_eos: true }, "ignore_eos"],
      [{ nvext: { ignore_eos: true } }, "ignore_eos"],
      [{ min_tokens: 4 }, "min_tokens"],
      [{ stop: ["}"] }, "stop"],
      [{ stop_token_ids: [13] }, "stop_token_ids"],
    ];
    for (const endpoint of ENDPOINTS)
      for (const [fields, param] of conflicts)
        await client.refused(endpoint, { guided_json: SMALL_SCHEMA, ...fields }, param);
    // Without a constraint the same fields are fine; an empty stop list is no stop.
    await client.generate("completions", { stop: ["}"], max_tokens: 4 });
    await client.generate("chat", { guided_choice: CHOICES, stop: [], temperature: 0 });
    await client.generate("chat", { guided_choice: CHOICES, repetition_penalty: 1.2, temperature: 0 });
    // Both kinds of penalty apply under a constraint (the native sampler has vLLM's two lists).
    await client.generate("chat", {
      guided_choice: CHOICES,
      repetition_penalty: 1.2,
      frequency_penalty: 0.5,
    });
    await client.generate("chat", { guided_choice: CHOICES, repetition_penalty: 1.2, presence_penalty: 0.5 });
    await client.generate("completions", {
      guided_choice: CHOICES,
      frequency_penalty: 0.5,
      presence_penalty: 0.5,
    });
  });

  it("the openai client's chat.completions.parse() with zodResponseFormat returns a parsed object", async () => {
    const Verdict = z.object({ answer: z.enum(["yes", "no"]), score: z.number().int().min(0).max(9) });
    const completion = await server.client.chat.completions.parse({
      model: TEST_MODEL,
      messages: [{ role: "user", content: client.prompt }],
      response_format: zodResponseFormat(Verdict, "verdict"),
      max_tokens: 100,
      temperature: 0,
    });
    const message = completion.choices[0]?.message;
    assert.equal(completion.choices[0]?.finish_reason, "stop");
    assert.ok(message?.parsed, message?.content ?? "");
    assert.deepEqual(Verdict.parse(JSON.parse(message.content ?? "")), message.parsed);
  });

  it("a sample of the corpus at temperature 1 with 3 seeds: every stopped output validates", async () => {
    const schemas = [
      "api-order",
      "recursive-tree",
      "api-event-union",
      "anyof-primitives",
      "oneof-objects",
      "type-array-union",
      "recursive-linked-list",
      "api-person-deep",
      "api-tool-call",
      "format-date-time",
      "string-pattern-alternation",
      "integer-range",
      "number-unit-interval",
      "allof-with-ref",
      "array-prefix-items",
      "enum-mixed",
      "object-optional-subsets",
    ];
    const { patterns } = JSON.parse(fixture("regex.json")) as { patterns: { pattern: string }[] };
    const regexes = [4, 5, 7, 12, 13, 20, 26, 27, 29, 30, 31, 39].map((i) => patterns[i]?.pattern as string);
    const choiceLists = [CHOICES, ["Once upon a time", "The end."], ['say "hi"', "back\\slash", "new\nline"]];
    const jobs: { label: string; endpoint: Endpoint; fields: Body; check: Check }[] = [
      ...schemas.map((name, i) => {
        const schema = schemaFixture(name);
        const fields =
          i % 2 === 0
            ? { guided_json: schema }
            : { response_format: { type: "json_schema", json_schema: { name: "x", schema } } };
        return { label: name, endpoint: ENDPOINTS[i % 2] as Endpoint, fields, check: jsonCheck(schema) };
      }),
      ...regexes.map((pattern, i) => ({
        label: pattern,
        endpoint: ENDPOINTS[i % 2] as Endpoint,
        fields: { guided_regex: pattern },
        check: fullMatch(pattern),
      })),
      ...choiceLists.map((list, i) => ({
        label: list.join("|"),
        endpoint: ENDPOINTS[i % 2] as Endpoint,
        fields: { guided_choice: list },
        check: (text: string) => list.includes(text),
      })),
    ];
    const counts = { outputs: 0, stopped: 0 };
    const queue = [...jobs];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let job = queue.shift(); job; job = queue.shift()) {
          // n = 3 with seed 1: the choices sample with seeds 1, 2 and 3.
          const choices = await client.generate(job.endpoint, {
            ...job.fields,
            temperature: 1,
            seed: 1,
            n: 3,
            max_tokens: 256,
          });
          counts.outputs += choices.length;
          counts.stopped += assertStoppedValid(job.label, choices, job.check);
        }
      }),
    );
    console.log(`guided corpus over HTTP: ${counts.stopped} of ${counts.outputs} outputs stopped, all valid`);
    assert.equal(counts.outputs, jobs.length * 3);
    assert.ok(counts.stopped >= counts.outputs / 2, `${counts.stopped} of ${counts.outputs} stopped`);
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkJsonSchema } from "../../../ui/src/jsonSchemaCheck.ts";
import { buildRequest, parseStopLines, type Settings } from "../../../ui/src/request.ts";
import {
  checkStructured,
  SettingsError,
  STRUCTURED_EXAMPLES,
  structuredFields,
} from "../../../ui/src/structured.ts";

const schema = JSON.parse(STRUCTURED_EXAMPLES.json_schema) as Record<string, unknown>;

describe("checkJsonSchema", () => {
  it("accepts a value that matches and names each problem of one that does not", () => {
    assert.deepEqual(checkJsonSchema(schema, { name: "Tom", mood: "happy", age: 3 }), []);
    assert.deepEqual(checkJsonSchema(schema, { name: "Tom", mood: "angry", age: 30, extra: 1 }), [
      '$.mood: Instance does not match any of ["happy","sad","sleepy"]',
      "$.age: 30 is greater than 9",
      "$.extra: no value is allowed here",
    ]);
    assert.deepEqual(checkJsonSchema(schema, { name: 5 }), [
      '$: Instance does not have required property "mood"',
      '$: Instance does not have required property "age"',
      '$.name: Instance type "number" is invalid. Expected "string"',
    ]);
    assert.deepEqual(checkJsonSchema(schema, [1]), [
      '$: Instance type "array" is invalid. Expected "object"',
    ]);
  });

  it("follows local $ref, arrays, lengths, patterns and anyOf", () => {
    const listSchema = {
      $defs: { tag: { type: "string", pattern: "^[a-z]+$", maxLength: 3 } },
      type: "array",
      items: { $ref: "#/$defs/tag" },
      minItems: 1,
    };
    assert.deepEqual(checkJsonSchema(listSchema, ["ab", "cd"]), []);
    assert.deepEqual(checkJsonSchema(listSchema, ["abcd", "A"]), [
      "$[0]: String is too long (4 > 3)",
      "$[1]: String does not match pattern",
    ]);
    assert.deepEqual(checkJsonSchema(listSchema, []), ["$: Array has too few items (0 < 1)"]);
    assert.deepEqual(checkJsonSchema({ anyOf: [{ type: "integer" }, { type: "null" }] }, null), []);
    assert.deepEqual(checkJsonSchema({ anyOf: [{ type: "integer" }, { type: "null" }] }, "x"), [
      "$: Instance does not match any subschemas",
    ]);
  });
});

describe("structured output", () => {
  it("sends response_format json_schema, guided_regex or guided_choice", () => {
    assert.deepEqual(structuredFields({ kind: "json_schema", text: '{"title":"A cat!","type":"object"}' }), {
      response_format: {
        type: "json_schema",
        json_schema: { name: "A_cat_", schema: { title: "A cat!", type: "object" } },
      },
    });
    assert.deepEqual(structuredFields({ kind: "regex", text: " [0-9]+ " }), { guided_regex: "[0-9]+" });
    assert.deepEqual(structuredFields({ kind: "choice", text: "yes\n\n no \n" }), {
      guided_choice: ["yes", "no"],
    });
    assert.deepEqual(structuredFields({ kind: "none", text: "ignored" }), {});
    assert.throws(() => structuredFields({ kind: "json_schema", text: "{" }), SettingsError);
    assert.throws(() => structuredFields({ kind: "json_schema", text: "[]" }), /must be a JSON object/);
    assert.throws(() => structuredFields({ kind: "choice", text: "\n" }), SettingsError);
  });

  it("checks a reply: JSON against the schema, the whole text against the regex, or a choice", () => {
    const json = { kind: "json_schema" as const, text: STRUCTURED_EXAMPLES.json_schema };
    assert.equal(checkStructured(json, '{"name":"Tom","mood":"sad","age":4}')?.valid, true);
    assert.match(checkStructured(json, '{"name":"Tom"')?.message ?? "", /^not valid JSON/);
    assert.match(checkStructured(json, '{"name":"Tom"}')?.message ?? "", /required property "mood"/);
    const regex = { kind: "regex" as const, text: "a|b" };
    assert.equal(checkStructured(regex, "a")?.valid, true);
    assert.equal(checkStructured(regex, "ab")?.valid, false, "anchored: ^(?:a|b)$");
    assert.equal(checkStructured({ kind: "choice", text: "yes\nno" }, "no")?.valid, true);
    assert.equal(checkStructured({ kind: "choice", text: "yes\nno" }, "maybe")?.valid, false);
    assert.equal(checkStructured({ kind: "none", text: "" }, "x"), null);
  });
});

describe("buildRequest", () => {
  const settings: Settings = {
    mode: "chat",
    model: "m",
    systemPrompt: " Be brief. ",
    temperature: 0,
    topK: 5,
    maxTokens: 10,
    stop: ["\n\n"],
    structured: { kind: "choice", text: "a\nb" },
    logprobs: true,
  };

  it("builds a streamed chat request with only the fields that are set", () => {
    assert.deepEqual(buildRequest(settings, { messages: [{ role: "user", content: "hi" }] }), {
      path: "v1/chat/completions",
      body: {
        model: "m",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "hi" },
        ],
        max_tokens: 10,
        temperature: 0,
        top_k: 5,
        stop: ["\n\n"],
        logprobs: true,
        top_logprobs: 5,
        guided_choice: ["a", "b"],
        stream: true,
        stream_options: { include_usage: true },
      },
    });
  });

  it("builds a completion request with the legacy logprobs count", () => {
    const request = buildRequest(
      { ...settings, mode: "completion", structured: { kind: "none", text: "" } },
      { prompt: "Once" },
    );
    assert.equal(request.path, "v1/completions");
    assert.equal(request.body.prompt, "Once");
    assert.equal(request.body.logprobs, 5);
    assert.equal("messages" in request.body, false);
  });

  it("reads stop lines with \\n and \\t escapes", () => {
    assert.deepEqual(parseStopLines("END\n\\n\\n\n\na\\tb\nback\\\\n"), ["END", "\n\n", "a\tb", "back\\n"]);
  });
});

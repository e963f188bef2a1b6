import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ChatCompletionRequestSchema } from "../../../src/protocol/chat.ts";
import { CompletionRequestSchema } from "../../../src/protocol/completions.ts";
import { requestFields } from "../../../src/serving/request/requestFields.ts";
import { thrownApiError } from "../../helpers/apiErrors.ts";

const chat = (fields: Record<string, unknown>) =>
  requestFields(
    ChatCompletionRequestSchema.parse({ messages: [{ role: "user", content: "hi" }], ...fields }),
  );
const completion = (fields: Record<string, unknown>) =>
  requestFields(CompletionRequestSchema.parse({ prompt: "p", ...fields }));

describe("requestFields (every alias folded once)", () => {
  it("defaults every field when nothing is given", () => {
    assert.deepEqual(chat({}), {
      maxTokens: undefined,
      topK: -1,
      minP: 0,
      repetitionPenalty: 1,
      minTokens: 0,
      ignoreEos: false,
      maxThinkingTokens: undefined,
      whitespacePattern: undefined,
      whitespacePatternParam: "guided_whitespace_pattern",
      constraint: null,
    });
  });

  it("reads nvext where the top-level field is absent, the top-level field first", () => {
    const nvext = {
      top_k: 3,
      min_p: 0.1,
      repetition_penalty: 1.2,
      min_tokens: 2,
      ignore_eos: true,
      max_thinking_tokens: 5,
      guided_whitespace_pattern: "[ ]?",
    };
    assert.deepEqual(completion({ nvext }), {
      maxTokens: undefined,
      topK: 3,
      minP: 0.1,
      repetitionPenalty: 1.2,
      minTokens: 2,
      ignoreEos: true,
      maxThinkingTokens: 5,
      whitespacePattern: "[ ]?",
      whitespacePatternParam: "nvext.guided_whitespace_pattern",
      constraint: null,
    });
    const both = completion({ nvext, top_k: 4, min_p: 0.2, min_tokens: 1, ignore_eos: false });
    assert.deepEqual([both.topK, both.minP, both.minTokens, both.ignoreEos], [4, 0.2, 1, false]);
  });

  it("takes max_completion_tokens before max_tokens on chat, keeps null (until the context ends)", () => {
    assert.equal(chat({ max_tokens: 5, max_completion_tokens: 7 }).maxTokens, 7);
    assert.equal(chat({ max_tokens: 5 }).maxTokens, 5);
    assert.equal(chat({ max_tokens: null }).maxTokens, null);
    assert.equal(completion({ max_tokens: null }).maxTokens, null);
    assert.equal(completion({ max_tokens: 9 }).maxTokens, 9);
  });

  it("takes the whitespace pattern in its three spellings, in order", () => {
    assert.equal(chat({ structured_outputs: { whitespace_pattern: "c" } }).whitespacePattern, "c");
    assert.equal(
      chat({ nvext: { guided_whitespace_pattern: "b" }, structured_outputs: { whitespace_pattern: "c" } })
        .whitespacePattern,
      "b",
    );
    assert.equal(
      chat({ guided_whitespace_pattern: "a", nvext: { guided_whitespace_pattern: "b" } }).whitespacePattern,
      "a",
    );
    // The spelling that won is the one errors name.
    assert.equal(
      chat({ structured_outputs: { whitespace_pattern: "c" } }).whitespacePatternParam,
      "structured_outputs.whitespace_pattern",
    );
    assert.equal(
      chat({ guided_whitespace_pattern: "a", nvext: { guided_whitespace_pattern: "b" } })
        .whitespacePatternParam,
      "guided_whitespace_pattern",
    );
  });

  it("finds the one guided-decoding constraint in every spelling, with the field it came from", () => {
    const schema = { type: "object" };
    const cases: [Record<string, unknown>, string, string][] = [
      [{ guided_json: schema }, "json_schema", "guided_json"],
      [{ nvext: { guided_regex: "a+" } }, "regex", "nvext.guided_regex"],
      [{ structured_outputs: { choice: ["a", "b"] } }, "choice", "structured_outputs.choice"],
      [{ structured_outputs: { json_object: true } }, "json_object", "structured_outputs.json_object"],
      [{ grammar: 'root ::= "a"' }, "grammar", "grammar"],
      [{ json_schema: schema }, "json_schema", "json_schema"],
      [{ response_format: { type: "json_object" } }, "json_object", "response_format"],
      [{ response_format: { type: "json_object", schema } }, "json_schema", "response_format.schema"],
      [
        { response_format: { type: "json_schema", json_schema: { name: "x", schema } } },
        "json_schema",
        "response_format.json_schema.schema",
      ],
    ];
    for (const [fields, kind, param] of cases) {
      const constraint = chat(fields).constraint;
      assert.deepEqual([constraint?.kind, constraint?.param], [kind, param], JSON.stringify(fields));
    }
    assert.equal(completion({ guided_choice: ["x"] }).constraint?.param, "guided_choice");
    assert.equal(chat({ response_format: { type: "text" } }).constraint, null);
  });

  it("refuses a constraint given twice, an unknown backend and a response_format without its schema", () => {
    const param = (fields: Record<string, unknown>) => {
      const error = thrownApiError(() => chat(fields));
      assert.equal(error.status, 400, JSON.stringify(fields));
      return error.param;
    };
    assert.equal(param({ guided_regex: "a", nvext: { guided_json: {} } }), "nvext.guided_json");
    assert.equal(param({ guided_decoding_backend: "xgrammar" }), "guided_decoding_backend");
    assert.equal(param({ nvext: { guided_decoding_backend: "outlines" } }), "nvext.guided_decoding_backend");
    assert.equal(
      param({ response_format: { type: "json_schema", json_schema: { name: "x" } } }),
      "response_format.json_schema",
    );
    assert.equal(param({ response_format: { type: "text", schema: {} } }), "response_format.schema");
    // vLLM's structured_outputs options this server does not implement: refused, not ignored.
    assert.equal(
      param({ structured_outputs: { structural_tag: '{"type":"structural_tag"}' } }),
      "structured_outputs.structural_tag",
    );
    assert.equal(
      param({ structured_outputs: { json: {}, disable_any_whitespace: true } }),
      "structured_outputs.disable_any_whitespace",
    );
    assert.equal(
      chat({ structured_outputs: { json: {}, disable_any_whitespace: false, disable_fallback: true } })
        .constraint?.kind,
      "json_schema",
    );
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ApiError } from "../../../src/errors.ts";
import { ChatCompletionRequestSchema } from "../../../src/protocol/chat.ts";
import { CompletionRequestSchema } from "../../../src/protocol/completions.ts";
import { checkRequest, forcesToolCall, REQUEST_CHECKS } from "../../../src/serving/request/requestChecks.ts";
import { type CommonRequest, requestFields } from "../../../src/serving/request/requestFields.ts";

const chat = (fields: Record<string, unknown>) =>
  ChatCompletionRequestSchema.parse({ messages: [{ role: "user", content: "hi" }], ...fields });
const completion = (fields: Record<string, unknown>) =>
  CompletionRequestSchema.parse({ prompt: "p", ...fields });

/** The 400 the checks give `body` ([param, message]), or undefined when it passes. */
function refusal(body: CommonRequest): [string | null, string] | undefined {
  try {
    checkRequest(body, requestFields(body));
    return undefined;
  } catch (error) {
    assert.ok(error instanceof ApiError, String(error));
    assert.equal(error.status, 400);
    return [error.param, error.message];
  }
}

const tool = { type: "function", function: { name: "f", parameters: { type: "object" } } };
const forced = { tools: [tool], tool_choice: "required" };

describe("request checks (one list, run once per request)", () => {
  it("lists each check once, in order", () => {
    assert.equal(new Set(REQUEST_CHECKS.map((check) => check.refuses)).size, REQUEST_CHECKS.length);
  });

  it("passes requests without conflicting fields", () => {
    assert.equal(refusal(chat({})), undefined);
    assert.equal(refusal(completion({ best_of: 3, n: 2, echo: true })), undefined);
    assert.equal(refusal(chat({ ...forced, stop: [] })), undefined);
    assert.equal(refusal(chat({ guided_regex: "a+", logprobs: true, top_logprobs: 2 })), undefined);
    assert.equal(refusal(chat({ tool_choice: "none" })), undefined);
  });

  it("refuses each conflict with its message and param", () => {
    const cases: [CommonRequest, string, string][] = [
      [completion({ echo: true, stream: true }), "echo", "'echo' and 'stream' cannot both be true."],
      [
        chat({ stream_options: { include_usage: true } }),
        "stream_options",
        "stream_options is only allowed when stream is true.",
      ],
      [
        completion({ prompt_logprobs: 1, stream: true }),
        "prompt_logprobs",
        "prompt_logprobs are not available when stream is true; send the request without streaming.",
      ],
      [completion({ best_of: 1, n: 2 }), "best_of", "best_of (1) must be at least n (2)."],
      [completion({ best_of: 3, stream: true }), "best_of", "best_of greater than n cannot be streamed."],
      [
        chat({ tool_choice: "required" }),
        "tools",
        'tool_choice "required" needs at least one tool in `tools`.',
      ],
      [chat({ top_logprobs: 2 }), "top_logprobs", "top_logprobs requires logprobs to be true."],
      [
        chat({ ...forced, stop: ["x"] }),
        "stop",
        'stop cannot be combined with tool_choice "required" (a forced tool call): a stop string could end the output before it satisfies the constraint (the constraint ends the output itself).',
      ],
      [
        chat({ ...forced, stop_token_ids: [1] }),
        "stop_token_ids",
        'stop_token_ids cannot be combined with tool_choice "required" (a forced tool call): a stop token could end the output before it satisfies the constraint.',
      ],
      [
        completion({ guided_regex: "a", stop: "x" }),
        "stop",
        "stop cannot be combined with a guided decoding constraint: a stop string could end the output before it satisfies the constraint (the constraint ends the output itself).",
      ],
      [
        chat({ guided_regex: "a", stop_token_ids: [3] }),
        "stop_token_ids",
        "stop_token_ids cannot be combined with a guided decoding constraint: a stop token could end the output before it satisfies the constraint.",
      ],
      [
        chat({ ...forced, guided_regex: "a" }),
        "tool_choice",
        'tool_choice "required" forces a tool call with a grammar and cannot be combined with guided_regex.',
      ],
      [
        chat({ ...forced, ignore_eos: true }),
        "ignore_eos",
        "ignore_eos cannot be combined with a guided decoding constraint.",
      ],
      [
        completion({ guided_choice: ["a"], nvext: { min_tokens: 2 } }),
        "min_tokens",
        "min_tokens cannot be combined with a guided decoding constraint.",
      ],
      [completion({ nvext: { top_k: -2 } }), "top_k", "top_k must be -1 (disabled) or at least 1, got -2."],
    ];
    for (const [body, param, message] of cases) assert.deepEqual(refusal(body), [param, message]);
  });

  it("gives a request with several problems the first in the list", () => {
    assert.equal(refusal(completion({ echo: true, stream: true, best_of: 3 }))?.[0], "echo");
    assert.equal(refusal(chat({ guided_json: {}, stop: "x", ignore_eos: true }))?.[0], "stop");
  });

  it("knows when tool_choice forces a call", () => {
    assert.equal(forcesToolCall(chat(forced)), true);
    assert.equal(
      forcesToolCall(chat({ tools: [tool], tool_choice: { type: "function", function: { name: "f" } } })),
      true,
    );
    assert.equal(forcesToolCall(chat({ tools: [tool], tool_choice: "auto" })), false);
    assert.equal(forcesToolCall(chat({ tools: [tool] })), false);
    assert.equal(forcesToolCall(chat({ tool_choice: "required" })), false);
  });
});

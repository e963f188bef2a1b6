// The thinking-budget aliases on /v1/responses (issue 26): `thinking_token_budget`,
// `reasoning_budget_tokens` and `thinking_budget_tokens` map to the same budget as on chat completions
// (`RequestFields.maxThinkingTokens`), -1 is unlimited, and two spellings that differ are a 400.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ApiError } from "../../../src/errors.ts";
import { ResponseCreateRequestSchema } from "../../../src/protocol/openaiResponses.ts";
import { responsesToChat } from "../../../src/serving/adapters/openaiResponses.ts";
import { requestFields } from "../../../src/serving/request/requestFields.ts";

/** The thinking budget a Responses body runs with. */
function budget(extra: Record<string, unknown>): number | undefined {
  const body = ResponseCreateRequestSchema.parse({ model: "m", input: "hi", ...extra });
  return requestFields(responsesToChat(body)).maxThinkingTokens;
}

describe("/v1/responses thinking budget aliases", () => {
  it("each spelling sets the budget; -1 and absence leave it unlimited", () => {
    assert.equal(budget({}), undefined);
    assert.equal(budget({ thinking_token_budget: 12 }), 12);
    assert.equal(budget({ reasoning_budget_tokens: 7 }), 7);
    assert.equal(budget({ thinking_budget_tokens: 0 }), 0);
    assert.equal(budget({ reasoning_budget_tokens: -1 }), undefined);
    assert.equal(budget({ thinking_token_budget: 5, reasoning_budget_tokens: 5 }), 5);
  });

  it("two spellings that differ are a 400 naming the second", () => {
    assert.throws(
      () => budget({ thinking_token_budget: 5, thinking_budget_tokens: 9 }),
      (error: unknown) =>
        error instanceof ApiError && error.status === 400 && error.param === "thinking_budget_tokens",
    );
  });

  it("a negative vLLM budget, or below -1, is refused by the schema", () => {
    assert.ok(!ResponseCreateRequestSchema.safeParse({ input: "x", thinking_token_budget: -1 }).success);
    assert.ok(!ResponseCreateRequestSchema.safeParse({ input: "x", reasoning_budget_tokens: -2 }).success);
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { ChatCompletionRequestSchema } from "../../../src/protocol/chat.ts";
import { parseBody } from "../../../src/server/validation.ts";
import { thrownApiError } from "../../helpers/apiErrors.ts";

const schema = z.object({
  n: z.number().int().min(1).max(4),
  name: z.string(),
  list: z.array(z.number()).optional(),
});

describe("parseBody", () => {
  it("returns the typed body, defaults applied", () => {
    const body = parseBody(ChatCompletionRequestSchema, { messages: [{ role: "user", content: "hi" }] });
    assert.equal(body.messages[0]?.role, "user");
    assert.deepEqual(parseBody(schema, { n: 2, name: "a", extra: true }), { n: 2, name: "a" });
  });

  it("422 for a body that is not a JSON object", () => {
    for (const body of [null, [], "text", 3]) {
      const error = thrownApiError(() => parseBody(schema, body));
      assert.equal(error.status, 422);
      assert.deepEqual(error.detail?.[0]?.loc, ["body"]);
    }
  });

  it("422 with one FastAPI detail entry per problem for missing fields and wrong types", () => {
    const error = thrownApiError(() => parseBody(schema, { n: "2", list: [1, "x"] }));
    assert.equal(error.status, 422);
    assert.deepEqual(
      error.detail?.map((issue) => issue.loc),
      [
        ["body", "n"],
        ["body", "name"],
        ["body", "list", 1],
      ],
    );
    assert.ok(error.detail?.every((issue) => issue.msg.length > 0 && issue.type.length > 0));
  });

  it("400 naming the field when every problem is a value out of range", () => {
    const error = thrownApiError(() => parseBody(schema, { n: 9, name: "a" }));
    assert.equal(error.status, 400);
    assert.equal(error.param, "n");
    assert.equal(error.code, "invalid_value");
    assert.equal(error.detail, undefined);
  });

  it("422, not 400, when a range problem comes with a type problem", () => {
    const error = thrownApiError(() => parseBody(schema, { n: 9 }));
    assert.equal(error.status, 422);
  });
});

/**
 * A tool's `parameters` schema that cannot be compiled is reported against the client's own field
 * (issue 31): `param: "tools[i].function.parameters"` and a JSON pointer relative to those parameters,
 * not into lmserve's forced call schema (`#/anyOf/0/properties/arguments/...`, `param: "tools"`).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../../src/server/app.ts";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { FakeEngine, fakeContext } from "../helpers/fakeEngine.ts";

const tools = [
  { type: "function", function: { name: "ok", parameters: { type: "object", properties: {} } } },
  {
    type: "function",
    function: {
      name: "bad_pattern",
      parameters: { type: "object", properties: { code: { type: "string", pattern: "(" } } },
    },
  },
  {
    type: "function",
    function: {
      name: "bad_ref",
      parameters: { type: "object", properties: { item: { $ref: "#/$defs/missing" } } },
    },
  },
];

describe("tool parameter schema errors", () => {
  let app: FastifyInstance;
  before(async () => {
    app = buildApp(fakeContext(new FakeEngine({ names: ["fake-model"] })), { logger: false });
    await app.ready();
  });
  after(() => app.close());

  const post = async (toolChoice: unknown, parallel: boolean, list: unknown[] = tools) => {
    const response = await app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: {
        model: "fake-model",
        messages: [{ role: "user", content: "hi" }],
        tools: list,
        tool_choice: toolChoice,
        parallel_tool_calls: parallel,
      },
    });
    assert.equal(response.statusCode, 400, response.body);
    return (response.json() as ErrorBody).error;
  };

  for (const parallel of [false, true]) {
    it(`names tools[i].function.parameters and a pointer into them (required, parallel ${parallel})`, async () => {
      const error = await post("required", parallel, tools.slice(0, 2));
      assert.equal(error.param, "tools[1].function.parameters");
      assert.match(error.message, /at #\/properties\/code\/pattern "\("/);
      assert.doesNotMatch(error.message, /arguments|anyOf|items/);
    });

    it(`names the chosen tool for a named tool_choice (parallel ${parallel})`, async () => {
      const error = await post({ type: "function", function: { name: "bad_ref" } }, parallel);
      assert.equal(error.param, "tools[2].function.parameters");
      assert.match(error.message, /'#\/\$defs\/missing'/);
      assert.doesNotMatch(error.message, /arguments/);
    });
  }
});

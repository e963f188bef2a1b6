import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseAll } from "../../../src/chat/parserDelta.ts";
import { createToolParser } from "../../../src/chat/toolParsers/index.ts";
import { toolChoiceToJsonSchema } from "../../../src/chat/toolSchema.ts";
import { ApiError } from "../../../src/errors.ts";
import { type ChatTool, chatToolSchema, toolChoiceSchema } from "../../../src/protocol/tools.ts";
import { compileConstraint } from "../../../src/structured/index.ts";

const weatherParams = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const tools: ChatTool[] = [
  chatToolSchema.parse({ type: "function", function: { name: "get_weather", parameters: weatherParams } }),
  chatToolSchema.parse({ function: { name: "get_time" } }),
];

const weatherCall = {
  type: "object",
  properties: { name: { type: "string", const: "get_weather" }, arguments: weatherParams },
  required: ["name", "arguments"],
  additionalProperties: false,
};
const timeCall = {
  type: "object",
  properties: { name: { type: "string", const: "get_time" }, arguments: { type: "object", properties: {} } },
  required: ["name", "arguments"],
  additionalProperties: false,
};

function assertBadRequest(fn: () => unknown, param: string): void {
  assert.throws(
    fn,
    (error: unknown) => error instanceof ApiError && error.status === 400 && error.param === param,
  );
}

describe("toolChoiceToJsonSchema", () => {
  it("forces nothing for auto, none and no choice", () => {
    assert.equal(toolChoiceToJsonSchema(tools, "auto", true), undefined);
    assert.equal(toolChoiceToJsonSchema(tools, "none", true), undefined);
    assert.equal(toolChoiceToJsonSchema(tools, undefined, false), undefined);
  });

  it("required: anyOf over the tools, one object or an array", () => {
    assert.deepEqual(toolChoiceToJsonSchema(tools, "required", false), { anyOf: [weatherCall, timeCall] });
    assert.deepEqual(toolChoiceToJsonSchema(tools, "required", true), {
      type: "array",
      items: { anyOf: [weatherCall, timeCall] },
      minItems: 1,
    });
    assert.deepEqual(toolChoiceToJsonSchema(tools.slice(0, 1), "required", false), weatherCall);
  });

  it("named: only that tool", () => {
    const choice = toolChoiceSchema.parse({ function: { name: "get_time" } });
    assert.deepEqual(toolChoiceToJsonSchema(tools, choice, false), timeCall);
    assert.deepEqual(toolChoiceToJsonSchema(tools, choice, true), {
      type: "array",
      items: timeCall,
      minItems: 1,
    });
  });

  it("400 for an unknown named function or a forced choice without tools", () => {
    assertBadRequest(
      () => toolChoiceToJsonSchema(tools, { type: "function", function: { name: "nope" } }, false),
      "tool_choice",
    );
    assertBadRequest(() => toolChoiceToJsonSchema([], "required", false), "tools");
    assertBadRequest(() => toolChoiceToJsonSchema(undefined, "required", false), "tools");
  });

  it("the forced shapes are what the generic parser reads back", () => {
    let n = 0;
    const newId = () => `call_${n++}`;
    const single = parseAll(createToolParser("generic", { newId }), [
      '{"name":"get_weather","arguments":{"city":"Oslo"}}',
    ]);
    assert.deepEqual(single.toolCalls, [
      { id: "call_0", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
    ]);
    const parallel = parseAll(createToolParser("generic", { newId }), [
      '[{"name":"get_time","arguments":{}},{"name":"get_weather","arguments":{"city":"Rome"}}]',
    ]);
    assert.deepEqual(
      parallel.toolCalls.map((call) => [call.function.name, call.function.arguments]),
      [
        ["get_time", "{}"],
        ["get_weather", '{"city":"Rome"}'],
      ],
    );
  });
});

describe("toolChoiceToJsonSchema with local $refs in parameters", () => {
  // Pydantic's shape: definitions under $defs, referenced from the root of `parameters`.
  const pydantic = {
    type: "object",
    properties: {
      item: { $ref: "#/$defs/Item" },
      again: { $ref: "#/properties/item" },
      note: { type: "string", default: { $ref: "#/not/a/schema" } },
    },
    required: ["item"],
    $defs: { Item: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } },
  };
  const withDefs = [
    ...tools,
    chatToolSchema.parse({ type: "function", function: { name: "add", parameters: pydantic } }),
  ];

  /** The value at `keys` below `value`. */
  const dig = (value: unknown, ...keys: (string | number)[]): unknown =>
    keys.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value);

  it("points each $ref where the parameters stand in the forced schema, leaving instance values alone", () => {
    const required = toolChoiceToJsonSchema(withDefs, "required", true);
    const args = dig(required, "items", "anyOf", 2, "properties", "arguments", "properties");
    assert.equal(dig(args, "item", "$ref"), "#/items/anyOf/2/properties/arguments/$defs/Item");
    assert.equal(dig(args, "again", "$ref"), "#/items/anyOf/2/properties/arguments/properties/item");
    assert.deepEqual(dig(args, "note", "default"), { $ref: "#/not/a/schema" });
    const named = toolChoiceToJsonSchema(withDefs, { type: "function", function: { name: "add" } }, false);
    assert.equal(
      dig(named, "properties", "arguments", "properties", "item", "$ref"),
      "#/properties/arguments/$defs/Item",
    );
    // Only JSON pointers are rebased: an anchor is left for the compiler to refuse as anywhere.
    const anchored = chatToolSchema.parse({
      type: "function",
      function: { name: "q", parameters: { type: "object", properties: { q: { $ref: "#qa" } } } },
    });
    const forced = toolChoiceToJsonSchema([anchored], "required", false);
    assert.equal(dig(forced, "properties", "arguments", "properties", "q", "$ref"), "#qa");
    // The caller's parameters are not changed.
    assert.equal(pydantic.properties.item.$ref, "#/$defs/Item");
  });

  it("compiles: the $refs resolve", () => {
    for (const parallel of [false, true])
      for (const choice of ["required", { type: "function", function: { name: "add" } }] as const) {
        const schema = toolChoiceToJsonSchema(withDefs, choice, parallel);
        assert.match(compileConstraint("json_schema", schema).gbnf, /"\\"n\\""/);
      }
  });
});

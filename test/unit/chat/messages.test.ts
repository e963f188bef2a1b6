import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { normalizeMessages } from "../../../src/chat/messages.ts";
import { ApiError } from "../../../src/errors.ts";
import { chatMessageSchema, chatMessagesSchema } from "../../../src/protocol/messages.ts";

const parse = (messages: unknown) => normalizeMessages(chatMessagesSchema.parse(messages));

function assertBadRequest(fn: () => unknown, param: string, message: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof ApiError);
    assert.equal(error.status, 400);
    assert.equal(error.param, param);
    assert.match(error.message, message);
    return true;
  });
}

describe("chatMessageSchema", () => {
  it("accepts every OpenAI role", () => {
    for (const message of [
      { role: "system", content: "s" },
      { role: "developer", content: [{ type: "text", text: "d" }] },
      { role: "user", content: "u", name: "ann" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }],
      },
      { role: "assistant" },
      { role: "tool", content: "r", tool_call_id: "c" },
      { role: "function", name: "f", content: null },
    ]) {
      assert.ok(chatMessageSchema.safeParse(message).success, JSON.stringify(message));
    }
  });

  it("rejects unknown roles, a tool message without tool_call_id, and non-string arguments", () => {
    assert.equal(chatMessageSchema.safeParse({ role: "robot", content: "x" }).success, false);
    assert.equal(chatMessageSchema.safeParse({ role: "tool", content: "x" }).success, false);
    assert.equal(chatMessageSchema.safeParse({ role: "user" }).success, false);
    const badArgs = {
      role: "assistant",
      tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: {} } }],
    };
    assert.equal(chatMessageSchema.safeParse(badArgs).success, false);
    assert.equal(chatMessagesSchema.safeParse([]).success, false);
  });
});

describe("normalizeMessages", () => {
  it("maps developer to system, joins text parts with a newline, keeps names", () => {
    assert.deepEqual(
      parse([
        { role: "developer", content: "Be terse." },
        {
          role: "user",
          name: "ann",
          content: [
            { type: "text", text: "first" },
            { type: "text", text: "second" },
          ],
        },
      ]),
      [
        { role: "system", content: "Be terse." },
        { role: "user", content: "first\nsecond", name: "ann" },
      ],
    );
  });

  it("parses tool call arguments to an object for the template where valid, keeps the string otherwise", () => {
    const [message] = parse([
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "a", type: "function", function: { name: "f", arguments: '{"x": [1, 2]}' } },
          { id: "b", type: "function", function: { name: "g", arguments: "not json" } },
          { id: "c", type: "function", function: { name: "h", arguments: "[1]" } },
        ],
      },
    ]);
    assert.deepEqual(message, {
      role: "assistant",
      content: "",
      tool_calls: [
        { id: "a", type: "function", function: { name: "f", arguments: { x: [1, 2] } } },
        { id: "b", type: "function", function: { name: "g", arguments: "not json" } },
        { id: "c", type: "function", function: { name: "h", arguments: "[1]" } },
      ],
    });
  });

  it("carries tool_call_id, assistant reasoning and refusal text", () => {
    assert.deepEqual(
      parse([
        { role: "assistant", content: [{ type: "refusal", refusal: "No." }], reasoning_content: "Unsafe." },
        { role: "tool", tool_call_id: "call_1", content: [{ type: "text", text: "42" }] },
      ]),
      [
        { role: "assistant", content: "No.", reasoning_content: "Unsafe.", reasoning: "Unsafe." },
        { role: "tool", content: "42", tool_call_id: "call_1" },
      ],
    );
  });

  it("maps the legacy function_call and function role", () => {
    assert.deepEqual(
      parse([
        { role: "user", content: "hi" },
        { role: "assistant", content: null, function_call: { name: "f", arguments: '{"a":1}' } },
        { role: "function", name: "f", content: "done" },
      ]),
      [
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: "",
          tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: { a: 1 } } }],
        },
        { role: "tool", content: "done", name: "f" },
      ],
    );
  });

  it("refuses media parts with a 400 naming the part", () => {
    const image = { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } };
    assertBadRequest(
      () =>
        parse([
          { role: "system", content: "s" },
          { role: "user", content: [{ type: "text", text: "see" }, image] },
        ]),
      "messages[1].content[1]",
      /does not accept images/,
    );
    const audio = { type: "input_audio", input_audio: { data: "AAAA", format: "wav" } };
    assertBadRequest(
      () => parse([{ role: "user", content: [audio] }]),
      "messages[0].content[0]",
      /does not accept audio/,
    );
  });

  it("refuses a refusal part outside an assistant message, and an empty list", () => {
    assertBadRequest(
      () => parse([{ role: "user", content: [{ type: "refusal", refusal: "x" }] }]),
      "messages[0].content[0]",
      /only allowed in an assistant/,
    );
    assertBadRequest(() => normalizeMessages([]), "messages", /at least one/);
  });
});

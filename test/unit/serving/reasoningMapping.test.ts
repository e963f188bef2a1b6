// How the Anthropic and Responses requests map their reasoning fields onto the chat request they run
// as (`messagesToChat`, `responsesToChat`): `thinking` and `output_config.effort` to `reasoning_effort`
// and `nvext.max_thinking_tokens`, thinking blocks and reasoning items to the assistant turn's
// `reasoning_content`, and the encoding behind `include: ["reasoning.encrypted_content"]`.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type AnthropicMessagesRequest,
  AnthropicMessagesRequestSchema,
} from "../../../src/protocol/anthropicMessages.ts";
import { ResponseCreateRequestSchema } from "../../../src/protocol/openaiResponses.ts";
import { messagesToChat } from "../../../src/serving/adapters/anthropicMessages.ts";
import {
  decodeReasoning,
  encodeReasoning,
  responsesToChat,
} from "../../../src/serving/adapters/openaiResponses.ts";
import { thrownApiError } from "../../helpers/apiErrors.ts";

const anthropic = (body: Record<string, unknown>): AnthropicMessagesRequest =>
  AnthropicMessagesRequestSchema.parse({
    max_tokens: 4096,
    messages: [{ role: "user", content: "Hi" }],
    ...body,
  });
const responses = (body: Record<string, unknown>) => responsesToChat(ResponseCreateRequestSchema.parse(body));

describe("messagesToChat: thinking", () => {
  const knobs = (body: Record<string, unknown>) => {
    const chat = messagesToChat(anthropic(body));
    return [chat.reasoning_effort, chat.nvext?.max_thinking_tokens];
  };

  it("maps each thinking kind to the template knob and the thinking budget", () => {
    assert.deepEqual(knobs({}), [undefined, undefined]);
    assert.deepEqual(knobs({ thinking: { type: "enabled", budget_tokens: 2000 } }), ["high", 2000]);
    assert.deepEqual(knobs({ thinking: { type: "adaptive" } }), ["high", undefined]);
    assert.deepEqual(knobs({ thinking: { type: "disabled" } }), ["none", 0]);
    assert.deepEqual(knobs({ thinking: { type: "adaptive" }, output_config: { effort: "max" } }), [
      "xhigh",
      undefined,
    ]);
    assert.deepEqual(knobs({ output_config: { effort: "medium" } }), ["medium", undefined]);
    assert.deepEqual(knobs({ thinking: { type: "disabled" }, output_config: { effort: "high" } }), [
      "none",
      0,
    ]);
  });

  it("refuses Anthropic's bad budgets and between_tools with 400s naming the field", () => {
    const refused = (body: Record<string, unknown>) => {
      const error = thrownApiError(() => messagesToChat(anthropic(body)));
      return [error.status, error.param];
    };
    assert.deepEqual(refused({ thinking: { type: "enabled", budget_tokens: 1023 } }), [
      400,
      "thinking.budget_tokens",
    ]);
    assert.deepEqual(refused({ max_tokens: 1024, thinking: { type: "enabled", budget_tokens: 1024 } }), [
      400,
      "max_tokens",
    ]);
    assert.deepEqual(refused({ thinking: { type: "between_tools" } }), [400, "thinking.type"]);
    assert.equal(
      messagesToChat(anthropic({ max_tokens: 1025, thinking: { type: "enabled", budget_tokens: 1024 } }))
        .nvext?.max_thinking_tokens,
      1024,
    );
  });

  it("an assistant turn's thinking blocks become its reasoning_content; redacted ones are dropped", () => {
    const chat = messagesToChat(
      anthropic({
        messages: [
          { role: "user", content: "Hi" },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "First.", signature: "s1" },
              { type: "redacted_thinking", data: "opaque" },
              { type: "thinking", thinking: "Second.", signature: "s2" },
              { type: "text", text: "Hello." },
            ],
          },
          { role: "assistant", content: [{ type: "thinking", thinking: "Alone.", signature: "s3" }] },
        ],
      }),
    );
    assert.deepEqual(chat.messages.slice(1), [
      { role: "assistant", content: "Hello.", reasoning_content: "First.\n\nSecond." },
      { role: "assistant", content: "", reasoning_content: "Alone." },
    ]);
  });
});

describe("responsesToChat: reasoning items", () => {
  const reasoning = (text: string) => ({
    type: "reasoning",
    summary: [],
    content: [{ type: "reasoning_text", text }],
  });
  const call = (id: string) => ({ type: "function_call", call_id: id, name: "f", arguments: "{}" });

  it("a reasoning item goes to the assistant turn after it: a message, or the function calls it opens", () => {
    const chat = responses({
      input: [
        { role: "user", content: "Hi" },
        reasoning("Think A."),
        call("c1"),
        reasoning("Think B."),
        call("c2"),
        { type: "function_call_output", call_id: "c1", output: "1" },
        { type: "function_call_output", call_id: "c2", output: "2" },
        reasoning("Think C."),
        { role: "assistant", content: "Done." },
        reasoning("Orphan."),
        { role: "user", content: "Again" },
      ],
    });
    const assistants = chat.messages.filter((message) => message.role === "assistant");
    assert.deepEqual(
      assistants.map((message) => (message as { reasoning_content?: string }).reasoning_content),
      ["Think A.\n\nThink B.", "Think C."],
    );
    assert.equal((assistants[0] as { tool_calls: unknown[] }).tool_calls.length, 2);
    assert.ok(!JSON.stringify(chat.messages).includes("Orphan."));
  });

  it("encrypted_content: ours decodes back to the text (used when content is absent); another server's is ignored", () => {
    for (const text of ["", "plain", "ünïcødé \u{1F914}\n</think>"])
      assert.equal(decodeReasoning(encodeReasoning(text)), text);
    assert.equal(decodeReasoning("gAAAAABo-opaque"), undefined);
    const chat = (item: Record<string, unknown>) =>
      responses({
        input: [{ role: "user", content: "Hi" }, { type: "reasoning", summary: [], ...item }, call("c1")],
      }).messages[1] as { reasoning_content?: string };
    assert.equal(
      chat({ encrypted_content: encodeReasoning("Secret-free.") }).reasoning_content,
      "Secret-free.",
    );
    assert.equal(chat({ encrypted_content: "gAAAAABo-opaque" }).reasoning_content, undefined);
    assert.equal(
      chat({
        content: [{ type: "reasoning_text", text: "Content wins." }],
        encrypted_content: encodeReasoning("x"),
      }).reasoning_content,
      "Content wins.",
    );
  });

  it("include: only reasoning.encrypted_content; anything else is a 400 naming the entry", () => {
    assert.doesNotThrow(() => responses({ input: "Hi", include: ["reasoning.encrypted_content"] }));
    const error = thrownApiError(() => responses({ input: "Hi", include: ["file_search_call.results"] }));
    assert.deepEqual([error.status, error.param], [400, "include[0]"]);
  });
});

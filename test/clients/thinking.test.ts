// Client compatibility for reasoning: the official `@anthropic-ai/sdk` (extended thinking on
// /v1/messages) and `openai` (reasoning items on /v1/responses) against stories260K served with
// llama.cpp's Qwen3.5 chat template (`--chat-template`): its generation prompt opens `<think>`, so the
// `qwen3` parser takes the model's text as thinking until the block closes (here: the engine closes it
// at `budget_tokens`) or the output ends. Each answer is checked against what the chat completions
// endpoint's parser separates for the same greedy request, and each history round trip against the
// prompt the same chat messages render to (`/tokenize`).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { projectRoot } from "../../src/paths.ts";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";
import { weatherTool } from "./shared.ts";

const QWEN35 = join(projectRoot, "native/build/llama.cpp/models/templates/Qwen3.5-4B.jinja");
const digest = (text: string) => createHash("sha256").update(text).digest("base64");

/** What the chat completions endpoint's parser separates for a request. */
type Separated = { reasoning: string | null; content: string | null; tool: unknown; completion: number };

describe("reasoning through the official clients (stories260K, Qwen3.5 template)", () => {
  let anthropic: Anthropic;
  let openai: OpenAI;
  const server = useTestServer(() => ["--chat-template", QWEN35, "--max-model-len", "2048"]);
  before(async () => {
    anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  const separated = async (body: Record<string, unknown>): Promise<Separated> => {
    const response = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      temperature: 0,
      ...body,
    });
    const json = (await response.json()) as {
      choices: {
        message: { content: string | null; reasoning_content: string | null; tool_calls?: unknown[] };
      }[];
      usage: { completion_tokens: number };
    };
    assert.equal(response.status, 200);
    const message = json.choices[0]?.message;
    return {
      reasoning: message?.reasoning_content ?? null,
      content: message?.content ?? null,
      tool: message?.tool_calls?.[0] ?? null,
      completion: json.usage.completion_tokens,
    };
  };
  /** The number of prompt tokens chat `messages` render to. */
  const promptTokens = async (messages: unknown[], extra: Record<string, unknown> = {}) => {
    const response = await server.post("/tokenize", { model: TEST_MODEL, messages, ...extra });
    assert.equal(response.status, 200);
    return ((await response.json()) as { count: number }).count;
  };

  const story = "Once upon a time";
  const thinking = { type: "enabled" as const, budget_tokens: 1024 };
  const request = {
    model: TEST_MODEL,
    max_tokens: 1040,
    temperature: 0,
    thinking,
    messages: [{ role: "user" as const, content: story }],
  };

  describe("@anthropic-ai/sdk: extended thinking", () => {
    it("messages.create: a signed thinking block (closed at budget_tokens), then the answer, as the parser splits them", async () => {
      const message = await anthropic.messages.create(request);
      const expected = await separated({
        messages: [{ role: "user", content: story }],
        max_tokens: 1040,
        reasoning_effort: "high",
        nvext: { max_thinking_tokens: 1024 },
      });
      assert.ok(expected.reasoning && expected.content, "the budget closed the block and the model answered");
      assert.deepEqual(message.content, [
        { type: "thinking", thinking: expected.reasoning, signature: digest(expected.reasoning) },
        { type: "text", text: expected.content },
      ]);
      assert.equal(message.stop_reason, "max_tokens");
      assert.equal(message.usage.output_tokens, 1040);
      const thinkingTokens = message.usage.output_tokens_details?.thinking_tokens ?? 0;
      assert.ok(thinkingTokens > 900 && thinkingTokens <= 1040, String(thinkingTokens));
    });

    it("messages.stream: the events in Anthropic's order, and finalMessage() equals the non-streamed message", async () => {
      const plain = await anthropic.messages.create(request);
      const stream = anthropic.messages.stream(request);
      const order: string[] = [];
      for await (const event of stream) {
        const name = event.type === "content_block_delta" ? event.delta.type : event.type;
        if (order.at(-1) !== name || !name.endsWith("_delta")) order.push(name);
        if (event.type === "content_block_start" && event.content_block.type === "thinking")
          assert.equal(event.index, 0);
      }
      assert.deepEqual(order, [
        "message_start",
        "content_block_start",
        "thinking_delta",
        "signature_delta",
        "content_block_stop",
        "content_block_start",
        "text_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
      ]);
      const final = await stream.finalMessage();
      assert.deepEqual(final.content, plain.content);
      assert.deepEqual(final.usage.output_tokens_details, plain.usage.output_tokens_details);
    });

    it("a thinking block sent back in a tool_use turn renders into the prompt (count_tokens), and the next turn thinks", async () => {
      // stories260K's 2048-token context holds one budget's thinking, not the tools preamble beside it.
      const first = await anthropic.messages.create(request);
      const [think] = first.content;
      assert.ok(think?.type === "thinking" && think.thinking.length > 0);
      const call = { id: "toolu_1", name: weatherTool.name, input: { city: "Paris", unit: "celsius" } };
      const history: Anthropic.MessageParam[] = [
        { role: "user", content: story },
        { role: "assistant", content: [think, { type: "tool_use", ...call }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "Sunny" }] },
      ];
      const counted = await anthropic.messages.countTokens({
        model: TEST_MODEL,
        messages: history,
        thinking,
      });
      const chat = (reasoning: string | undefined) => [
        { role: "user", content: story },
        {
          role: "assistant",
          content: null,
          ...(reasoning !== undefined ? { reasoning_content: reasoning } : {}),
          tool_calls: [
            {
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.input) },
            },
          ],
        },
        { role: "tool", tool_call_id: call.id, content: "Sunny" },
      ];
      const extra = { reasoning_effort: "high" };
      assert.equal(counted.input_tokens, await promptTokens(chat(think.thinking), extra));
      assert.ok(
        counted.input_tokens > (await promptTokens(chat(undefined), extra)) + 500,
        "the thinking is in the prompt",
      );
      const second = await anthropic.messages.create({
        ...request,
        thinking: { type: "adaptive" },
        max_tokens: 8,
        messages: history,
      });
      assert.equal(second.usage.input_tokens, counted.input_tokens);
      assert.equal(second.content[0]?.type, "thinking");
    });

    it("thinking errors are the SDK's BadRequestError in Anthropic's shape", async () => {
      for (const bad of [
        { ...request, thinking: { type: "enabled" as const, budget_tokens: 512 } },
        { ...request, max_tokens: 1024 },
      ]) {
        await assert.rejects(anthropic.messages.create(bad), (error: unknown) => {
          assert.ok(error instanceof Anthropic.BadRequestError);
          assert.equal((error.error as { error: { type: string } }).error.type, "invalid_request_error");
          return true;
        });
      }
    });
  });

  describe("openai: Responses reasoning items", () => {
    const body = {
      model: TEST_MODEL,
      input: story,
      reasoning: { effort: "high" as const },
      max_output_tokens: 24,
      temperature: 0,
    };

    it("responses.create: a reasoning item with the parser's text, incomplete when cut inside it; reasoning_tokens", async () => {
      const response = await openai.responses.create(body);
      const expected = await separated({
        messages: [{ role: "user", content: story }],
        max_tokens: 24,
        reasoning_effort: "high",
      });
      assert.ok(expected.reasoning);
      assert.equal(expected.content, null);
      assert.equal(response.status, "incomplete");
      const [item] = response.output;
      assert.ok(item?.type === "reasoning");
      assert.match(item.id, /^rs_/);
      assert.deepEqual(item.content, [{ type: "reasoning_text", text: expected.reasoning }]);
      assert.equal(item.status, "incomplete");
      assert.equal(response.output.length, 1);
      const usage = response.usage;
      assert.equal(usage?.output_tokens, 24);
      assert.ok((usage?.output_tokens_details.reasoning_tokens ?? 0) > 18, JSON.stringify(usage));
      assert.ok((usage?.output_tokens_details.reasoning_tokens ?? 99) <= 24);
    });

    it("responses.stream: reasoning_text deltas assemble to the item, finalResponse() equals the non-streamed", async () => {
      const plain = await openai.responses.create(body);
      const stream = openai.responses.stream(body);
      let text = "";
      const kinds = new Set<string>();
      for await (const event of stream) {
        kinds.add(event.type);
        if (event.type === "response.reasoning_text.delta") text += event.delta;
      }
      for (const kind of [
        "response.output_item.added",
        "response.reasoning_text.done",
        "response.output_item.done",
      ])
        assert.ok(kinds.has(kind), kind);
      const final = await stream.finalResponse();
      const strip = (output: OpenAI.Responses.ResponseOutputItem[]) =>
        output.map((item) => ({ ...item, id: "" }));
      assert.deepEqual(strip(final.output), strip(plain.output));
      const [item] = final.output;
      assert.ok(item?.type === "reasoning");
      assert.equal(text, item.content?.[0]?.text);
      assert.deepEqual(final.usage, plain.usage);
    });

    it("output items sent back in input (with encrypted_content included) render the reasoning into the prompt", async () => {
      const first = await openai.responses.create({ ...body, include: ["reasoning.encrypted_content"] });
      const [item] = first.output;
      assert.ok(item?.type === "reasoning" && typeof item.encrypted_content === "string");
      const reasoning = item.content?.[0]?.text ?? "";
      const call = {
        type: "function_call" as const,
        call_id: "call_1",
        name: "get_weather",
        arguments: '{"city":"Paris","unit":"celsius"}',
      };
      const input = (reasoningItem: OpenAI.Responses.ResponseInputItem) => [
        { role: "user" as const, content: story },
        reasoningItem,
        call,
        { type: "function_call_output" as const, call_id: "call_1", output: "Sunny" },
      ];
      const chat = [
        { role: "user", content: story },
        {
          role: "assistant",
          content: null,
          reasoning_content: reasoning,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: call.name, arguments: call.arguments } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "Sunny" },
      ];
      const expected = await promptTokens(chat, { reasoning_effort: "high" });
      const whole = await openai.responses.create({ ...body, max_output_tokens: 2, input: input(item) });
      assert.equal(whole.usage?.input_tokens, expected);
      // As Codex sends it back: no content, only our encrypted_content.
      const { content: _content, ...encryptedOnly } = item;
      const encrypted = await openai.responses.create({
        ...body,
        max_output_tokens: 2,
        input: input(encryptedOnly),
      });
      assert.equal(encrypted.usage?.input_tokens, expected);
    });
  });
});

/**
 * Reasoning on /v1/messages (Anthropic's extended thinking) and /v1/responses (reasoning items),
 * in-process on the fake engine with the real Qwen3.5 chat template (llama.cpp's copy): its generation
 * prompt opens `<think>` unless `enable_thinking` is false, and it renders an assistant turn's
 * `reasoning_content` after the last user query. The fake writes `Let me think.\n</think>\n\nHello!`
 * when the prompt opened the block (else `Hello!`), so the `qwen3` parser splits off exactly
 * `Let me think.`; the fake tokenizer is one token per character, so the prompt each request rendered
 * is read back exactly and token counts are lengths.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { projectRoot } from "../../src/paths.ts";
import { buildApp } from "../../src/server/app.ts";
import { decodeReasoning, encodeReasoning } from "../../src/serving/adapters/openaiResponses.ts";
import { ModelRegistry } from "../../src/serving/ModelRegistry.ts";
import { SeedSource } from "../../src/serving/request/generationParams.ts";
import { injectedEvents } from "../helpers/fakeApp.ts";
import { FakeEngine, fakeDetokenize } from "../helpers/fakeEngine.ts";

const qwen35 = readFileSync(
  join(projectRoot, "native/build/llama.cpp/models/templates/Qwen3.5-4B.jinja"),
  "utf8",
);
const THOUGHT = "Let me think.";
const ANSWER = "Hello!";
const promptOf = (tokens: readonly number[]) => fakeDetokenize(tokens);
const digest = (text: string) => createHash("sha256").update(text).digest("base64");

/** The JSON `data` payloads of an injected SSE response, in order (read by the web UI's parser). */
async function events(response: LightMyRequestResponse): Promise<Record<string, unknown>[]> {
  return (await injectedEvents(response)).map((event) => JSON.parse(event.data) as Record<string, unknown>);
}

describe("reasoning on /v1/messages and /v1/responses (fake engine, Qwen3.5 template)", () => {
  let app: FastifyInstance;
  let engine: FakeEngine;
  let knobs: FakeEngine;
  const lastPrompt = () => promptOf(engine.submitted.at(-1)?.promptTokens ?? []);
  before(async () => {
    engine = new FakeEngine({
      names: ["thinker"],
      contextSize: 8192,
      text: (request) =>
        promptOf(request.promptTokens).endsWith("<think>\n") ? `${THOUGHT}\n</think>\n\n${ANSWER}` : ANSWER,
    });
    const plain = new FakeEngine({ names: ["plain"], contextSize: 8192 });
    knobs = new FakeEngine({ names: ["knobs"] });
    const registry = new ModelRegistry<FakeEngine>();
    registry.add(engine, { chat: { template: qwen35, trustRequestTemplate: false } });
    registry.add(plain);
    // A template that prints the knobs it is given (no thinking block: no reasoning parser).
    const knobTemplate =
      "{{- 'effort=' ~ (reasoning_effort if reasoning_effort is defined else '-') ~ ' thinking=' ~ ('-' if enable_thinking is not defined else ('on' if enable_thinking else 'off')) -}}";
    registry.add(knobs, { chat: { template: knobTemplate, trustRequestTemplate: false } });
    app = buildApp({ registry, seeds: new SeedSource(0), isReady: () => true }, { logger: false });
    await app.ready();
  });
  after(() => app.close());

  const user = [{ role: "user", content: "Hi" }];
  const messages = (body: Record<string, unknown>) =>
    app.inject({
      method: "POST",
      url: "/v1/messages",
      payload: { model: "thinker", max_tokens: 2048, messages: user, ...body },
    });
  const responses = (body: Record<string, unknown>) =>
    app.inject({ method: "POST", url: "/v1/responses", payload: { model: "thinker", input: "Hi", ...body } });

  describe("/v1/messages thinking", () => {
    const enabled = { type: "enabled", budget_tokens: 1024 };

    it("enabled: the template thinks, a thinking block with a signature comes before the text, the budget is set", async () => {
      const response = await messages({ thinking: enabled });
      assert.equal(response.statusCode, 200, response.body);
      assert.ok(lastPrompt().endsWith("<|im_start|>assistant\n<think>\n"), lastPrompt());
      assert.equal(
        typeof engine.submitted.at(-1)?.injectTokens,
        "function",
        "budget_tokens is the thinking budget",
      );
      const message = response.json() as {
        content: Record<string, unknown>[];
        stop_reason: string;
        usage: { output_tokens: number; output_tokens_details: { thinking_tokens: number } };
      };
      assert.deepEqual(message.content, [
        { type: "thinking", thinking: THOUGHT, signature: digest(THOUGHT) },
        { type: "text", text: ANSWER },
      ]);
      assert.equal(message.stop_reason, "end_turn");
      assert.equal(message.usage.output_tokens, `${THOUGHT}\n</think>\n\n${ANSWER}`.length);
      assert.equal(message.usage.output_tokens_details.thinking_tokens, THOUGHT.length);
    });

    it("enabled, streamed: Anthropic's event order, thinking_delta then signature_delta then stop", async () => {
      const response = await messages({ thinking: enabled, stream: true });
      assert.equal(response.statusCode, 200);
      const all = await events(response);
      const kinds = all.map((event) => {
        const delta = event.delta as { type?: string } | undefined;
        return event.type === "content_block_delta" ? (delta?.type ?? "") : String(event.type);
      });
      const squeezed = kinds.filter((kind, i) => kind !== kinds[i - 1] || !kind.endsWith("_delta"));
      assert.deepEqual(squeezed, [
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
      const starts = all.filter((event) => event.type === "content_block_start");
      assert.deepEqual(starts, [
        {
          type: "content_block_start",
          index: 0,
          content_block: { type: "thinking", thinking: "", signature: "" },
        },
        { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      ]);
      const deltas = all
        .filter((event) => event.type === "content_block_delta")
        .map((event) => event as { index: number; delta: Record<string, string> });
      const thinking = deltas
        .filter((event) => event.delta.type === "thinking_delta")
        .map((event) => event.delta.thinking)
        .join("");
      assert.equal(thinking, THOUGHT);
      assert.ok(
        deltas.filter((event) => event.delta.type === "thinking_delta").every((event) => event.index === 0),
      );
      const signatures = deltas.filter((event) => event.delta.type === "signature_delta");
      assert.deepEqual(signatures, [
        {
          type: "content_block_delta",
          index: 0,
          delta: { type: "signature_delta", signature: digest(THOUGHT) },
        },
      ]);
      const usage = all.find((event) => event.type === "message_delta")?.usage;
      assert.deepEqual(usage, {
        output_tokens: `${THOUGHT}\n</think>\n\n${ANSWER}`.length,
        output_tokens_details: { thinking_tokens: THOUGHT.length },
      });
    });

    it("display omitted: an empty thinking text with the signature, no thinking_delta", async () => {
      const thinking = { ...enabled, display: "omitted" };
      const whole = (await messages({ thinking })).json() as { content: unknown[] };
      assert.deepEqual(whole.content[0], { type: "thinking", thinking: "", signature: digest(THOUGHT) });
      const streamed = await events(await messages({ thinking, stream: true }));
      const deltas = streamed.map((event) => (event.delta as { type?: string } | undefined)?.type);
      assert.ok(!deltas.includes("thinking_delta"));
      assert.ok(deltas.includes("signature_delta"));
    });

    it("adaptive thinks without a budget; disabled closes the block in the prompt", async () => {
      const adaptive = (await messages({ thinking: { type: "adaptive" } })).json() as {
        content: { type: string }[];
      };
      assert.deepEqual(
        adaptive.content.map((block) => block.type),
        ["thinking", "text"],
      );
      assert.equal(engine.submitted.at(-1)?.injectTokens, undefined);
      const disabled = await messages({ thinking: { type: "disabled" } });
      assert.equal(disabled.statusCode, 200);
      assert.ok(lastPrompt().endsWith("<think>\n\n</think>\n\n"), lastPrompt());
      assert.deepEqual((disabled.json() as { content: unknown[] }).content, [{ type: "text", text: ANSWER }]);
    });

    it("without thinking, the template's default decides and the parsed reasoning is returned (as vLLM)", async () => {
      const response = (await messages({})).json() as { content: { type: string; thinking?: string }[] };
      assert.equal(response.content[0]?.thinking, THOUGHT);
    });

    it("count_tokens renders with the thinking knob", async () => {
      const count = async (thinking: unknown) => {
        const response = await app.inject({
          method: "POST",
          url: "/v1/messages/count_tokens",
          payload: { model: "thinker", messages: user, thinking },
        });
        assert.equal(response.statusCode, 200, response.body);
        return (response.json() as { input_tokens: number }).input_tokens;
      };
      assert.equal((await count({ type: "disabled" })) - (await count(enabled)), "\n</think>\n\n".length);
    });

    it("thinking blocks of an assistant turn reach the template as its reasoning; redacted ones are dropped", async () => {
      const history = [
        { role: "user", content: "Weather in Paris?" },
        {
          role: "assistant",
          content: [
            { type: "redacted_thinking", data: "SECRET-OPAQUE" },
            { type: "thinking", thinking: "I should call the tool.", signature: "anything" },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
          ],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "Sunny" }] },
      ];
      const response = await messages({ messages: history, thinking: enabled });
      assert.equal(response.statusCode, 200, response.body);
      const prompt = lastPrompt();
      assert.ok(prompt.includes("<think>\nI should call the tool.\n</think>\n\n"), prompt);
      assert.ok(!prompt.includes("SECRET-OPAQUE"));
      assert.ok(prompt.includes("Sunny"));
    });

    it("output_config.effort reaches the template's knobs (max as xhigh); disabled thinking wins over it", async () => {
      const knobsOf = async (body: Record<string, unknown>) => {
        const response = await messages({ model: "knobs", max_tokens: 8, ...body });
        assert.equal(response.statusCode, 200, response.body);
        return promptOf(knobs.submitted.at(-1)?.promptTokens ?? []);
      };
      assert.equal(await knobsOf({}), "effort=- thinking=-");
      assert.equal(await knobsOf({ output_config: { effort: "max" } }), "effort=xhigh thinking=on");
      assert.equal(await knobsOf({ output_config: { effort: "low" } }), "effort=low thinking=on");
      assert.equal(
        await knobsOf({ output_config: { effort: "high" }, thinking: { type: "disabled" } }),
        "effort=none thinking=off",
      );
      const adaptive = await messages({ thinking: { type: "adaptive" }, output_config: { effort: "low" } });
      assert.equal(adaptive.statusCode, 200);
      const bad = await messages({ model: "knobs", max_tokens: 8, output_config: { effort: "extreme" } });
      assert.equal(bad.statusCode, 400);
    });

    it("output_config.format constrains the text with the schema's grammar", async () => {
      const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };
      const response = await messages({
        model: "knobs",
        max_tokens: 8,
        output_config: { format: { type: "json_schema", schema } },
      });
      assert.equal(response.statusCode, 200, response.body);
      assert.ok(knobs.submitted.at(-1)?.grammar, "a grammar reached the engine");
      await messages({ model: "knobs", max_tokens: 8 });
      assert.equal(knobs.submitted.at(-1)?.grammar, null);
    });

    it("refuses bad thinking configurations with Anthropic's 400s", async () => {
      const refused = async (body: Record<string, unknown>, status: number, text: RegExp) => {
        const response = await messages(body);
        assert.equal(response.statusCode, status, response.body);
        const error = response.json() as { type: string; error: { type: string; message: string } };
        assert.equal(error.type, "error");
        assert.equal(error.error.type, "invalid_request_error");
        assert.match(error.error.message, text);
      };
      await refused(
        { thinking: { type: "enabled", budget_tokens: 1023 } },
        400,
        /greater than or equal to 1024/,
      );
      await refused({ thinking: { type: "enabled", budget_tokens: 2048 } }, 400, /max_tokens.*greater than/);
      await refused({ thinking: { type: "between_tools" } }, 400, /between_tools/);
      await refused({ thinking: { type: "enabled" } }, 400, /budget_tokens/);
      await refused({ thinking: { type: "sometimes" } }, 400, /thinking/);
      await refused({ model: "plain", thinking: enabled }, 400, /does not support thinking/);
      await refused({ model: "plain", thinking: { type: "adaptive" } }, 400, /does not support thinking/);
      const counted = await app.inject({
        method: "POST",
        url: "/v1/messages/count_tokens",
        payload: { model: "thinker", messages: user, thinking: { type: "enabled", budget_tokens: 10 } },
      });
      assert.equal(counted.statusCode, 400);
      assert.equal((counted.json() as { error: { type: string } }).error.type, "invalid_request_error");
      const off = await messages({ model: "plain", thinking: { type: "disabled" } });
      assert.equal(off.statusCode, 200, "disabled is fine on a model that does not think");
      assert.equal(
        (off.json() as { usage: { output_tokens_details: unknown } }).usage.output_tokens_details,
        null,
      );
    });
  });

  describe("/v1/responses reasoning items", () => {
    type Item = {
      type: string;
      id: string;
      status?: string;
      content?: { type: string; text: string }[];
    } & Record<string, unknown>;

    it("a reasoning item with the parsed text comes before the message; reasoning_tokens counts it", async () => {
      const response = await responses({});
      assert.equal(response.statusCode, 200, response.body);
      const body = response.json() as {
        output: Item[];
        usage: { output_tokens: number; output_tokens_details: { reasoning_tokens: number } };
      };
      const [reasoning, message] = body.output;
      assert.match(reasoning?.id ?? "", /^rs_/);
      assert.deepEqual(
        { ...reasoning, id: "" },
        {
          type: "reasoning",
          id: "",
          status: "completed",
          summary: [],
          content: [{ type: "reasoning_text", text: THOUGHT }],
        },
      );
      assert.equal(message?.type, "message");
      assert.equal(message?.content?.[0]?.text, ANSWER);
      assert.equal(body.usage.output_tokens_details.reasoning_tokens, THOUGHT.length);
      assert.equal(body.usage.output_tokens, `${THOUGHT}\n</think>\n\n${ANSWER}`.length);
    });

    it("streamed: the reasoning item's events in OpenAI's order, and the same final output", async () => {
      const response = await responses({ stream: true });
      assert.equal(response.statusCode, 200);
      const all = await events(response);
      const kinds = all.map((event) => String(event.type));
      const squeezed = kinds.filter((kind, i) => kind !== kinds[i - 1] || !kind.endsWith(".delta"));
      assert.deepEqual(squeezed.slice(0, 9), [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
      ]);
      assert.deepEqual(
        all.map((event) => event.sequence_number),
        all.map((_, i) => i),
      );
      const added = all[2] as { item: Item; output_index: number };
      assert.equal(added.item.type, "reasoning");
      assert.equal(added.output_index, 0);
      const text = all
        .filter((event) => event.type === "response.reasoning_text.delta")
        .map((event) => event.delta)
        .join("");
      assert.equal(text, THOUGHT);
      const done = all.find((event) => event.type === "response.reasoning_text.done");
      assert.deepEqual(done, {
        type: "response.reasoning_text.done",
        sequence_number: done?.sequence_number,
        item_id: added.item.id,
        output_index: 0,
        content_index: 0,
        text: THOUGHT,
      });
      const completed = all.at(-1) as { type: string; response: { output: Item[]; usage: unknown } };
      assert.equal(completed.type, "response.completed");
      const whole = (await responses({})).json() as { output: Item[]; usage: unknown };
      const strip = (items: Item[]) => items.map((item) => ({ ...item, id: "" }));
      assert.deepEqual(strip(completed.response.output), strip(whole.output));
      assert.deepEqual(completed.response.usage, whole.usage);
    });

    it("reasoning items in input become the next assistant turn's reasoning (content, or our encrypted_content)", async () => {
      const turn = (reasoning: Record<string, unknown>) => [
        { role: "user", content: "Weather in Paris?" },
        { type: "reasoning", id: "rs_1", summary: [], ...reasoning },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
        { type: "function_call_output", call_id: "call_1", output: "Sunny" },
      ];
      const expected = "<think>\nI should call the tool.\n</think>\n\n";
      const withContent = await responses({
        input: turn({ content: [{ type: "reasoning_text", text: "I should call the tool." }] }),
      });
      assert.equal(withContent.statusCode, 200, withContent.body);
      assert.ok(lastPrompt().includes(expected), lastPrompt());
      const encrypted = await responses({
        input: turn({ encrypted_content: encodeReasoning("I should call the tool.") }),
      });
      assert.equal(encrypted.statusCode, 200, encrypted.body);
      assert.ok(lastPrompt().includes(expected), lastPrompt());
      await responses({ input: turn({ encrypted_content: "gAAAA-someone-elses" }) });
      assert.ok(
        lastPrompt().includes("<think>\n\n</think>\n\n<tool_call>"),
        "another server's value is ignored",
      );
      // A reasoning item that no assistant item follows is dropped.
      await responses({
        input: [
          { role: "user", content: "Hi" },
          { type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "ORPHAN" }] },
          { role: "user", content: "Again" },
        ],
      });
      assert.ok(!lastPrompt().includes("ORPHAN"));
    });

    it("include reasoning.encrypted_content: items carry our encoding of the text; other include values are a 400", async () => {
      const response = await responses({ include: ["reasoning.encrypted_content"] });
      assert.equal(response.statusCode, 200, response.body);
      const [reasoning] = (response.json() as { output: Item[] }).output;
      assert.equal(typeof reasoning?.encrypted_content, "string");
      assert.equal(decodeReasoning(reasoning?.encrypted_content as string), THOUGHT);
      const streamed = await events(
        await responses({ include: ["reasoning.encrypted_content"], stream: true }),
      );
      const done = streamed.find(
        (event) => event.type === "response.output_item.done" && (event.item as Item).type === "reasoning",
      );
      assert.equal(decodeReasoning((done?.item as Item | undefined)?.encrypted_content as string), THOUGHT);
      const plain = (await responses({})).json() as { output: Item[] };
      assert.equal(plain.output[0]?.encrypted_content, undefined);
      const refused = await responses({
        include: ["reasoning.encrypted_content", "message.output_text.logprobs"],
      });
      assert.equal(refused.statusCode, 400);
      assert.equal((refused.json() as { error: { param: string } }).error.param, "include[1]");
    });

    it("reasoning.effort none turns the template's thinking off", async () => {
      const response = await responses({ reasoning: { effort: "none" } });
      assert.ok(lastPrompt().endsWith("<think>\n\n</think>\n\n"));
      const body = response.json() as {
        output: Item[];
        usage: { output_tokens_details: { reasoning_tokens: number } };
      };
      assert.deepEqual(
        body.output.map((item) => item.type),
        ["message"],
      );
      assert.equal(body.usage.output_tokens_details.reasoning_tokens, 0);
    });
  });
});

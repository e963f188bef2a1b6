// Forced tool calls in the family's own markup end to end on stories260K (issue 26 item 4): with a
// real template of llama.cpp's models/templates (Qwen2.5 → hermes, Llama 3.1 → llama3_json, Qwen3-Coder
// → qwen3_coder, MiniMax-M2 → minimax_m2, Devstral → mistral, MiniCPM5 → minicpm5, Kimi K2 → kimi_k2), a
// `required`, named or parallel `tool_choice` is forced by the native-markup grammar, comes back as
// `tool_calls` whose arguments validate against the tool's parameters (ajv), with no content, and the
// stream assembles to the same calls (temperature 0, seed).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type OpenAI from "openai";
import { projectRoot } from "../../src/paths.ts";
import type { ChatCompletionRequest } from "../../src/protocol/chat.ts";
import { resolveToolCalling } from "../../src/serving/guided/chatTools.ts";
import { FORECAST_PARAMETERS } from "../helpers/chatToolRun.ts";
import { ajvValidator } from "../helpers/structuredAjv.ts";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const tools: OpenAI.ChatCompletionFunctionTool[] = [
  { type: "function", function: { name: "get_forecast", parameters: FORECAST_PARAMETERS } },
  {
    type: "function",
    function: { name: "ping", parameters: { type: "object", properties: {}, additionalProperties: false } },
  },
];
const validators: Record<string, (value: unknown) => boolean> = {
  get_forecast: ajvValidator(FORECAST_PARAMETERS),
  ping: ajvValidator({ type: "object", properties: {}, additionalProperties: false }),
};
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Forecast for Paris?" }];
const template = (file: string) =>
  readFileSync(join(projectRoot, "native/build/llama.cpp/models/templates", file), "utf8");

type Call = { name: string; arguments: string };

describe("forced tool calls in the native markup (stories260K, real templates)", () => {
  const server = useTestServer(["--trust-request-chat-template"]);

  const cases: {
    title: string;
    file: string;
    family: string;
    extra: Record<string, unknown>;
    many: boolean;
  }[] = [
    {
      title: "Qwen2.5 (hermes), required",
      file: "Qwen-Qwen2.5-7B-Instruct.jinja",
      family: "hermes",
      extra: { tool_choice: "required" },
      many: false,
    },
    {
      title: "Qwen2.5 (hermes), named",
      file: "Qwen-Qwen2.5-7B-Instruct.jinja",
      family: "hermes",
      extra: { tool_choice: { type: "function", function: { name: "get_forecast" } } },
      many: false,
    },
    {
      title: "Qwen2.5 (hermes), required with parallel_tool_calls",
      file: "Qwen-Qwen2.5-7B-Instruct.jinja",
      family: "hermes",
      extra: { tool_choice: "required", parallel_tool_calls: true },
      many: true,
    },
    {
      title: "Llama 3.1 (llama3_json), named",
      file: "meta-llama-Llama-3.1-8B-Instruct.jinja",
      family: "llama3_json",
      extra: { tool_choice: { type: "function", function: { name: "get_forecast" } } },
      many: false,
    },
    // The XML and token families of toolGrammars.ts (issue 26): plain / bounded strings raw, other
    // parameters JSON; special markers spelled out (stories260K's vocabulary has none of them).
    {
      title: "Qwen3-Coder (qwen3_coder), required",
      file: "Qwen3-Coder.jinja",
      family: "qwen3_coder",
      extra: { tool_choice: "required" },
      many: false,
    },
    {
      title: "Qwen3-Coder (qwen3_coder), required with parallel_tool_calls",
      file: "Qwen3-Coder.jinja",
      family: "qwen3_coder",
      extra: { tool_choice: "required", parallel_tool_calls: true },
      many: true,
    },
    {
      // MiniMax-M2's prompt opens <think>: a small thinking budget closes it, then the call is forced.
      title: "MiniMax-M2 (minimax_m2), named, after a thinking budget",
      file: "MiniMax-M2.jinja",
      family: "minimax_m2",
      extra: {
        tool_choice: { type: "function", function: { name: "get_forecast" } },
        thinking_token_budget: 8,
      },
      many: false,
    },
    {
      title: "Devstral (mistral [TOOL_CALLS]NAME[ARGS]), named",
      file: "unsloth-mistral-Devstral-Small-2507.jinja",
      family: "mistral",
      // A system message of our own: the template's default one is longer than stories260K's context.
      extra: {
        tool_choice: { type: "function", function: { name: "get_forecast" } },
        messages: [{ role: "system", content: "Use the tools." }, ...messages],
      },
      many: false,
    },
    {
      title: "MiniCPM5 (minicpm5), required",
      file: "openbmb-MiniCPM5-1B.jinja",
      family: "minicpm5",
      extra: { tool_choice: "required" },
      many: false,
    },
    {
      title: "MiniCPM5 (minicpm5), named with parallel_tool_calls",
      file: "openbmb-MiniCPM5-1B.jinja",
      family: "minicpm5",
      extra: {
        tool_choice: { type: "function", function: { name: "get_forecast" } },
        parallel_tool_calls: true,
      },
      many: true,
    },
    {
      title: "Kimi K2 (kimi_k2), required",
      file: "moonshotai-Kimi-K2.jinja",
      family: "kimi_k2",
      extra: { tool_choice: "required" },
      many: false,
    },
  ];

  for (const { title, file, family, extra, many } of cases) {
    it(`${title}: tool_calls whose arguments validate, streamed equal to whole`, async () => {
      const body = {
        model: TEST_MODEL,
        messages,
        tools,
        chat_template: template(file),
        temperature: 0,
        seed: 7,
        max_tokens: 300,
        ...extra,
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming;
      // The request is forced in the family's own markup (not the generic JSON fallback).
      const calling = resolveToolCalling(body as unknown as ChatCompletionRequest, undefined, template(file));
      assert.equal(calling.parser, family);
      assert.ok(calling.markup || calling.native, "a native form");
      const plain = await server.client.chat.completions.create(body);
      const choice = plain.choices[0];
      // Several calls: stories260K keeps adding calls until max_tokens (as it never closes a forced
      // array either, see chatTools.ts); every complete call still comes back and validates.
      const finishes = many ? ["tool_calls", "length"] : ["tool_calls"];
      assert.ok(finishes.includes(choice?.finish_reason ?? ""), JSON.stringify(choice));
      assert.ok(!choice?.message.content, "no content beside forced calls");
      const calls: Call[] = (choice?.message.tool_calls ?? [])
        .filter((call) => call.type === "function")
        .map((call) => ({ name: call.function.name, arguments: call.function.arguments }));
      assert.ok(calls.length >= 1);
      if (!many) assert.equal(calls.length, 1);
      const named = (extra.tool_choice as { function?: { name: string } }).function?.name;
      for (const call of calls) {
        if (named) assert.equal(call.name, named);
        const validate = validators[call.name];
        assert.ok(validate, call.name);
        assert.ok(validate(JSON.parse(call.arguments)), call.arguments);
      }
      const streamed: Call[] = [];
      let content = "";
      const stream = await server.client.chat.completions.create({ ...body, stream: true });
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta;
        content += delta?.content ?? "";
        for (const fragment of delta?.tool_calls ?? []) {
          const at = fragment.index;
          streamed[at] ??= { name: "", arguments: "" };
          const entry = streamed[at];
          entry.name += fragment.function?.name ?? "";
          entry.arguments += fragment.function?.arguments ?? "";
        }
      }
      assert.equal(content, "");
      assert.deepEqual(
        streamed.map((call) => [call.name, JSON.parse(call.arguments)]),
        calls.map((call) => [call.name, JSON.parse(call.arguments)]),
      );
    });
  }
});

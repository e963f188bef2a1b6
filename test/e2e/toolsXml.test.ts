// XML-style tool calls end to end on stories260K: a request rendered with a real template of
// llama.cpp's models/templates (Qwen3-Coder, GLM-4.7, MiniMax-M2) gets its parser detected by the
// server, and a regex makes the model write that family's markup: the call comes back parsed, its
// parameters converted to the request tools' types, streamed and not alike, nothing leaking into content.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type OpenAI from "openai";
import { projectRoot } from "../../src/paths.ts";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const forecast: OpenAI.ChatCompletionFunctionTool = {
  type: "function",
  function: {
    name: "get_forecast",
    description: "Weather forecast for a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer" }, hourly: { type: "boolean" } },
      required: ["city", "days"],
    },
  },
};
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Forecast for Paris?" }];
const template = (file: string) =>
  readFileSync(join(projectRoot, "native/build/llama.cpp/models/templates", file), "utf8");
const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Per template: the markup the model is made to write (one call: city Paris, days 3, hourly false). */
const families: Record<string, string> = {
  "Qwen3-Coder.jinja":
    "<tool_call>\n<function=get_forecast>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n" +
    "<parameter=hourly>\nfalse\n</parameter>\n</function>\n</tool_call>",
  "GLM-4.7-Flash.jinja":
    "<tool_call>get_forecast<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value>" +
    "<arg_key>hourly</arg_key><arg_value>false</arg_value></tool_call>",
  "MiniMax-M2.jinja":
    '<minimax:tool_call>\n<invoke name="get_forecast">\n<parameter name="city">Paris</parameter>\n<parameter name="days">3</parameter>\n' +
    '<parameter name="hourly">false</parameter>\n</invoke>\n</minimax:tool_call>',
};

describe("XML-style tool calls (stories260K, real templates)", () => {
  const server = useTestServer(["--trust-request-chat-template"]);

  for (const [file, markup] of Object.entries(families)) {
    it(`${file}: the detected parser returns the typed call, streamed and not`, async () => {
      const body = {
        model: TEST_MODEL,
        messages,
        tools: [forecast],
        chat_template: template(file),
        guided_regex: escapeRegex(`Sure. ${markup}`),
        max_tokens: 400,
        // GLM-4.7 and MiniMax-M2 open a thinking block in the prompt: no thinking, so the regex applies at once.
        nvext: { max_thinking_tokens: 0 },
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming;
      const plain = await server.client.chat.completions.create(body);
      const choice = plain.choices[0];
      assert.equal(choice?.message.content, "Sure. ");
      assert.equal(choice?.finish_reason, "tool_calls");
      const calls = (choice?.message.tool_calls ?? []).filter((call) => call.type === "function");
      assert.deepEqual(
        calls.map((call) => [call.function.name, JSON.parse(call.function.arguments)]),
        [["get_forecast", { city: "Paris", days: 3, hourly: false }]],
      );
      let content = "";
      const streamed: { name: string; arguments: string }[] = [];
      const stream = await server.client.chat.completions.create({ ...body, stream: true });
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta;
        content += delta?.content ?? "";
        for (const fragment of delta?.tool_calls ?? []) {
          const call = streamed[fragment.index];
          if (call) call.arguments += fragment.function?.arguments ?? "";
          else
            streamed.push({
              name: fragment.function?.name ?? "",
              arguments: fragment.function?.arguments ?? "",
            });
        }
      }
      assert.equal(content, "Sure. ");
      assert.deepEqual(
        streamed,
        calls.map((call) => ({ name: call.function.name, arguments: call.function.arguments })),
      );
    });
  }
});

/**
 * Every chat template of llama.cpp's collection (`native/build/llama.cpp/models/templates`, 68 real
 * templates) renders five conversation shapes through the whole pipeline (normalizeMessages, caps probing
 * and polyfills, our jinja extensions), or is a 400 carrying the template's own `raise_exception` text.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Template } from "@huggingface/jinja";
import { normalizeMessages } from "../../../src/chat/messages.ts";
import { renderChatTemplate } from "../../../src/chat/renderChatTemplate.ts";
import { templateCaps } from "../../../src/chat/templateCaps.ts";
import { ApiError } from "../../../src/errors.ts";
import { chatMessagesSchema } from "../../../src/protocol/messages.ts";
import type { ChatTool } from "../../../src/protocol/tools.ts";

const dir = join(import.meta.dirname, "../../../native/build/llama.cpp/models/templates");
const present = existsSync(dir);
const files = present
  ? readdirSync(dir)
      .filter((f) => f.endsWith(".jinja"))
      .sort()
  : [];

const tools: ChatTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the weather of a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
  // No description: gpt-oss, Hermes and functionary concatenate it.
  {
    type: "function",
    function: { name: "get_time", parameters: { type: "object", properties: { city: { type: "string" } } } },
  }, // No parameters at all (OpenAI: an empty parameter list): Seed-OSS iterates parameters.properties.
  { type: "function", function: { name: "get_date" } },
];

const call = (id: string, name: string) => ({
  id,
  type: "function",
  function: { name, arguments: '{"city":"Paris"}' },
});

/** The five shapes: [messages, tools]. */
const shapes: Record<string, [unknown[], ChatTool[] | null]> = {
  plain: [
    [
      { role: "system", content: "You are helpful." },
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "How are you?" },
    ],
    null,
  ],
  tools: [
    [
      { role: "system", content: "You are helpful." },
      { role: "user", content: "Weather in Paris?" },
    ],
    tools,
  ],
  toolCall: [
    [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [call("call_1", "get_weather")] },
      { role: "tool", tool_call_id: "call_1", content: "sunny" },
    ],
    tools,
  ],
  parallel: [
    [
      { role: "user", content: "Weather and time in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [call("call_1", "get_weather"), call("call_2", "get_time")],
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny" },
      { role: "tool", tool_call_id: "call_2", content: "noon" },
    ],
    tools,
  ],
  parts: [
    [
      { role: "system", content: [{ type: "text", text: "You are helpful." }] },
      {
        role: "user",
        content: [
          { type: "text", text: "Hi" },
          { type: "text", text: "there" },
        ],
      },
    ],
    null,
  ],
};

/**
 * The refusals that remain: template, shape, and the template's own message. The Llama 3.x templates
 * raise on two calls in one message (`raise_exception` in the template itself; llama.cpp's caps mark
 * them `supports_parallel_tool_calls = false`).
 */
const REFUSALS: [RegExp, string, RegExp][] = [
  [/^meta-llama-Llama-3\.[123]-/, "parallel", /This model only supports single tool-calls at once!/],
];

function refusalFor(file: string, shape: string): RegExp | undefined {
  return REFUSALS.find(([name, s]) => name.test(file) && s === shape)?.[2];
}

function render(text: string, shape: string): string {
  const [messages, shapeTools] = shapes[shape] as [unknown[], ChatTool[] | null];
  return renderChatTemplate(text, {
    messages: normalizeMessages(chatMessagesSchema.parse(messages)),
    tools: shapeTools,
    addGenerationPrompt: true,
    bosToken: "<s>",
    eosToken: "</s>",
  });
}

describe("llama.cpp's template collection", { skip: present ? false : `no templates at ${dir}` }, () => {
  it("holds the 68 templates measured", () => {
    assert.ok(files.length >= 68, `${files.length} templates`);
  });

  for (const file of files) {
    const text = present ? readFileSync(join(dir, file), "utf8") : "";
    describe(file, () => {
      for (const shape of Object.keys(shapes)) {
        it(shape, () => {
          const refusal = refusalFor(file, shape);
          if (refusal) {
            assert.throws(
              () => render(text, shape),
              (error: unknown) =>
                error instanceof ApiError && error.status === 400 && refusal.test(error.message),
            );
            return;
          }
          const prompt = render(text, shape);
          assert.ok(prompt.length > 0);
          if (shape === "plain" || shape === "parts") assert.ok(prompt.includes("Hi"), prompt);
        });
      }

      it("tool names reach the prompt when the template renders tools", () => {
        const compiled = new Template(text);
        const caps = templateCaps(text, (variables) => compiled.render(variables));
        const prompt = render(text, "tools");
        if (caps.tools) {
          assert.ok(prompt.includes("get_weather") && prompt.includes("get_time"), prompt);
        } else {
          assert.ok(!prompt.includes("get_weather"), "caps.tools false but the names are in the prompt");
        }
      });
    });
  }
});

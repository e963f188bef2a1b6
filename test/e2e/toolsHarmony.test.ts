// gpt-oss's Harmony tool calls end to end (issue 26), on a generated random-weight model with Qwen2's
// real tokenizer and Harmony's markers added as single tokens over Qwen2's padding, served with the real
// gpt-oss template (`openai-gpt-oss-120b.jinja`). A forced `tool_choice` is written by the native Harmony
// grammar (`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}`, after an optional
// analysis message): it comes back as `tool_calls` whose arguments validate against the tool's
// parameters (ajv), streamed equal to whole, with the analysis (if any) as `reasoning_content`. A
// `logit_bias` on the first token of `commentary` takes the model past the optional analysis message at
// once (the city's `maxLength` 6 keeps the word out of the arguments).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type OpenAI from "openai";
import { writeSyntheticModel } from "../../bench/gguf/syntheticModel.ts";
import { projectRoot, sharedModelsDir } from "../../src/paths.ts";
import { type AssembledCall, chatWholeAndStreamed, FORECAST_PARAMETERS } from "../helpers/chatToolRun.ts";
import { ajvValidator } from "../helpers/structuredAjv.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const MODEL = "harmony-qwen";
const validForecast = ajvValidator(FORECAST_PARAMETERS);
const tools: OpenAI.ChatCompletionFunctionTool[] = [
  { type: "function", function: { name: "get_forecast", parameters: FORECAST_PARAMETERS, strict: true } },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } },
];
/** Harmony's markers, each one token over Qwen2's padding ids. */
const HARMONY_TOKENS = {
  151646: "<|start|>",
  151647: "<|channel|>",
  151648: "<|message|>",
  151649: "<|end|>",
  151650: "<|constrain|>",
  151651: "<|call|>",
  151652: "<|return|>",
};

type Call = AssembledCall;

let dir: string;
let model: string;
/** The token that starts `commentary` after `<|channel|>`. */
let commentary: number;

describe("gpt-oss Harmony tool calls (generated Qwen2-vocabulary model, real gpt-oss template)", () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "lmserve-harmony-"));
    model = join(dir, `${MODEL}.gguf`);
    await writeSyntheticModel({
      shape: { arch: "qwen2", hidden: 64, layers: 1, heads: 2, kvHeads: 1, ffn: 128, context: 4096 },
      vocabPath: join(sharedModelsDir, "ggml-vocab-qwen2.gguf"),
      outPath: model,
      weightType: "q8_0",
      seed: 27,
      addedTokens: HARMONY_TOKENS,
    });
  });
  const server = useTestServer(() => [
    model,
    "--served-model-name",
    MODEL,
    "--chat-template",
    join(projectRoot, "native/build/llama.cpp/models/templates/openai-gpt-oss-120b.jinja"),
    "--max-model-len",
    "4096",
  ]);
  before(async () => {
    const response = await server.post("/tokenize", { model: MODEL, prompt: "<|channel|>commentary" });
    const tokens = ((await response.json()) as { tokens: number[] }).tokens;
    assert.equal(tokens[0], 151647, "<|channel|> is one token");
    commentary = tokens[1] ?? -1;
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const [label, toolChoice] of [
    ["required", "required"],
    ["a named function", { type: "function", function: { name: "get_forecast" } }],
  ] as const) {
    it(`tool_choice ${label}: the Harmony grammar writes the call, read back as tool_calls, streamed equal`, async () => {
      const { choice, calls, streamed, content, reasoning } = await chatWholeAndStreamed(server, {
        model: MODEL,
        messages: [{ role: "user", content: "Forecast for Paris?" }],
        tools: label === "required" ? tools.slice(0, 1) : tools,
        tool_choice: toolChoice,
        temperature: 0,
        max_tokens: 200,
        logit_bias: { [commentary]: 100 },
      });
      assert.equal(choice?.finish_reason, "tool_calls", JSON.stringify(choice));
      assert.equal(calls.length, 1, JSON.stringify(choice?.message));
      const call = calls[0] as Call;
      assert.equal(call.name, "get_forecast");
      assert.ok(validForecast(JSON.parse(call.arguments)), call.arguments);
      assert.ok(!(choice?.message.content ?? "").includes("<|channel|>"), choice?.message.content ?? "");
      assert.deepEqual(
        streamed.map((entry) => [entry.name, JSON.parse(entry.arguments)]),
        calls.map((entry) => [entry.name, JSON.parse(entry.arguments)]),
      );
      assert.equal(content, choice?.message.content ?? "");
      const message = choice?.message as { reasoning_content?: string | null } | undefined;
      assert.equal(reasoning, message?.reasoning_content ?? "");
    });
  }

  it("the prompt renders a tool without a description, and its call and result in the history", async () => {
    const response = await server.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: "user", content: "Forecast for Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_1",
              type: "function",
              function: { name: "get_forecast", arguments: '{"city":"Paris","days":2}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: '{"sky":"clear"}' },
      ],
      tools,
      tool_choice: "none",
      max_tokens: 4,
    });
    assert.equal(response.choices.length, 1);
    assert.ok((response.usage?.prompt_tokens ?? 0) > 0);
  });
});

// `strict: true` tools under `tool_choice: "auto"` end to end (issue 26 item 4), on a generated
// random-weight model with Qwen2's real tokenizer and Qwen2.5's `<tool_call>` / `</tool_call>` tokens
// (ids 151657 / 151658, over Qwen2's padding), so that `<tool_call>` is one token: a `logit_bias` on
// it makes the model open a call at once, and the lazy grammar then writes the call in the family's
// markup (Qwen2.5 → hermes, Qwen3-Coder → qwen3_coder), so it comes back as `tool_calls` whose arguments
// validate against the strict tool's parameters (ajv); the stream assembles to the same calls. With the
// marker banned the output is free text, token for token what the same prompt gives unconstrained
// (`tool_choice: "none"` renders the same prompt and parses nothing). A family without a lazy grammar
// refuses `strict` under auto with a 400 naming `tools[0].function.strict`.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type OpenAI from "openai";
import { writeSyntheticModel } from "../../bench/gguf/syntheticModel.ts";
import { projectRoot, sharedModelsDir } from "../../src/paths.ts";
import { type AssembledCall, chatWholeAndStreamed, FORECAST_PARAMETERS } from "../helpers/chatToolRun.ts";
import { ajvValidator } from "../helpers/structuredAjv.ts";
import type { TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const MODEL = "lazy-qwen";
const validForecast = ajvValidator(FORECAST_PARAMETERS);
const tools: OpenAI.ChatCompletionFunctionTool[] = [
  { type: "function", function: { name: "get_forecast", parameters: FORECAST_PARAMETERS, strict: true } },
];
const template = (file: string) =>
  readFileSync(join(projectRoot, "native/build/llama.cpp/models/templates", file), "utf8");

type Call = AssembledCall;

let dir: string;
let model: string;
/** Qwen2's `<tool_call>` token. */
let marker: number;
// Set in the describe (hooks at the top level of a file run side by side under Node 20).
let server: TestServer;

describe("strict tools under tool_choice auto (generated Qwen2-vocabulary model)", () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "lmserve-lazy-"));
    model = join(dir, `${MODEL}.gguf`);
    await writeSyntheticModel({
      shape: { arch: "qwen2", hidden: 64, layers: 1, heads: 2, kvHeads: 1, ffn: 128, context: 2048 },
      vocabPath: join(sharedModelsDir, "ggml-vocab-qwen2.gguf"),
      outPath: model,
      weightType: "q8_0",
      seed: 26,
      addedTokens: { 151657: "<tool_call>", 151658: "</tool_call>" },
    });
  });
  server = useTestServer(() => [
    model,
    "--served-model-name",
    MODEL,
    "--trust-request-chat-template",
    "--max-model-len",
    "2048",
  ]);
  before(async () => {
    const response = await server.post("/tokenize", { model: MODEL, prompt: "<tool_call>" });
    const tokens = ((await response.json()) as { tokens: number[] }).tokens;
    assert.equal(tokens.length, 1, "<tool_call> is one token");
    marker = tokens[0] ?? -1;
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const [family, file] of [
    ["hermes", "Qwen-Qwen2.5-7B-Instruct.jinja"],
    ["qwen3_coder", "Qwen3-Coder.jinja"],
  ] as const) {
    it(`${family}: a call opened by the model is written by the grammar, streamed equal to whole`, async () => {
      const body = {
        model: MODEL,
        messages: [{ role: "user", content: "Forecast for Paris?" }],
        tools,
        chat_template: template(file),
        temperature: 0,
        seed: 3,
        max_tokens: 200,
        parallel_tool_calls: false,
        logit_bias: { [marker]: 100 },
      };
      const { choice, calls, streamed, content } = await chatWholeAndStreamed(server, body);
      assert.equal(choice?.finish_reason, "tool_calls", JSON.stringify(choice));
      assert.equal(calls.length, 1);
      const call = calls[0] as Call;
      assert.equal(call.name, "get_forecast");
      assert.ok(validForecast(JSON.parse(call.arguments)), call.arguments);
      assert.equal(content, choice?.message.content ?? "");
      assert.deepEqual(
        streamed.map((entry) => [entry.name, JSON.parse(entry.arguments)]),
        calls.map((entry) => [entry.name, JSON.parse(entry.arguments)]),
      );
      // Without strict the same opening is only parsed: random weights write no valid call.
      const loose = await server.client.chat.completions.create({
        ...body,
        tools: [{ type: "function", function: { name: "get_forecast", parameters: FORECAST_PARAMETERS } }],
      } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
      assert.notEqual(loose.choices[0]?.finish_reason, "tool_calls", JSON.stringify(loose.choices[0]));
    });
  }

  it("free text stays free: with the marker banned, token for token the unconstrained output", async () => {
    const body = {
      model: MODEL,
      messages: [{ role: "user", content: "Tell me a story." }],
      tools,
      chat_template: template("Qwen-Qwen2.5-7B-Instruct.jinja"),
      temperature: 0.8,
      seed: 11,
      max_tokens: 40,
      logit_bias: { [marker]: -100 },
      logprobs: true,
    };
    const strict = await server.client.chat.completions.create(
      body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming,
    );
    const none = await server.client.chat.completions.create({
      ...body,
      tool_choice: "none",
    } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const text = strict.choices[0]?.message.content ?? "";
    assert.ok(text.length > 0);
    assert.ok(!text.includes("<tool_call>"));
    assert.equal(text, none.choices[0]?.message.content);
    assert.deepEqual(
      strict.choices[0]?.logprobs?.content?.map((entry) => entry.logprob),
      none.choices[0]?.logprobs?.content?.map((entry) => entry.logprob),
    );
  });

  it("a family without a lazy grammar: strict under auto is a 400 naming tools[0].function.strict", async () => {
    const response = await server.post("/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      tools,
      chat_template: template("meta-llama-Llama-3.1-8B-Instruct.jinja"),
      max_tokens: 4,
    });
    assert.equal(response.status, 400);
    const error = ((await response.json()) as { error: { param: string; message: string } }).error;
    assert.equal(error.param, "tools[0].function.strict");
    assert.match(error.message, /llama3_json/);
  });
});

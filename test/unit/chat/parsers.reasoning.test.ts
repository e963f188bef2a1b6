// The reasoning families beyond `<think>` and gpt-oss's Harmony channels, through the shared parser suite
// (whole, one character per feed and split at every boundary must agree), plus detection from the real
// templates and where their prompts leave the thinking block.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  createReasoningParser,
  detectReasoningParser,
  promptThinkingState,
  thinkingMarkup,
} from "../../../src/chat/reasoningParsers/index.ts";
import { detectToolParser } from "../../../src/chat/toolParsers/index.ts";
import { projectRoot } from "../../../src/paths.ts";
import { runParserSuites, type Suite } from "../../helpers/parserSuite.ts";

const weather = { name: "get_weather", args: { city: "Paris" } };

/** One suite per `<think>`-like family: block + answer, no block, cut-off block. */
function familySuite(name: string, open: string, close: string): Suite {
  return {
    parser: { reasoningParser: name },
    cases: [
      {
        title: "thinking + answer",
        output: `${open}\nLet me see.\n${close}\n\nThe answer.`,
        expect: { reasoning: "Let me see.", content: "The answer." },
      },
      { title: "no thinking", output: "Just an answer.", expect: { content: "Just an answer." } },
      {
        title: "thinking cut off",
        output: `${open}Still ${close.slice(0, -1)}`,
        expect: { reasoning: `Still ${close.slice(0, -1)}` },
        leaksAllowed: true,
      },
    ],
  };
}

const harmonyCall =
  '<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}';

runParserSuites(
  {
    seed_oss: familySuite("seed_oss", "<seed:think>", "</seed:think>"),
    mistral: familySuite("mistral", "[THINK]", "[/THINK]"),
    command_a: familySuite("command_a", "<|START_THINKING|>", "<|END_THINKING|>"),
    minimax_m3: familySuite("minimax_m3", "<mm:think>", "</mm:think>"),
    hy_v3: familySuite("hy_v3", "<think:opensource>", "</think:opensource>"),
    gemma4: familySuite("gemma4", "<|channel>thought", "<channel|>"),
    "openai_gptoss + openai": {
      parser: { reasoningParser: "openai_gptoss", toolParser: "openai" },
      cases: [
        {
          title: "analysis then final",
          output:
            "<|channel|>analysis<|message|>The user says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
          expect: { reasoning: "The user says hi.", content: "Hello!" },
        },
        {
          title: "analysis then a call (generation stops at <|call|>)",
          output: harmonyCall,
          expect: { reasoning: "Need weather.", calls: [weather] },
        },
        {
          title: "recipient before the channel, two calls, <|call|> written",
          output:
            '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}<|call|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
          expect: { calls: [weather, weather] },
        },
        {
          title: "a preamble on commentary is content",
          output:
            "<|channel|>commentary<|message|>Checking now.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>",
          expect: { content: "Checking now.Done." },
        },
        {
          title: "output without a header (a forced JSON) is content",
          output: '{"name": "x"}',
          expect: { content: '{"name": "x"}' },
        },
        {
          title: "analysis cut off",
          output: "<|channel|>analysis<|message|>Thinking <|en",
          expect: { reasoning: "Thinking <|en" },
        },
      ],
    },
    "openai_gptoss without tool parsing": {
      parser: { reasoningParser: "openai_gptoss" },
      cases: [
        {
          title: "a call's body is content when calls are not parsed",
          output: harmonyCall,
          expect: { reasoning: "Need weather.", content: '{"city": "Paris"}' },
          leaksAllowed: true,
        },
      ],
    },
    "openai tool parser alone": {
      parser: { toolParser: "openai" },
      cases: [
        {
          title: "reads the analysis and the call by itself",
          output: harmonyCall,
          expect: { reasoning: "Need weather.", calls: [weather] },
        },
      ],
    },
  },
  ["<|channel|>", "<|message|>", "<|end|>", "[THINK]", "<seed:think>", "<|START_THINKING|>", "<mm:think>"],
);

const templates = join(projectRoot, "native/build/llama.cpp/models/templates");
const template = (file: string) => readFileSync(join(templates, file), "utf8");

describe("reasoning family detection and prompt state", () => {
  it("detects each family from its real template", () => {
    const expected: Record<string, string | undefined> = {
      "openai-gpt-oss-120b.jinja": "openai_gptoss",
      "ByteDance-Seed-OSS.jinja": "seed_oss",
      "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral",
      "Cohere2MoE.jinja": "command_a",
      "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command_a",
      "MiniMax-M3.jinja": "minimax_m3",
      "tencent-Hy3.jinja": "hy_v3",
      "google-gemma-4-31B-it.jinja": "gemma4",
      "Qwen-Qwen3-0.6B.jinja": "qwen3",
      "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek_r1",
      "meta-llama-Llama-3.1-8B-Instruct.jinja": undefined,
    };
    for (const [file, name] of Object.entries(expected))
      assert.equal(detectReasoningParser(template(file)), name, file);
    assert.equal(detectToolParser(template("openai-gpt-oss-120b.jinja")), "openai");
  });

  it("reads whether a prompt opened or closed the block, per family's markers", () => {
    const mm = thinkingMarkup("minimax_m3");
    assert.equal(promptThinkingState("]~b]ai\n<mm:think>", mm), "open");
    assert.equal(promptThinkingState("]~b]ai\n</mm:think>", mm), "closed");
    assert.equal(promptThinkingState("]~b]ai\n", mm), undefined);
    const cohere = thinkingMarkup("command_a");
    assert.equal(promptThinkingState("<|CHATBOT_TOKEN|><|START_THINKING|>", cohere), "open");
    assert.equal(
      promptThinkingState("<|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>", cohere),
      "closed",
    );
    const think = thinkingMarkup("qwen3");
    assert.equal(promptThinkingState("<think>\n\n</think>\n\n", think), "closed");
    assert.equal(
      promptThinkingState("<think>old</think>answer<|im_end|>\n<|im_start|>assistant\n", think),
      undefined,
    );
  });

  it("a parser that starts after a closed block reads everything as content", () => {
    const parser = createReasoningParser("qwen3", { thinkingClosed: true });
    assert.deepEqual(parser.feed("<think>x</think>y"), { content: "<think>x</think>y" });
    assert.equal(parser.inReasoning(), false);
  });

  it("the Harmony parser is in reasoning only inside an analysis body", () => {
    const parser = createReasoningParser("openai_gptoss");
    parser.feed("<|channel|>analysis<|message|>Hm");
    assert.equal(parser.inReasoning(), true);
    parser.feed(`${parser.closeText}<|channel|>final<|message|>Hi`);
    assert.equal(parser.inReasoning(), false);
  });
});

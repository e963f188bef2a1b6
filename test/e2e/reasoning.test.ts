// Reasoning end to end on stories260K: request chat templates that mention `<think>` (so the `qwen3`
// reasoning parser is detected), one of which opens the block in the generation prompt so the output
// starts inside it. The close tag reaches the output either written by the model under a GBNF grammar
// or injected by the engine at `nvext.max_thinking_tokens`. Responses are read over raw HTTP (the SDK
// types have no reasoning fields): `reasoning_content` and `reasoning` must carry the same text, and a
// stream must assemble to the non-streamed message.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { projectRoot } from "../../src/paths.ts";
import { ajvValidator } from "../helpers/structuredAjv.ts";
import { readSse, startTestServer, TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const chatml = `{%- for message in messages -%}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}{%- endfor -%}`;
/** A Qwen3-like template whose generation prompt opens the thinking block. */
const opensThinking = `${chatml}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n<think>\\n' -}}{%- endif -%}`;
/** A template that mentions `<think>` (only to drop old thinking) but leaves opening it to the model. */
const mentionsThinking = `{%- for message in messages -%}{%- set content = message.content -%}{%- if '<think>' in content -%}{%- set content = content.split('</think>')[-1] -%}{%- endif -%}{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}`;
const qwen3 = readFileSync(join(projectRoot, "test/fixtures/templates/qwen3.jinja"), "utf8");
const llamaTemplates = join(projectRoot, "native/build/llama.cpp/models/templates");
const deepseekV31 = readFileSync(join(llamaTemplates, "deepseek-ai-DeepSeek-V3.1.jinja"), "utf8");
const glm47 = readFileSync(join(llamaTemplates, "GLM-4.7-Flash.jinja"), "utf8");

/** The message of a response, streamed or not, in one shape. */
type Said = {
  content: string | null;
  reasoning_content: string | null;
  reasoning: string | null;
  tool_calls?: { function: { name: string; arguments: string } }[];
  finish_reason: string;
  completion_tokens: number;
};

type Chunk = {
  choices: {
    delta: {
      content?: string;
      reasoning_content?: string;
      reasoning?: string;
      tool_calls?: { index: number; function: { name?: string; arguments?: string } }[];
    };
    finish_reason: string | null;
  }[];
  usage?: { completion_tokens: number };
};

const append = (text: string | null, piece: string | undefined) =>
  piece === undefined || piece === "" ? text : (text ?? "") + piece;

describe("reasoning (stories260K, <think> templates)", () => {
  const messages = [{ role: "user", content: "Tell me a story." }];

  /** Non-streamed message. */
  const said = async (body: Record<string, unknown>): Promise<Said> => {
    const response = await server.post("/v1/chat/completions", { model: TEST_MODEL, messages, ...body });
    const json = (await response.json()) as {
      message?: string;
      choices: { message: Omit<Said, "finish_reason" | "completion_tokens">; finish_reason: string }[];
      usage: { completion_tokens: number };
    };
    assert.equal(response.status, 200, json.message);
    const choice = json.choices[0];
    assert.ok(choice);
    const { role: _role, ...message } = choice.message as typeof choice.message & { role: string };
    return {
      ...message,
      finish_reason: choice.finish_reason,
      completion_tokens: json.usage.completion_tokens,
    };
  };
  /** Streamed message, assembled from the raw chunks. */
  const streamed = async (body: Record<string, unknown>): Promise<Said> => {
    const response = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages,
      ...body,
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(response.status, 200);
    const out: Said = {
      content: null,
      reasoning_content: null,
      reasoning: null,
      finish_reason: "",
      completion_tokens: 0,
    };
    for (const event of await readSse(response)) {
      if (event === "[DONE]") continue;
      const chunk = event as Chunk;
      if (chunk.usage) out.completion_tokens = chunk.usage.completion_tokens;
      const choice = chunk.choices[0];
      if (!choice) continue;
      const { delta } = choice;
      assert.equal(delta.reasoning, delta.reasoning_content, "both reasoning names carry the same text");
      out.content = append(out.content, delta.content);
      out.reasoning_content = append(out.reasoning_content, delta.reasoning_content);
      out.reasoning = append(out.reasoning, delta.reasoning);
      for (const fragment of delta.tool_calls ?? []) {
        out.tool_calls ??= [];
        const call = out.tool_calls[fragment.index] ?? { function: { name: "", arguments: "" } };
        out.tool_calls[fragment.index] = call;
        call.function.name += fragment.function.name ?? "";
        call.function.arguments += fragment.function.arguments ?? "";
      }
      if (choice.finish_reason) out.finish_reason = choice.finish_reason;
    }
    return out;
  };
  /** Both, asserted equal (tool call ids aside); returns the non-streamed one. */
  const both = async (body: Record<string, unknown>): Promise<Said> => {
    const plain = await said(body);
    const stream = await streamed(body);
    const strip = (s: Said) => ({
      ...s,
      tool_calls: s.tool_calls?.map((call) => ({ function: call.function })),
    });
    assert.deepEqual(strip(stream), strip(plain));
    assert.equal(plain.reasoning, plain.reasoning_content);
    return plain;
  };

  const server = useTestServer(["--trust-request-chat-template"]);

  it("reasoning_effort reaches the template's knobs, through the official client and /tokenize", async () => {
    const knobs =
      "{{- 'effort=' ~ (reasoning_effort if reasoning_effort is defined else '-') ~ ' thinking=' ~ ('-' if enable_thinking is not defined else ('on' if enable_thinking else 'off')) -}}";
    const prompt = async (effort: string) => {
      const tokenized = await server.post("/tokenize", {
        messages: [{ role: "user", content: "Hi" }],
        chat_template: knobs,
        reasoning_effort: effort,
      });
      assert.equal(tokenized.status, 200);
      const { tokens } = (await tokenized.json()) as { tokens: number[] };
      const detokenized = await server.post("/detokenize", { tokens });
      return ((await detokenized.json()) as { prompt: string }).prompt.trim();
    };
    assert.equal(await prompt("none"), "effort=none thinking=off");
    assert.equal(await prompt("high"), "effort=high thinking=on");
    const refused = await server.post("/v1/chat/completions", {
      messages: [{ role: "user", content: "Hi" }],
      reasoning_effort: "extreme",
    });
    assert.equal(refused.status, 422);
    const reply = await server.client.chat.completions.create({
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Hi" }],
      reasoning_effort: "low",
      max_tokens: 2,
    });
    assert.equal(reply.choices.length, 1);
  });

  it("a prompt that opened <think> makes the whole unclosed output reasoning", async () => {
    const out = await both({ chat_template: opensThinking, max_tokens: 16, temperature: 0 });
    assert.ok((out.reasoning ?? "").length > 0);
    assert.equal(out.content, null);
    assert.equal(out.finish_reason, "length");
  });

  it("the model's own </think> (forced by a GBNF grammar) splits reasoning from content", async () => {
    const grammar = 'root ::= "The cat sat down." "\\n</think>\\n\\n" [a-z ]{1,20} "."';
    const out = await both({ chat_template: opensThinking, guided_grammar: grammar, temperature: 0 });
    assert.equal(out.reasoning, "The cat sat down.");
    assert.match(out.content ?? "", /^[a-z ]{1,20}\.$/);
    // Without a prompt that opened it, the model opens the block itself.
    const opening = 'root ::= "<think>\\nHmm.\\n</think>\\n\\nYes."';
    const own = await both({ chat_template: mentionsThinking, guided_grammar: opening, temperature: 0 });
    assert.deepEqual([own.reasoning, own.content], ["Hmm.", "Yes."]);
  });

  it("nvext.max_thinking_tokens closes the block at the budget and the model answers", async () => {
    const unbounded = await said({ chat_template: opensThinking, max_tokens: 40, temperature: 0 });
    const body = {
      chat_template: opensThinking,
      max_tokens: 40,
      temperature: 0,
      nvext: { max_thinking_tokens: 6 },
    };
    const out = await both(body);
    assert.ok((out.reasoning ?? "").length > 0);
    assert.ok((unbounded.reasoning ?? "").startsWith(out.reasoning ?? "-"), "the same thinking, cut short");
    assert.ok((out.reasoning ?? "").length < (unbounded.reasoning ?? "").length);
    assert.ok((out.content ?? "").length > 0, "an answer after the forced close");
    assert.equal(out.completion_tokens, 40, "injected close tokens count as completion tokens");
    const none = await both({ ...body, nvext: { max_thinking_tokens: 0 } });
    assert.equal(none.reasoning, null);
    assert.ok((none.content ?? "").length > 0);
  });

  it("thinking_token_budget and reasoning_budget_tokens are nvext.max_thinking_tokens; conflicts are a 400", async () => {
    const body = { chat_template: opensThinking, max_tokens: 40, temperature: 0 };
    const reference = await said({ ...body, nvext: { max_thinking_tokens: 6 } });
    for (const alias of [
      { thinking_token_budget: 6 },
      { reasoning_budget_tokens: 6 },
      { thinking_budget_tokens: 6 },
      { thinking_token_budget: 6, nvext: { max_thinking_tokens: 6 } },
    ]) {
      assert.deepEqual(await both({ ...body, ...alias }), reference, JSON.stringify(alias));
    }
    const unlimited = await said({ ...body, reasoning_budget_tokens: -1 });
    assert.equal(unlimited.content, null, "-1 is llama-server's unlimited");
    const refused = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages,
      ...body,
      thinking_token_budget: 4,
      nvext: { max_thinking_tokens: 6 },
    });
    assert.equal(refused.status, 400);
    assert.equal(
      ((await refused.json()) as { error: { param: string } }).error.param,
      "thinking_token_budget",
    );
  });

  it("a JSON schema applies to the answer after the thinking, streamed and not", async () => {
    const schema = {
      type: "object",
      properties: { mood: { enum: ["happy", "sad"] }, age: { type: "integer", minimum: 1, maximum: 9 } },
      required: ["mood", "age"],
      additionalProperties: false,
    };
    const out = await both({
      chat_template: opensThinking,
      response_format: { type: "json_schema", json_schema: { name: "character", schema } },
      nvext: { max_thinking_tokens: 5 },
      max_tokens: 80,
      temperature: 0,
    });
    assert.ok((out.reasoning ?? "").length > 0);
    assert.ok(ajvValidator(schema)(JSON.parse(out.content ?? "")), out.content ?? "");
    assert.equal(out.finish_reason, "stop");
  });

  it("a forced tool call comes after the thinking", async () => {
    const parameters = {
      type: "object",
      properties: { city: { type: "string", maxLength: 12 } },
      required: ["city"],
      additionalProperties: false,
    };
    const out = await both({
      chat_template: opensThinking,
      tools: [{ type: "function", function: { name: "get_weather", parameters } }],
      tool_choice: "required",
      nvext: { max_thinking_tokens: 4 },
      max_tokens: 80,
      temperature: 0,
    });
    assert.ok((out.reasoning ?? "").length > 0);
    assert.equal(out.finish_reason, "tool_calls");
    assert.equal(out.content, null);
    const call = out.tool_calls?.[0]?.function;
    assert.equal(call?.name, "get_weather");
    assert.ok(ajvValidator(parameters)(JSON.parse(call?.arguments ?? "")));
  });

  it("chat_template_kwargs enable_thinking false (Qwen3 template) gives plain content", async () => {
    const out = await both({
      chat_template: qwen3,
      chat_template_kwargs: { enable_thinking: false },
      max_tokens: 12,
      temperature: 0,
    });
    assert.equal(out.reasoning, null);
    assert.ok((out.content ?? "").length > 0);
  });

  it("guided_regex with thinking off (the prompt closed the block) constrains the whole answer", async () => {
    const regex = "[a-z]{3,8}";
    for (const template of [qwen3, deepseekV31, glm47]) {
      const out = await both({
        chat_template: template,
        reasoning_effort: "none",
        guided_regex: regex,
        max_tokens: 20,
        temperature: 0,
      });
      assert.equal(out.reasoning, null);
      assert.match(out.content ?? "", /^[a-z]{3,8}$/);
      assert.equal(out.finish_reason, "stop");
    }
  });

  it("thinking off: a regex that admits '<' never opens a thinking block (n=16, sampled)", async () => {
    const response = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages,
      chat_template: glm47,
      reasoning_effort: "none",
      guided_regex: "[<>/a-z]{2,10}",
      max_tokens: 30,
      n: 16,
      temperature: 2,
      top_k: 4,
      seed: 7,
    });
    const json = (await response.json()) as {
      choices: { message: { content: string | null; reasoning_content: string | null } }[];
    };
    assert.equal(response.status, 200);
    for (const choice of json.choices) {
      assert.equal(choice.message.reasoning_content, null);
      assert.match(choice.message.content ?? "", /^[<>/a-z]{2,10}$/);
    }
  });

  it("guided_regex with thinking on: bounded reasoning, then the constrained answer", async () => {
    // The prompt opens the block and the random model never closes it: the bound closes it.
    for (const template of [opensThinking, deepseekV31, glm47]) {
      const out = await both({
        chat_template: template,
        reasoning_effort: "high",
        guided_regex: "[a-z]{3,8}",
        max_tokens: 60,
        temperature: 0,
      });
      assert.ok((out.reasoning ?? "").length > 0);
      assert.match(out.content ?? "", /^[a-z]{3,8}$/);
      assert.equal(out.finish_reason, "stop");
    }
  });

  it("refuses max_thinking_tokens with a GBNF grammar, which decides the thinking itself", async () => {
    const response = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages,
      chat_template: opensThinking,
      guided_grammar: 'root ::= "a"',
      nvext: { max_thinking_tokens: 3 },
    });
    assert.equal(response.status, 400);
    assert.equal(
      ((await response.json()) as { error: { param: string } }).error.param,
      "nvext.max_thinking_tokens",
    );
  });
});

describe("--reasoning-parser", () => {
  it("deepseek_r1 parses a template without <think>: output starts as reasoning", async () => {
    const server = await startTestServer([
      "--reasoning-parser",
      "deepseek_r1",
      "--trust-request-chat-template",
    ]);
    try {
      const response = await server.post("/v1/chat/completions", {
        model: TEST_MODEL,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 30,
        temperature: 0,
        nvext: { max_thinking_tokens: 5 },
      });
      const json = (await response.json()) as {
        choices: { message: { content: string | null; reasoning_content: string | null } }[];
      };
      const message = json.choices[0]?.message;
      assert.ok((message?.reasoning_content ?? "").length > 0);
      assert.ok((message?.content ?? "").length > 0);
    } finally {
      await server.stop();
    }
  });
});

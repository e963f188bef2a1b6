// The reasoning families of llama.cpp's collection beyond `<think>` end to end on stories260K (issue 26):
// each real template as the request's `chat_template`, its reasoning parser detected from it. A raw GBNF
// grammar writes the family's own markup (the model then writes what that family writes), or the prompt
// opens the block and `thinking_token_budget` closes it with the family's close text; reasoning and
// content come back split, under both of vLLM's names, and the stream assembles to the whole message.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { projectRoot } from "../../src/paths.ts";
import { readSse, TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const template = (file: string) =>
  readFileSync(join(projectRoot, "native/build/llama.cpp/models/templates", file), "utf8");

type Said = { content: string | null; reasoning: string | null; finish_reason: string };
type Chunk = {
  choices: {
    delta: { content?: string; reasoning_content?: string; reasoning?: string };
    finish_reason: string | null;
  }[];
};
const append = (text: string | null, piece: string | undefined) =>
  piece === undefined || piece === "" ? text : (text ?? "") + piece;

describe("reasoning families (stories260K, real templates)", () => {
  const server = useTestServer(["--trust-request-chat-template"]);
  const messages = [{ role: "user", content: "Tell me a story." }];

  /** The non-streamed message and the streamed one, asserted equal. */
  const both = async (body: Record<string, unknown>): Promise<Said> => {
    const request = { model: TEST_MODEL, messages, temperature: 0, seed: 3, ...body };
    const response = await server.post("/v1/chat/completions", request);
    const json = (await response.json()) as {
      message?: string;
      choices: {
        message: { content: string | null; reasoning_content: string | null; reasoning: string | null };
        finish_reason: string;
      }[];
    };
    assert.equal(response.status, 200, json.message);
    const choice = json.choices[0];
    assert.ok(choice);
    assert.equal(choice.message.reasoning, choice.message.reasoning_content);
    const plain: Said = {
      content: choice.message.content,
      reasoning: choice.message.reasoning_content,
      finish_reason: choice.finish_reason,
    };
    const stream = await server.post("/v1/chat/completions", { ...request, stream: true });
    assert.equal(stream.status, 200);
    const streamed: Said = { content: null, reasoning: null, finish_reason: "" };
    for (const event of await readSse(stream)) {
      if (event === "[DONE]") continue;
      const part = (event as Chunk).choices[0];
      if (!part) continue;
      assert.equal(part.delta.reasoning, part.delta.reasoning_content);
      streamed.content = append(streamed.content, part.delta.content);
      streamed.reasoning = append(streamed.reasoning, part.delta.reasoning_content);
      if (part.finish_reason) streamed.finish_reason = part.finish_reason;
    }
    assert.deepEqual(streamed, plain, "the stream assembles to the whole message");
    return plain;
  };

  const written: { file: string; grammar: string; content: string }[] = [
    {
      file: "Kimi-K2-Thinking.jinja",
      // kimi_k2: reasoning from the output's start (the model may leave out <think>).
      grammar: 'root ::= "Hmm." "</think>" "Yes."',
      content: "Yes.",
    },
    {
      file: "upstage-Solar-Open-100B.jinja",
      grammar: 'root ::= "<|think|>Hmm.<|end|><|begin|>assistant<|content|>Yes."',
      content: "Yes.",
    },
    {
      file: "ibm-granite-granite-3.3-2B-Instruct.jinja",
      grammar: 'root ::= "Here is my thought process: Hmm. Here is my response: Yes."',
      content: "Yes.",
    },
    {
      file: "ibm-granite-granite-3.3-2B-Instruct.jinja",
      grammar: 'root ::= "<think>Hmm.</think><response>Yes.</response>"',
      content: "Yes.",
    },
    {
      // Apriel 1.6's generation prompt ends "Here are my reasoning steps:\n": the output starts inside.
      file: "Apriel-1.6-15b-Thinker-fixed.jinja",
      grammar: 'root ::= "Hmm.\\n[BEGIN FINAL RESPONSE]\\nYes.\\n[END FINAL RESPONSE]"',
      content: "Yes.\n",
    },
    {
      // Kimi K3's generation prompt opens the think element (thinking on by default).
      file: "Kimi-K3.jinja",
      grammar: 'root ::= "Hmm.<|close|>think<|sep|><|open|>response<|sep|>Yes.<|close|>response<|sep|>"',
      content: "Yes.",
    },
  ];

  for (const { file, grammar, content } of written) {
    it(`${file}: the family's markup written by a grammar splits into reasoning and content`, async () => {
      const out = await both({ chat_template: template(file), guided_grammar: grammar, max_tokens: 120 });
      assert.deepEqual([out.reasoning, out.content], ["Hmm.", content]);
    });
  }

  // Kimi-K2 Thinking reads the output as reasoning from its start; the prompts of Kimi K3 and Apriel 1.6
  // open the block. The close texts are spelled out in stories260K's vocabulary (many tokens).
  for (const file of ["Kimi-K2-Thinking.jinja", "Kimi-K3.jinja", "Apriel-1.6-15b-Thinker-fixed.jinja"]) {
    it(`${file}: thinking_token_budget closes the block with the family's close text`, async () => {
      const body = { chat_template: template(file), max_tokens: 80, thinking_token_budget: 5 };
      const out = await both(body);
      assert.ok((out.reasoning ?? "").length > 0, "reasoning before the forced close");
      assert.ok((out.content ?? "").length > 0, `an answer after it: ${JSON.stringify(out)}`);
      for (const marker of ["</think>", "<|close|>think", "[BEGIN FINAL RESPONSE]"]) {
        assert.ok(!(out.content ?? "").includes(marker), "the close text is not content");
      }
    });
  }
});

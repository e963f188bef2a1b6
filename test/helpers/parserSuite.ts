// The harness of the shared output-parser suite: each case's recorded model output is parsed whole, one
// character at a time, and split in two at every boundary, which must all give the same result; the
// whole result must equal the expectation, ids come from the injected counter, and content leaks no markup.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ChatOutputParserOptions, createChatOutputParser } from "../../src/chat/outputParser.ts";
import { type ParsedOutput, parseAll } from "../../src/chat/parserDelta.ts";

/** What a case expects: content, reasoning and the calls with their parsed arguments (absent: none). */
export type Expected = {
  content?: string;
  reasoning?: string;
  calls?: { name: string; args: Record<string, unknown> }[];
};
/** One recorded output; `leaksAllowed` lets content hold markup (malformed calls fall back to content). */
export type Case = { title: string; output: string; expect: Expected; leaksAllowed?: boolean };
/** A parser configuration and its cases. */
export type Suite = { parser: ChatOutputParserOptions; cases: Case[] };

/** The parse of `result` in the shape of {@link Expected}. */
export function summarize(result: ParsedOutput): Expected {
  const out: Expected = {};
  if (result.content !== null) out.content = result.content;
  if (result.reasoning !== null) out.reasoning = result.reasoning;
  if (result.toolCalls.length > 0) {
    out.calls = result.toolCalls.map((call) => ({
      name: call.function.name,
      args: JSON.parse(call.function.arguments) as Record<string, unknown>,
    }));
  }
  return out;
}

/** Feeds `chunks` to a fresh parser chain built from `options` (ids `call_0`, `call_1`, …). */
export function runParser(options: ChatOutputParserOptions, chunks: string[]): ParsedOutput {
  let n = 0;
  return parseAll(createChatOutputParser({ ...options, newId: () => `call_${n++}` }), chunks);
}

/**
 * Registers one `describe` per suite and one `it` per case. `markup` lists the tags that must never reach
 * `content` unless the case allows leaks.
 */
export function runParserSuites(suites: Record<string, Suite>, markup: readonly string[]): void {
  for (const [name, suite] of Object.entries(suites)) {
    describe(`output parser: ${name}`, () => {
      for (const testCase of suite.cases) {
        it(testCase.title, () => {
          const whole = runParser(suite.parser, [testCase.output]);
          assert.deepEqual(summarize(whole), testCase.expect);
          assert.deepEqual(
            whole.toolCalls.map((call) => [call.id, call.type]),
            whole.toolCalls.map((_, i) => [`call_${i}`, "function"]),
          );
          if (!testCase.leaksAllowed) {
            for (const tag of markup) assert.ok(!(whole.content ?? "").includes(tag), `content leaks ${tag}`);
          }
          const chars = [...testCase.output];
          assert.deepEqual(runParser(suite.parser, chars), whole, "one character per feed");
          for (let k = 1; k < testCase.output.length; k++) {
            const split = [testCase.output.slice(0, k), testCase.output.slice(k)];
            assert.deepEqual(
              runParser(suite.parser, split),
              whole,
              `split at ${k}: ${JSON.stringify(split)}`,
            );
          }
        });
      }
    });
  }
}

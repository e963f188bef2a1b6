/**
 * Lazy grammars (native `LazyStart`, constraint.h; llama.cpp's `grammar_lazy` with trigger words): on
 * stories260K's vocabulary, a sampler drawing greedily from rows that each favour one token shows that
 * the output is free text (exactly the favoured tokens, which the grammar would never allow) until a
 * trigger appears; from the trigger on, the grammar constrains (the favoured token is replaced by one the
 * grammar allows); a trigger inside the skipped thinking block starts nothing; and a token that completes
 * a trigger the grammar refuses to go on from is never drawn.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ModelHost } from "../../../src/engine/ModelHost.ts";
import type { NativeSamplerConfig } from "../../../src/engine/native.ts";
import { sharedModelsDir } from "../../../src/paths.ts";

let host: ModelHost;

before(async () => {
  host = await ModelHost.load({
    modelPath: join(sharedModelsDir, "stories260K.gguf"),
    sequences: 1,
    maxModelLen: 256,
    threads: 1,
    device: "cpu",
  });
});

after(() => {
  host?.dispose();
});

/** `text`'s tokens without the SentencePiece leading space. */
function pieces(text: string): number[] {
  const space = host.tokenize(" ", false)[0];
  const ids = Array.from(host.tokenize(text, false));
  return ids[0] === space && !text.startsWith(" ") ? ids.slice(1) : ids;
}

/** One row per token of `favoured`: that token at 10, every other at 0. */
function rows(favoured: readonly number[]): Float32Array {
  const n = host.vocabularySize;
  const out = new Float32Array(favoured.length * n);
  favoured.forEach((token, i) => {
    out[i * n + token] = 10;
  });
  return out;
}

/** A greedy sampler under `gbnf`, lazy on `triggers` (with `thinking`, the skipped block). */
function config(
  gbnf: string,
  triggers: string[],
  thinking?: { open: string; close: string; opened: boolean },
): NativeSamplerConfig {
  return {
    temperature: 0,
    topK: 0,
    topP: 1,
    minP: 0,
    repetitionPenalty: 1,
    frequencyPenalty: 0,
    presencePenalty: 0,
    seed: 1,
    minTokens: 0,
    grammar: gbnf,
    grammarTriggers: triggers,
    ...(thinking
      ? {
          grammarBlockOpen: thinking.open,
          grammarBlockClose: thinking.close,
          grammarStartsInBlock: thinking.opened,
        }
      : {}),
  };
}

const GRAMMAR = 'root ::= "<tool_call>x" [a-y]{0,2}';

describe("lazy grammar (native LazyStart)", () => {
  it("free text before a trigger is exactly what was favoured, though the grammar would refuse it", () => {
    const favoured = pieces("Once upon a time zz");
    const out = Array.from(host.context.sampleRows(config(GRAMMAR, ["<tool_call>"]), rows(favoured)));
    assert.deepEqual(out, favoured);
  });

  it("from the trigger on, the grammar constrains the rest (the trigger's own text included)", () => {
    const free = pieces("Once upon");
    const marker = pieces("<tool_call>");
    const favoured = [...free, ...marker, ...pieces("zzzz")];
    const out = Array.from(host.context.sampleRows(config(GRAMMAR, ["<tool_call>"]), rows(favoured)));
    assert.deepEqual(out.slice(0, free.length + marker.length), [...free, ...marker]);
    const text = host.detokenize(out.filter((id) => !host.isEndOfGeneration(id)));
    const after = text.slice(text.indexOf("<tool_call>"));
    assert.match(after, /^<tool_call>x[a-y]{0,2}$/);
    assert.ok(!after.includes("z"), after);
    // Past the end of the grammar only end-of-generation is allowed.
    assert.ok(host.isEndOfGeneration(out[out.length - 1] ?? -1));
  });

  it("a trigger inside the thinking block starts nothing; after the block it does", () => {
    const thinking = { open: "<think>", close: "</think>", opened: false };
    const inside = [...pieces("<think>"), ...pieces("<tool_call>zz"), ...pieces("</think>")];
    const favoured = [...inside, ...pieces("<tool_call>"), ...pieces("zz")];
    const out = Array.from(
      host.context.sampleRows(config(GRAMMAR, ["<tool_call>"], thinking), rows(favoured)),
    );
    assert.deepEqual(out.slice(0, inside.length), inside);
    const text = host.detokenize(out.filter((id) => !host.isEndOfGeneration(id)));
    assert.match(text, /^<think><tool_call>zz<\/think><tool_call>x[a-y]{0,2}$/);
    // A prompt that opened the block: the output starts inside it.
    const opened = { ...thinking, opened: true };
    const inBlock = [...pieces("<tool_call>zz"), ...pieces("</think>")];
    const out2 = Array.from(
      host.context.sampleRows(
        config(GRAMMAR, ["<tool_call>"], opened),
        rows([...inBlock, ...pieces("<tool_call>zz")]),
      ),
    );
    assert.deepEqual(out2.slice(0, inBlock.length), inBlock);
    assert.match(host.detokenize(out2.filter((id) => !host.isEndOfGeneration(id))), /<\/think><tool_call>x/);
  });

  it("a token that completes a trigger the grammar refuses is never drawn", () => {
    // `<function=` starts the grammar too, but the grammar writes `<tool_call>` only: the token that
    // would complete `<function=` is set aside and another drawn, so the text never holds it.
    const favoured = [...pieces("Once <function="), ...pieces("zz")];
    const out = Array.from(
      host.context.sampleRows(config(GRAMMAR, ["<tool_call>", "<function="]), rows(favoured)),
    );
    assert.equal(out.length, favoured.length, "no step failed");
    assert.ok(!out.includes(-1));
    const text = host.detokenize(out.filter((id) => !host.isEndOfGeneration(id)));
    assert.ok(text.startsWith("Once <function"), text);
    assert.ok(!text.includes("<function="), text);
  });
});

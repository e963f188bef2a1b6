/**
 * Test helper: full-match checks of GBNF text against strings with llama.cpp's own grammar engine, through
 * node-llama-cpp's internal `LlamaGrammar._testText` (parses the grammar and feeds the text code point by
 * code point; true when some parse stack is complete). No model is needed.
 */
import { getLlama, type Llama, type LlamaGrammar } from "node-llama-cpp";

let llamaPromise: Promise<Llama> | undefined;

/** The shared CPU-only `Llama` of this test process. */
export function testLlama(): Promise<Llama> {
  llamaPromise ??= getLlama({ gpu: false });
  return llamaPromise;
}

/** A matcher for `gbnf`: `(text) => true` when the grammar's root fully matches `text`. Throws if it does not parse. */
export async function nativeMatcher(gbnf: string): Promise<(text: string) => boolean> {
  const llama = await testLlama();
  const grammar = (await llama.createGrammar({ grammar: gbnf })) as LlamaGrammar & {
    _testText(text: string): boolean;
  };
  return (text) => grammar._testText(text);
}

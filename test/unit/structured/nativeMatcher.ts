/**
 * Test helper: full-match checks of GBNF text against strings with llama.cpp's own grammar engine, through
 * the native engine's test entry point `grammarMatches` (parses the grammar and feeds the text code point by
 * code point; true when some parse stack is complete). No model is needed.
 */
import { nativeAddon } from "../../../src/engine/native.ts";

/**
 * A matcher for `gbnf`: `(text) => true` when the grammar's start rule `root` (defaults to "root") fully
 * matches `text`. Throws if it does not parse.
 */
export async function nativeMatcher(gbnf: string, root = "root"): Promise<(text: string) => boolean> {
  const engine = nativeAddon();
  engine.grammarMatches(gbnf, root, "");
  return (text) => engine.grammarMatches(gbnf, root, text);
}

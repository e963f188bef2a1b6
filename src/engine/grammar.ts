import { nativeAddon } from "./native.ts";

/**
 * Asks llama.cpp's own GBNF parser (and its post-parse checks: undefined rules, missing root, left
 * recursion) whether it takes `gbnf`, without a model.
 * @returns null when it does, else llama.cpp's message.
 */
export function checkGrammar(gbnf: string, root = "root"): string | null {
  return nativeAddon().validateGrammar(gbnf, root);
}

/**
 * The tokens `bench/peer.ts` bans on both servers with one shared `logit_bias` object. A random-weight
 * model samples any token; llama-server fails a stream with a 500 when a token's text is not valid
 * UTF-8 on its own (a byte-fallback or partial-character piece), and control or user-defined special
 * tokens (`<|im_end|>`, `<tool_call>`, ...) would end the stream or feed the chat parsers. Banning them
 * keeps every stream at its full length on both sides.
 */
import { readGgufFileInfo } from "node-llama-cpp";
import { TokenVocabulary } from "../../src/engine/TokenVocabulary.ts";

/** GGUF `tokenizer.ggml.token_type` values that are never plain text: 3 control, 4 user-defined. */
const SPECIAL_TYPES = new Set([3, 4]);

/** What {@link bannedTokens} found, by reason. */
export type TokenBans = {
  /** Every banned id, ascending. */
  ids: number[];
  /** Control and user-defined tokens. */
  special: number;
  /** Tokens whose bytes are not valid UTF-8 on their own. */
  partialUtf8: number;
  /** Vocabulary size. */
  vocabSize: number;
};

/**
 * Reads the model's vocabulary (`tokenizer.ggml.tokens`, `token_type`, `model`) and lists the tokens to
 * ban: special types and pieces whose bytes (as {@link TokenVocabulary} maps them) are not valid UTF-8.
 * @throws Error when the GGUF has no tokenizer tokens.
 */
export async function bannedTokens(modelPath: string): Promise<TokenBans> {
  const info = await readGgufFileInfo(modelPath, { readTensorInfo: false });
  const tokenizer = (
    info.metadata as {
      tokenizer?: { ggml?: { tokens?: readonly string[]; token_type?: readonly number[]; model?: string } };
    }
  ).tokenizer?.ggml;
  if (!tokenizer?.tokens) throw new Error(`${modelPath} has no tokenizer.ggml.tokens`);
  const types = tokenizer.token_type ?? [];
  const vocabulary = new TokenVocabulary(tokenizer.tokens, types, tokenizer.model ?? "llama");
  const strict = new TextDecoder("utf-8", { fatal: true });
  const ids: number[] = [];
  let special = 0;
  let partialUtf8 = 0;
  for (let id = 0; id < vocabulary.size; id++) {
    if (SPECIAL_TYPES.has(types[id] ?? 1)) {
      special++;
      ids.push(id);
      continue;
    }
    try {
      strict.decode(vocabulary.bytes(id));
    } catch {
      partialUtf8++;
      ids.push(id);
    }
  }
  return { ids, special, partialUtf8, vocabSize: vocabulary.size };
}

/** The OpenAI `logit_bias` object banning `ids` (-100, the lowest both servers accept as a number). */
export function banBias(ids: readonly number[]): Record<string, number> {
  return Object.fromEntries(ids.map((id) => [String(id), -100]));
}

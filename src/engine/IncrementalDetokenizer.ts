/** Turns token ids into text; `lastTokens` gives the tokens before them, for tokenizers whose pieces depend on context. */
export type Detokenize = (tokens: readonly number[], lastTokens: readonly number[]) => string;

const REPLACEMENT_CHARACTER = "\uFFFD";

/**
 * Incremental, UTF-8 safe detokenization of a growing list of generated tokens.
 *
 * Byte-fallback and byte-level BPE tokenizers can split one multi-byte character across several tokens;
 * decoding such a partial sequence yields U+FFFD. As vLLM's `detokenize_incrementally` (and HF TGI), we
 * decode a window from a prefix offset and only emit the new text once it no longer ends in U+FFFD, so a
 * half character is never emitted. Pieces keep their leading spaces because the window always starts
 * with already-emitted tokens (or the end of the prompt) as context.
 */
export class IncrementalDetokenizer {
  private readonly detokenize: Detokenize;
  private readonly tokens: number[] = [];
  private readonly contextTokens: readonly number[];
  /** Start of the decoded window: tokens before it are only context. */
  private prefixOffset = 0;
  /** Tokens before this offset have been emitted as text. */
  private readOffset = 0;
  /** The decoded text of the window up to `readOffset` (cached until the offsets move). */
  private emittedWindow: string | undefined;

  /**
   * @param detokenize the model's detokenizer.
   * @param contextTokens the last few prompt tokens (up to ~4), used as context for the first pieces.
   */
  constructor(detokenize: Detokenize, contextTokens: readonly number[] = []) {
    this.detokenize = detokenize;
    this.contextTokens = contextTokens;
  }

  /**
   * Adds one generated token.
   * @returns the text that became complete with it ("" while a character is still incomplete).
   */
  push(token: number): string {
    this.tokens.push(token);
    this.emittedWindow ??= this.decodeWindow(this.readOffset);
    const before = this.emittedWindow;
    const after = this.decodeWindow(this.tokens.length);
    if (after.length <= before.length || after.endsWith(REPLACEMENT_CHARACTER)) return "";
    this.prefixOffset = this.readOffset;
    this.readOffset = this.tokens.length;
    this.emittedWindow = undefined;
    return after.slice(before.length);
  }

  /**
   * Emits whatever is still pending at the end of the generation, even an incomplete character
   * (then as U+FFFD, as every tokenizer's full decode would).
   */
  flush(): string {
    if (this.readOffset === this.tokens.length) return "";
    const before = this.emittedWindow ?? this.decodeWindow(this.readOffset);
    const after = this.decodeWindow(this.tokens.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.tokens.length;
    this.emittedWindow = undefined;
    return after.length > before.length ? after.slice(before.length) : "";
  }

  private decodeWindow(end: number): string {
    const window = this.tokens.slice(this.prefixOffset, end);
    if (window.length === 0) return "";
    const context =
      this.prefixOffset === 0
        ? this.contextTokens
        : this.tokens.slice(Math.max(0, this.prefixOffset - 4), this.prefixOffset);
    return this.detokenize(window, context);
  }
}

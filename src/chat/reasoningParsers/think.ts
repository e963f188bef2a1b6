/**
 * `<think>…</think>` reasoning, as DeepSeek-R1 and Qwen3 / QwQ write it (vLLM's `deepseek_r1` and `qwen3`
 * reasoning parsers, llama.cpp's `--reasoning-format deepseek`), and the same reading with another
 * family's markers (Seed-OSS `<seed:think>`, Mistral `[THINK]`, Command-A `<|START_THINKING|>`, …).
 */
import { BufferedStreamParser, type StreamParser } from "../parserDelta.ts";
import { isJsonSpace, partialTagSuffix, skipSpace } from "../textScan.ts";

/** Options of {@link ThinkReasoningParser}. */
export type ThinkParserOptions = {
  /**
   * The prompt already opened the thinking block (e.g. DeepSeek-R1's template ends its generation prompt
   * with `<think>\n`), so output starts inside reasoning; see `promptOpensThinking`. A `<think>` the model
   * writes anyway at the start is swallowed. Default false: reasoning only when the output starts with
   * `<think>` (after whitespace).
   */
  startsInThinking?: boolean;
  /**
   * The prompt already closed the thinking block (Qwen3's `enable_thinking: false` prompt ends
   * `<think>\n\n</think>\n\n`): the whole output is content, an opening marker included. Wins over
   * `startsInThinking`. Default false.
   */
  thinkingClosed?: boolean;
  /** Text that, generated while inside reasoning, closes it (`max_thinking_tokens`). Default `"\n" + close + "\n\n"`. */
  closeText?: string;
  /** The marker that opens a thinking block. Default `<think>`. */
  open?: string;
  /** The marker that closes it. Default `</think>`. */
  close?: string;
};

/**
 * A reasoning parser: a {@link StreamParser} that emits `reasoning` and `content` (never tool calls),
 * and tells the engine whether the output is currently inside the thinking block.
 */
export interface ReasoningParser extends StreamParser {
  /** True while the output so far is inside reasoning (the engine counts these tokens for `max_thinking_tokens`). */
  inReasoning(): boolean;
  /** Text to force to close reasoning when the thinking budget is spent. */
  readonly closeText: string;
}

/**
 * Incremental `<think>` parser (or another pair of markers, `options.open` / `options.close`). Reasoning
 * is the text between `<think>` (or the output's start, when the prompt opened it) and `</think>`, trimmed of surrounding whitespace; content is what follows
 * `</think>`, without its leading whitespace. When `</think>` never comes, everything after the opening is
 * reasoning (as vLLM's deepseek_r1 parser). A `<think>` that is not at the start is plain content.
 * Whitespace and a possible start of a tag are held back until decided, so any split of the stream yields
 * the same result.
 */
export class ThinkReasoningParser extends BufferedStreamParser implements ReasoningParser {
  readonly closeText: string;
  private readonly startsInThinking: boolean;
  private readonly open: string;
  private readonly close: string;
  private state: "start" | "reasoning" | "afterClose" | "content";
  private reasoningStarted = false;

  constructor(options: ThinkParserOptions = {}) {
    super();
    this.startsInThinking = options.startsInThinking ?? false;
    this.open = options.open ?? "<think>";
    this.close = options.close ?? "</think>";
    this.closeText = options.closeText ?? `\n${this.close}\n\n`;
    this.state = options.thinkingClosed ? "content" : "start";
  }

  /** True while the output is inside the thinking block. */
  inReasoning(): boolean {
    return this.state === "reasoning" || (this.state === "start" && this.startsInThinking);
  }

  private emitReasoning(text: string): void {
    const piece = this.reasoningStarted ? text : text.slice(skipSpace(text));
    if (piece === "") return;
    this.reasoningStarted = true;
    this.delta.reasoning = (this.delta.reasoning ?? "") + piece;
  }

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "start") {
        const rest = this.buf.slice(skipSpace(this.buf));
        if (rest.startsWith(this.open)) {
          this.buf = rest.slice(this.open.length);
          this.state = "reasoning";
          continue;
        }
        if (!final && this.open.startsWith(rest)) return;
        this.state = this.startsInThinking ? "reasoning" : "content";
        continue;
      }
      if (this.state === "reasoning") {
        const at = this.buf.indexOf(this.close);
        if (at >= 0) {
          this.emitReasoning(trimEnd(this.buf.slice(0, at)));
          this.buf = this.buf.slice(at + this.close.length);
          this.state = "afterClose";
          continue;
        }
        if (final) {
          this.emitReasoning(trimEnd(this.buf));
          this.buf = "";
          return;
        }
        let cut = this.buf.length - partialTagSuffix(this.buf, [this.close]);
        while (cut > 0 && isJsonSpace(this.buf[cut - 1])) cut--;
        this.emitReasoning(this.buf.slice(0, cut));
        this.buf = this.buf.slice(cut);
        return;
      }
      if (this.state === "afterClose") {
        this.buf = this.buf.slice(skipSpace(this.buf));
        if (this.buf === "") return;
        this.state = "content";
      }
      if (this.buf !== "") this.delta.content = (this.delta.content ?? "") + this.buf;
      this.buf = "";
      return;
    }
  }
}

function trimEnd(text: string): string {
  let end = text.length;
  while (end > 0 && isJsonSpace(text[end - 1])) end--;
  return text.slice(0, end);
}

/**
 * `<think>…</think>` reasoning, as DeepSeek-R1 and Qwen3 / QwQ write it (vLLM's `deepseek_r1` and `qwen3`
 * reasoning parsers, llama.cpp's `--reasoning-format deepseek`), and the same reading with another
 * family's markers (Seed-OSS `<seed:think>`, Mistral `[THINK]`, Command-A `<|START_THINKING|>`, Granite's
 * `Here is my thought process:`, Apriel's `[BEGIN FINAL RESPONSE]`, Kimi K3's `<|open|>think<|sep|>`, …).
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
  /** Other spellings of the opening marker (Granite's `Here's my thought process:`). Default none. */
  opens?: readonly string[];
  /** Other spellings of the closing marker (Granite's `Here is my response:`). Default none. */
  closes?: readonly string[];
  /**
   * Markers that end the reasoning without a close marker and start the content, themselves kept as
   * content (Kimi K2's `<|tool_calls_section_begin|>`: a tool call ends the thinking). Default none.
   */
  ends?: readonly string[];
  /**
   * The turn's structural markers around the answer, removed from the content wherever they come
   * (Granite 3.3's `<response>` / `</response>`, Solar Open's `<|begin|>assistant<|content|>`, Kimi K3's
   * `<|open|>response<|sep|>`). Default none.
   */
  drop?: readonly string[];
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
 * Incremental `<think>` parser (or another pair of markers, `options.open` / `options.close`, with their
 * other spellings). Reasoning is the text between `<think>` (or the output's start, when the prompt opened
 * it) and `</think>` (or one of `options.ends`, which stays in the content), trimmed of surrounding
 * whitespace; content is what follows, without its leading whitespace, the `options.drop` markers removed.
 * When `</think>` never comes, everything after the opening is reasoning (as vLLM's deepseek_r1 parser).
 * Leading whitespace before `<think>` is skipped. A `<think>` that is not at the start is plain content.
 * Whitespace and a possible start of a marker are held back until decided, so any split of the stream
 * yields the same result; text that turns out to be no marker is content (nothing is lost).
 */
export class ThinkReasoningParser extends BufferedStreamParser implements ReasoningParser {
  readonly closeText: string;
  private readonly startsInThinking: boolean;
  private readonly opens: readonly string[];
  private readonly closes: readonly string[];
  private readonly ends: readonly string[];
  private readonly drop: readonly string[];
  private state: "start" | "reasoning" | "afterClose" | "content";
  private reasoningStarted = false;

  constructor(options: ThinkParserOptions = {}) {
    super();
    this.startsInThinking = options.startsInThinking ?? false;
    const close = options.close ?? "</think>";
    this.opens = [options.open ?? "<think>", ...(options.opens ?? [])];
    this.closes = [close, ...(options.closes ?? [])];
    this.ends = options.ends ?? [];
    this.drop = options.drop ?? [];
    this.closeText = options.closeText ?? `\n${close}\n\n`;
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

  private emitContent(text: string): void {
    if (text !== "") this.delta.content = (this.delta.content ?? "") + text;
  }

  /** The first of `markers` in `buf`, if any (the longest on a tie). */
  private first(markers: readonly string[]): { at: number; marker: string } | undefined {
    let best: { at: number; marker: string } | undefined;
    for (const marker of markers) {
      const at = this.buf.indexOf(marker);
      if (at < 0) continue;
      if (!best || at < best.at || (at === best.at && marker.length > best.marker.length)) {
        best = { at, marker };
      }
    }
    return best;
  }

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "start") {
        const rest = this.buf.slice(skipSpace(this.buf));
        const open = this.opens.find((marker) => rest.startsWith(marker));
        if (open !== undefined) {
          this.buf = rest.slice(open.length);
          this.state = "reasoning";
          continue;
        }
        if (!final && this.opens.some((marker) => marker.startsWith(rest))) return;
        this.state = this.startsInThinking ? "reasoning" : "content";
        continue;
      }
      if (this.state === "reasoning") {
        const found = this.first([...this.closes, ...this.ends]);
        if (found) {
          this.emitReasoning(trimEnd(this.buf.slice(0, found.at)));
          const kept = this.ends.includes(found.marker) && !this.closes.includes(found.marker);
          this.buf = this.buf.slice(found.at + (kept ? 0 : found.marker.length));
          this.state = kept ? "content" : "afterClose";
          continue;
        }
        if (final) {
          this.emitReasoning(trimEnd(this.buf));
          this.buf = "";
          return;
        }
        let cut = this.buf.length - partialTagSuffix(this.buf, [...this.closes, ...this.ends]);
        while (cut > 0 && isJsonSpace(this.buf[cut - 1])) cut--;
        this.emitReasoning(this.buf.slice(0, cut));
        this.buf = this.buf.slice(cut);
        return;
      }
      if (this.state === "afterClose") {
        // Whitespace and the turn's markers between the block and the answer.
        this.buf = this.buf.slice(skipSpace(this.buf));
        const marker = this.drop.find((tag) => this.buf.startsWith(tag));
        if (marker !== undefined) {
          this.buf = this.buf.slice(marker.length);
          continue;
        }
        if (this.buf === "") return;
        if (!final && this.drop.some((tag) => tag.startsWith(this.buf))) return;
        this.state = "content";
      }
      this.runContent(final);
      return;
    }
  }

  /** Content: emitted as it comes, the `drop` markers removed (a possible start of one held back). */
  private runContent(final: boolean): void {
    for (;;) {
      const found = this.first(this.drop);
      if (!found) break;
      this.emitContent(this.buf.slice(0, found.at));
      this.buf = this.buf.slice(found.at + found.marker.length);
    }
    const held = final ? 0 : partialTagSuffix(this.buf, this.drop);
    this.emitContent(this.buf.slice(0, this.buf.length - held));
    this.buf = this.buf.slice(this.buf.length - held);
  }
}

function trimEnd(text: string): string {
  let end = text.length;
  while (end > 0 && isJsonSpace(text[end - 1])) end--;
  return text.slice(0, end);
}

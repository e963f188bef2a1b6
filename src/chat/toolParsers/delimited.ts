/**
 * The engine of the token-delimited tool-call formats: calls open with a marker (`<|tool_call_begin|>`,
 * `<|START_ACTION|>`, `functools`, …) and end either at a closing marker or where the bracketed value
 * after the opener closes. Each format (./tokenFormats.ts) is a {@link DelimitedSyntax}: its markers and
 * the reader of one body.
 */
import { skipSpace } from "../textScan.ts";
import { BufferedToolParser, type ParsedCall, type ToolParserOptions } from "./toolParser.ts";

/** One kind of call markup of a {@link DelimitedSyntax}. */
export type CallMarkup = {
  /** The marker that opens a body. */
  open: string;
  /**
   * The marker that closes the body. Absent: the body is the bracketed value (`[`/`{` first, whitespace
   * before it skipped) that `scan` measures.
   */
  close?: string;
  /**
   * With no `close`: where the value starting at `text[0]` ends (index just past it), or -1 when the text
   * stops before it closes (e.g. `scanJsonValueEnd(text, 0)`).
   */
  scan?: (text: string) => number;
  /** With `scan`: the opener is the value's first character and stays in the body (pythonic's `[`). */
  openInBody?: boolean;
  /** Reads one body (markers excluded) as calls; `undefined` makes the markup fall back to content. */
  read: (body: string) => ParsedCall[] | undefined;
};

/** A token-delimited tool-call format. */
export type DelimitedSyntax = {
  /** The call markups; at one position the first listed that matches wins. */
  calls: readonly CallMarkup[];
  /**
   * Wrapper tokens removed wherever they stand outside a body (a section's begin/end around the calls,
   * e.g. `<|tool_calls_section_begin|>`). Defaults to none.
   */
  drop?: readonly string[];
  /**
   * Calls are recognized only at the start of the output (after whitespace and dropped tokens) or right
   * after other calls, as vLLM's `pythonic` parser does; once other text came, everything is content.
   * Defaults to false (calls anywhere).
   */
  startOnly?: boolean;
};

/**
 * Incremental parser for a {@link DelimitedSyntax}. Text streams as content (a possible start of any
 * marker is held back); a body is judged when its closing marker (or its value's closing bracket) arrives,
 * or at `end()` when the model stopped inside it; its calls are then emitted whole. A body that does not
 * read as calls falls back to content: its opener is emitted verbatim and scanning resumes after it.
 * Whitespace between and after calls (and after a dropped wrapper token) is dropped; other text after
 * calls streams as content.
 */
export class DelimitedToolParser extends BufferedToolParser {
  private state: "text" | "body" | "after" = "text";
  private markup: CallMarkup | undefined;
  /** startOnly: non-space content came, so no more calls. */
  private sawText = false;
  private readonly syntax: DelimitedSyntax;
  private readonly markers: string[];

  constructor(syntax: DelimitedSyntax, options: ToolParserOptions = {}) {
    super(options);
    this.syntax = syntax;
    this.markers = [...syntax.calls.map((call) => call.open), ...(syntax.drop ?? [])];
  }

  /** The markup or dropped token that `text` starts with, if any. */
  private markerAt(text: string, at: number): CallMarkup | "drop" | undefined {
    for (const call of this.syntax.calls) if (text.startsWith(call.open, at)) return call;
    for (const token of this.syntax.drop ?? []) if (text.startsWith(token, at)) return "drop";
    return undefined;
  }

  /** Length of the dropped token `text` starts with (0 if none). */
  private dropLength(text: string): number {
    for (const token of this.syntax.drop ?? []) if (text.startsWith(token)) return token.length;
    return 0;
  }

  /** Whether `text` (non-empty) may still grow into a marker. */
  private couldBeMarker(text: string): boolean {
    return this.markers.some((marker) => marker.length > text.length && marker.startsWith(text));
  }

  private startBody(markup: CallMarkup): void {
    if (!markup.openInBody) this.buf = this.buf.slice(markup.open.length);
    this.markup = markup;
    this.state = "body";
  }

  private fallback(markup: CallMarkup): void {
    if (markup.openInBody) this.buf = this.buf.slice(markup.open.length);
    this.out.content(markup.open);
    this.sawText = true;
    this.state = "text";
  }

  /** The text state of a format whose calls may stand anywhere. */
  private runText(final: boolean): boolean {
    let found = -1;
    let marker: CallMarkup | "drop" | undefined;
    for (let i = 0; i < this.buf.length && found < 0; i++) {
      marker = this.markerAt(this.buf, i);
      if (marker) found = i;
    }
    if (found < 0 || !marker) {
      this.emitHoldingMarkers(final, this.markers);
      return false;
    }
    this.out.content(this.buf.slice(0, found));
    this.buf = this.buf.slice(found);
    if (marker === "drop") {
      // A section wrapper: whitespace after it is layout, as after calls.
      this.buf = this.buf.slice(this.dropLength(this.buf));
      this.state = "after";
    } else this.startBody(marker);
    return true;
  }

  /**
   * The start (or after-calls) position: whitespace and dropped tokens skipped (kept as content at the
   * start, dropped after calls), then a call or text.
   */
  private runBoundary(final: boolean): boolean {
    const keepSpace = this.state === "text";
    for (;;) {
      const i = skipSpace(this.buf);
      const rest = this.buf.slice(i);
      const drop = this.dropLength(rest);
      if (drop > 0) {
        if (keepSpace) this.out.content(this.buf.slice(0, i));
        this.buf = rest.slice(drop);
        continue;
      }
      if (rest === "") {
        if (final) {
          if (keepSpace) this.out.content(this.buf);
          this.buf = "";
        }
        return false;
      }
      if (!final && this.couldBeMarker(rest)) return false;
      const marker = this.markerAt(rest, 0);
      if (keepSpace) this.out.content(this.buf.slice(0, i));
      this.buf = rest;
      if (marker && marker !== "drop") {
        this.startBody(marker);
        return true;
      }
      this.state = "text";
      if (this.syntax.startOnly) this.sawText = true;
      return true;
    }
  }

  private runBody(final: boolean, markup: CallMarkup): boolean {
    let body: string;
    let consumed: number;
    if (markup.close !== undefined) {
      const at = this.buf.indexOf(markup.close);
      if (at < 0 && !final) return false;
      body = at < 0 ? this.buf : this.buf.slice(0, at);
      consumed = at < 0 ? this.buf.length : at + markup.close.length;
    } else {
      const i = markup.openInBody ? 0 : skipSpace(this.buf);
      if (i === this.buf.length && !final) return false;
      const first = this.buf[i];
      const end = first === "[" || first === "{" ? (markup.scan?.(this.buf.slice(i)) ?? -1) : -2;
      if (end === -1 && !final) return false;
      body = end < 0 ? "" : this.buf.slice(i, i + end);
      consumed = end < 0 ? 0 : i + end;
      if (end < 0) {
        this.fallback(markup);
        return true;
      }
    }
    const calls = markup.read(body);
    if (!calls || calls.length === 0) {
      this.fallback(markup);
      return true;
    }
    this.out.calls(calls);
    this.buf = this.buf.slice(consumed);
    this.state = "after";
    return true;
  }

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "body" && this.markup) {
        if (!this.runBody(final, this.markup)) return;
        continue;
      }
      if (this.state === "after" || (this.syntax.startOnly && !this.sawText)) {
        if (!this.runBoundary(final)) return;
        continue;
      }
      if (this.syntax.startOnly) {
        this.out.content(this.buf);
        this.buf = "";
        return;
      }
      if (!this.runText(final)) return;
    }
  }
}

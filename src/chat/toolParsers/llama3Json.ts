/**
 * Llama 3.x JSON tool calls: `{"name": …, "parameters": …}` (the format Meta's Llama 3.1/3.2/3.3 chat
 * templates ask for), optionally after `<|python_tag|>`, several separated by `;` — as vLLM's
 * `llama3_json` parser and llama.cpp's Llama 3.x handler read them.
 */
import { isJsonSpace, scanJsonValueEnd, skipSpace } from "../textScan.ts";
import { BufferedToolParser, callsFromJsonText } from "./toolParser.ts";

const TAG = "<|python_tag|>";

/** Whether a `{` after `text` stands at the start of a line, given the state before `text`. */
function lineStartAfter(lineStart: boolean, text: string): boolean {
  let state = lineStart;
  for (const char of text) {
    if (char === "\n") state = true;
    else if (char !== " " && char !== "\t" && char !== "\r") state = false;
  }
  return state;
}

/**
 * Incremental Llama 3.x parser. A call starts at `<|python_tag|>` (anywhere), or at a `{` that opens a
 * line (the output's start included); it ends where its JSON object closes (brace matching, strings
 * honoured) and is a call when it parses as `{"name": string, "parameters"|"arguments": object}` (an
 * array of such objects is accepted too). After a call, whitespace and `;` are dropped and another `{`
 * or `<|python_tag|>` starts the next call; other text streams as content. A candidate that is not a call
 * falls back to content verbatim (e.g. a JSON answer, or Python code after `<|python_tag|>`).
 */
export class Llama3JsonToolParser extends BufferedToolParser {
  private state: "text" | "tagged" | "json" | "after" = "text";
  private lineStart = true;
  /** Raw text consumed before the candidate JSON (the tag and spaces), re-emitted on fallback. */
  private prefix = "";

  private emitText(text: string): void {
    this.out.content(text);
    this.lineStart = lineStartAfter(this.lineStart, text);
  }

  private fallback(): void {
    this.emitText(this.prefix);
    this.prefix = "";
    this.state = "text";
  }

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "text") {
        let lineStart = this.lineStart;
        let found = -1;
        for (let i = 0; i < this.buf.length; i++) {
          const char = this.buf[i];
          if ((char === "{" && lineStart) || (char === "<" && this.buf.startsWith(TAG, i))) {
            found = i;
            break;
          }
          lineStart = lineStartAfter(lineStart, char ?? "");
        }
        if (found < 0) {
          this.emitHoldingMarkers(final, [TAG], (text) => this.emitText(text));
          return;
        }
        this.emitText(this.buf.slice(0, found));
        this.buf = this.buf.slice(found);
        if (this.buf.startsWith(TAG)) {
          this.buf = this.buf.slice(TAG.length);
          this.prefix = TAG;
          this.state = "tagged";
        } else {
          this.prefix = "";
          this.state = "json";
        }
        continue;
      }
      if (this.state === "tagged") {
        const i = skipSpace(this.buf);
        if (i === this.buf.length && !final) return;
        if (this.buf[i] === "{" || this.buf[i] === "[") {
          this.prefix += this.buf.slice(0, i);
          this.buf = this.buf.slice(i);
          this.state = "json";
        } else {
          this.fallback();
        }
        continue;
      }
      if (this.state === "json") {
        const endAt = scanJsonValueEnd(this.buf, 0);
        if (endAt < 0 && !final) return;
        const calls = endAt < 0 ? undefined : callsFromJsonText(this.buf.slice(0, endAt), true);
        if (calls) {
          this.out.calls(calls);
          this.buf = this.buf.slice(endAt);
          this.prefix = "";
          this.state = "after";
        } else {
          // Emit the opening bracket too, so that rescanning cannot start the same candidate again.
          this.prefix += this.buf.slice(0, 1);
          this.buf = this.buf.slice(1);
          this.fallback();
          this.lineStart = false;
        }
        continue;
      }
      let i = 0;
      while (i < this.buf.length && (isJsonSpace(this.buf[i]) || this.buf[i] === ";")) i++;
      this.buf = this.buf.slice(i);
      if (this.buf === "") return;
      if (this.buf.startsWith(TAG)) {
        this.buf = this.buf.slice(TAG.length);
        this.prefix = TAG;
        this.state = "tagged";
      } else if (this.buf.startsWith("{")) {
        this.state = "json";
      } else if (!final && TAG.startsWith(this.buf)) {
        return;
      } else {
        this.lineStart = false;
        this.state = "text";
      }
    }
  }
}

/**
 * Hermes / Qwen tool calls: `<tool_call>{"name": …, "arguments": …}</tool_call>`, possibly several, as
 * vLLM's `hermes` tool parser reads them (Hermes 2 Pro, Qwen2.5, Qwen3, QwQ).
 */
import { skipSpace } from "../textScan.ts";
import { BufferedToolParser, callsFromJsonText } from "./toolParser.ts";

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";

/**
 * Incremental Hermes parser. Text before a call streams as content (a possible start of `<tool_call>` is
 * held back); each `<tool_call>…</tool_call>` body becomes one call (or several, if it holds a JSON
 * array) when its closing tag arrives, or at `end()` when the model stopped before closing (Qwen often
 * does). Whitespace between and after calls is dropped; other text after a call streams as content.
 * A body that is not a call (bad JSON, no name) falls back to content: the `<tool_call>` text is emitted
 * verbatim and scanning resumes after it. Unlike vLLM's hermes parser, which streams partial argument
 * JSON, calls are emitted whole so a malformed one can still become content.
 */
export class HermesToolParser extends BufferedToolParser {
  private state: "text" | "call" | "after" = "text";

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "text") {
        const at = this.buf.indexOf(OPEN);
        if (at >= 0) {
          this.out.content(this.buf.slice(0, at));
          this.buf = this.buf.slice(at + OPEN.length);
          this.state = "call";
          continue;
        }
        this.emitHoldingMarkers(final, [OPEN]);
        return;
      }
      if (this.state === "call") {
        const at = this.buf.indexOf(CLOSE);
        if (at < 0 && !final) return;
        const body = at < 0 ? this.buf : this.buf.slice(0, at);
        const calls = callsFromJsonText(body.trim(), true);
        if (calls) {
          this.out.calls(calls);
          this.buf = at < 0 ? "" : this.buf.slice(at + CLOSE.length);
          this.state = "after";
        } else {
          this.out.content(OPEN);
          this.state = "text";
        }
        continue;
      }
      this.buf = this.buf.slice(skipSpace(this.buf));
      if (this.buf === "") return;
      if (this.buf.startsWith(OPEN)) {
        this.buf = this.buf.slice(OPEN.length);
        this.state = "call";
        continue;
      }
      if (!final && OPEN.startsWith(this.buf)) return;
      this.state = "text";
    }
  }
}

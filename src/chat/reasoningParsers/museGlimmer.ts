/**
 * Muse Glimmer's ATEM channels, as vLLM's `muse_glimmer` reasoning parser reads them: after the generation
 * prompt `<|start|>assistant`, each message is a header `to=RECIPIENT<|message|>` and a body ended by
 * `<|eom|>` (more follows) or `<|eot|>` (the turn ends): recipient `self` is reasoning, `user` the answer,
 * any other a tool channel whose body (`<atem:function_calls>…`) goes on as content to the `muse_glimmer`
 * tool parser. Messages after the first start with `<|start|>assistant` again.
 */
import { BufferedStreamParser } from "../parserDelta.ts";
import { partialTagSuffix } from "../textScan.ts";
import type { ReasoningParser } from "./think.ts";

const START = "<|start|>assistant";
const MESSAGE = "<|message|>";
const ENDS = ["<|eom|>", "<|eot|>", "<|start|>"];

/**
 * Incremental Muse Glimmer channel parser (see the module comment). Several reasoning messages are joined
 * with a line break. Output that does not start with a header (or a header that does not read: a
 * recipient with whitespace or markup) is content from there on, as written (nothing is lost); possible
 * starts of a header or terminator are held back while streaming.
 */
export class MuseGlimmerReasoningParser extends BufferedStreamParser implements ReasoningParser {
  readonly closeText = "<|eom|><|start|>assistant";
  private state: "header" | "self" | "user" | "tool" | "raw" = "header";
  private reasoningParts = 0;
  private reasoningStarted = false;

  /** True while a `to=self` body is being read. */
  inReasoning(): boolean {
    return this.state === "self";
  }

  private emit(kind: "reasoning" | "content", text: string): void {
    if (text === "") return;
    if (kind === "reasoning") {
      const piece = !this.reasoningStarted && this.reasoningParts > 1 ? `\n${text}` : text;
      this.reasoningStarted = true;
      this.delta.reasoning = (this.delta.reasoning ?? "") + piece;
    } else this.delta.content = (this.delta.content ?? "") + text;
  }

  /** Reads a header at the start of `buf`: the recipient and its length, `wait`, or `none` when it cannot be one. */
  private header(final: boolean): { recipient: string; length: number } | "wait" | "none" {
    let at = 0;
    const skip = () => {
      while (this.buf[at] === " " || this.buf[at] === "\n") at++;
    };
    skip();
    if (this.buf.startsWith(START, at)) {
      at += START.length;
      skip();
    } else if (START.startsWith(this.buf.slice(at)) && !final) return "wait";
    const rest = this.buf.slice(at);
    if (!rest.startsWith("to=")) return !final && "to=".startsWith(rest) ? "wait" : "none";
    const end = rest.indexOf(MESSAGE);
    if (end < 0) {
      // Still writing the recipient: wait while it reads as one (a start of `<|message|>` may follow).
      const tail = rest.slice(3);
      const name = tail.slice(0, tail.length - partialTagSuffix(tail, [MESSAGE]));
      return final || /[\s<]/.test(name) ? "none" : "wait";
    }
    const recipient = rest.slice(3, end);
    if (recipient === "" || /[\s<]/.test(recipient)) return "none";
    return { recipient, length: at + end + MESSAGE.length };
  }

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "raw") {
        this.emit("content", this.buf);
        this.buf = "";
        return;
      }
      if (this.state === "header") {
        if (this.buf === "") return;
        const found = this.header(final);
        if (found === "wait") return;
        if (found === "none") {
          this.state = "raw";
          continue;
        }
        this.buf = this.buf.slice(found.length);
        this.state = found.recipient === "self" ? "self" : found.recipient === "user" ? "user" : "tool";
        if (this.state === "self") {
          this.reasoningParts++;
          this.reasoningStarted = false;
        }
        continue;
      }
      const kind = this.state === "self" ? "reasoning" : "content";
      let end = -1;
      let marker = "";
      for (const candidate of ENDS) {
        const at = this.buf.indexOf(candidate);
        if (at >= 0 && (end < 0 || at < end)) {
          end = at;
          marker = candidate;
        }
      }
      if (end >= 0) {
        this.emit(kind, this.buf.slice(0, end));
        // `<|start|>` begins the next header (kept); `<|eom|>` / `<|eot|>` end the body.
        this.buf = this.buf.slice(end + (marker === "<|start|>" ? 0 : marker.length));
        this.state = "header";
        continue;
      }
      const held = final ? 0 : partialTagSuffix(this.buf, ENDS);
      this.emit(kind, this.buf.slice(0, this.buf.length - held));
      this.buf = this.buf.slice(this.buf.length - held);
      return;
    }
  }
}

/**
 * OpenAI's Harmony response format (gpt-oss): a sequence of messages, each
 * `[<|start|>assistant]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>TYPE]<|message|>BODY<|end|>` (a call
 * ends with `<|call|>`, the last answer with `<|return|>`). The `analysis` channel is reasoning, `final`
 * (and `commentary` without a recipient, a preamble) is content, and a `commentary` message addressed
 * `to=functions.NAME` is a call of NAME with BODY as its JSON arguments. As vLLM's `openai_gptoss`
 * reasoning parser and `openai` tool parser, llama.cpp's `COMMON_CHAT_FORMAT_GPT_OSS`.
 */
import { BufferedStreamParser } from "../parserDelta.ts";
import type { ReasoningParser } from "../reasoningParsers/think.ts";
import { partialTagSuffix, skipSpace } from "../textScan.ts";
import { newToolCallId } from "./toolParser.ts";

/** Options of {@link HarmonyParser}. */
export type HarmonyParserOptions = {
  /**
   * Turn `to=functions.NAME` messages into tool calls. When false (no tool parsing for this request,
   * e.g. `tool_choice: "none"`), such a message's body is content. Default true.
   */
  parseCalls?: boolean;
  /** Makes a new call id; defaults to `newToolCallId`. Tests inject a counter. */
  newId?: () => string;
};

const START = "<|start|>";
const CHANNEL = "<|channel|>";
const MESSAGE = "<|message|>";
/** The markers that end a message body. */
const ENDS = ["<|end|>", "<|call|>", "<|return|>"] as const;

/** What one message's header says: where its body goes. */
type Route = { kind: "reasoning" } | { kind: "content" } | { kind: "call"; name: string };

/**
 * Incremental Harmony parser: emits `reasoning` (analysis), `content` (final and preambles) and, with
 * `parseCalls`, `toolCalls` (one whole call per `to=functions.NAME` message, when its body ends: its
 * arguments as compact JSON when the body is JSON, else the body as written). Output that does not start
 * with a header (`<|channel|>` or `<|start|>`), e.g. JSON a grammar forced, is content as a whole. An
 * unterminated body (generation stopped inside it, or at `<|call|>` / `<|return|>`, which end generation
 * and never reach the text) ends the message. Whole or split, the result is the same.
 * Implements the reasoning parser interface: `inReasoning()` is true inside an analysis body, and
 * `closeText` (`<|end|><|start|>assistant`, for `max_thinking_tokens`) ends it so the model goes on with
 * its next message.
 */
export class HarmonyParser extends BufferedStreamParser implements ReasoningParser {
  readonly closeText = "<|end|><|start|>assistant";
  private readonly parseCalls: boolean;
  private readonly newId: () => string;
  private state: "messageStart" | "header" | "body" | "raw" = "messageStart";
  private route: Route = { kind: "content" };
  private callBody = "";
  private calls = 0;

  constructor(options: HarmonyParserOptions = {}) {
    super();
    this.parseCalls = options.parseCalls ?? true;
    this.newId = options.newId ?? newToolCallId;
  }

  /** True inside an analysis (reasoning) body. */
  inReasoning(): boolean {
    return this.state === "body" && this.route.kind === "reasoning";
  }

  private emit(route: Route, text: string): void {
    if (text === "") return;
    if (route.kind === "call") {
      this.callBody += text;
      return;
    }
    const key = route.kind === "reasoning" ? "reasoning" : "content";
    this.delta[key] = (this.delta[key] ?? "") + text;
  }

  private endMessage(): void {
    if (this.route.kind === "call") {
      const body = this.callBody.trim();
      let args = body;
      try {
        args = JSON.stringify(JSON.parse(body));
      } catch {
        // Not JSON: the arguments as the model wrote them (as vLLM's `openai` tool parser passes them).
      }
      const index = this.calls++;
      const call = { index, id: this.newId(), name: this.route.name, argumentsDelta: args };
      this.delta.toolCalls = [...(this.delta.toolCalls ?? []), call];
      this.callBody = "";
    }
    this.route = { kind: "content" };
    this.state = "messageStart";
  }

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "raw") {
        this.emit({ kind: "content" }, this.buf);
        this.buf = "";
        return;
      }
      if (this.state === "messageStart") {
        const at = skipSpace(this.buf);
        const rest = this.buf.slice(at);
        if (rest.startsWith(START) || rest.startsWith(CHANNEL)) {
          this.buf = rest;
          this.state = "header";
          continue;
        }
        if (!final && (rest === "" || START.startsWith(rest) || CHANNEL.startsWith(rest))) return;
        // Not a header: after a message, whitespace between messages is dropped; the rest is content.
        this.state = "raw";
        continue;
      }
      if (this.state === "header") {
        const at = this.buf.indexOf(MESSAGE);
        if (at < 0) {
          if (final) {
            // A header the generation cut: nothing of the message was written yet.
            this.buf = "";
            return;
          }
          return;
        }
        this.route = this.routeOf(this.buf.slice(0, at));
        this.buf = this.buf.slice(at + MESSAGE.length);
        this.state = "body";
        continue;
      }
      // body
      let endAt = -1;
      let endLength = 0;
      for (const marker of ENDS) {
        const at = this.buf.indexOf(marker);
        if (at >= 0 && (endAt < 0 || at < endAt)) {
          endAt = at;
          endLength = marker.length;
        }
      }
      if (endAt >= 0) {
        this.emit(this.route, this.buf.slice(0, endAt));
        this.buf = this.buf.slice(endAt + endLength);
        this.endMessage();
        continue;
      }
      if (final) {
        this.emit(this.route, this.buf);
        this.buf = "";
        this.endMessage();
        this.state = "raw";
        return;
      }
      const cut = this.buf.length - partialTagSuffix(this.buf, ENDS);
      this.emit(this.route, this.buf.slice(0, cut));
      this.buf = this.buf.slice(cut);
      return;
    }
  }

  /** Reads a header (text before `<|message|>`): its channel and recipient decide where the body goes. */
  private routeOf(header: string): Route {
    const channel = /<\|channel\|>\s*([A-Za-z_]+)/.exec(header)?.[1];
    const recipient = /\bto=([^\s<]+)/.exec(header)?.[1];
    if (recipient?.startsWith("functions.") && this.parseCalls) {
      return { kind: "call", name: recipient.slice("functions.".length) };
    }
    if (channel === "analysis") return { kind: "reasoning" };
    return { kind: "content" };
  }
}

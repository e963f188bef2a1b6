/**
 * What the tool-call parsers share: options (the injectable id generator), the reading of one call's
 * JSON (`{"name": …, "arguments"|"parameters": …}`), and the builder of one feed's {@link ParserDelta}.
 */
import { randomInt } from "node:crypto";
import type { ChatTool } from "../../protocol/tools.ts";
import type { ParserDelta, StreamParser } from "../parserDelta.ts";
import { partialTagSuffix, scanJsonValueEnd, skipSpace } from "../textScan.ts";

/** Options every tool-call parser takes. */
export type ToolParserOptions = {
  /** Makes a new call id; defaults to {@link newToolCallId}. Tests inject a counter. */
  newId?: () => string;
  /**
   * The request's tool definitions: the XML-style parsers convert each parameter's text to the JSON
   * Schema type declared here. Defaults to none (values are JSON when they parse as JSON, else strings).
   */
  tools?: readonly ChatTool[];
};

/** A tool-call parser: a {@link StreamParser} that emits `content` and `toolCalls` (never `reasoning`). */
export type ToolParser = StreamParser;

const ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A fresh tool call id: `call_` followed by 24 random alphanumeric characters (as OpenAI's ids look). */
export function newToolCallId(): string {
  let id = "call_";
  for (let i = 0; i < 24; i++) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return id;
}

/** One call read from model output: the function name and its `arguments` as compact JSON text. */
export type ParsedCall = { name: string; arguments: string };

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Reads one call object: `{"name": string, "arguments": object}`; `"parameters"` is accepted for
 * `"arguments"` (Llama 3.x), a `"type": "function"` key is ignored, and `arguments` given as a JSON string
 * holding an object is unwrapped. Missing arguments become `{}`. Returns `undefined` for anything else
 * (no string name, arguments not an object), which makes the caller fall back to content.
 */
export function callFromJson(value: unknown): ParsedCall | undefined {
  if (!isPlainObject(value)) return undefined;
  const name = value.name;
  if (typeof name !== "string" || name === "") return undefined;
  let args = value.arguments !== undefined ? value.arguments : value.parameters;
  if (args === undefined || args === null) args = {};
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch {
      return undefined;
    }
  }
  if (!isPlainObject(args)) return undefined;
  return { name, arguments: JSON.stringify(args) };
}

/**
 * Parses `text` as JSON holding one call object or (when `allowArray`) a non-empty array of them.
 * Returns `undefined` when the text is not valid JSON or any element is not a call.
 */
export function callsFromJsonText(text: string, allowArray: boolean): ParsedCall[] | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return callsFromJsonValue(value, allowArray);
}

/** As {@link callsFromJsonText}, for an already parsed value. */
export function callsFromJsonValue(value: unknown, allowArray: boolean): ParsedCall[] | undefined {
  const items = Array.isArray(value) ? (allowArray ? value : []) : [value];
  if (items.length === 0) return undefined;
  const calls: ParsedCall[] = [];
  for (const item of items) {
    const call = callFromJson(item);
    if (!call) return undefined;
    calls.push(call);
  }
  return calls;
}

/**
 * Collects what one `feed`/`end` produces and numbers the calls: each call is emitted whole as a single
 * first fragment (id + name + complete arguments), because a call is only known to be well-formed once
 * its closing markup arrived — which is what lets malformed calls fall back to content identically
 * whatever the stream's split. Whitespace at the very start of the output is held until something else
 * comes: dropped when a call comes first (so a call is not preceded by a `"\n"` content), kept otherwise.
 */
export class DeltaBuilder {
  private nextIndex = 0;
  private delta: ParserDelta = {};
  private leading = true;
  private leadingSpace = "";
  private readonly newId: () => string;

  constructor(options: ToolParserOptions = {}) {
    this.newId = options.newId ?? newToolCallId;
  }

  private append(text: string): void {
    this.delta.content = (this.delta.content ?? "") + text;
  }

  /** Appends content text (ignored when empty). */
  content(text: string): void {
    if (!text) return;
    if (this.leading) {
      if (skipSpace(text) === text.length) {
        this.leadingSpace += text;
        return;
      }
      this.leading = false;
      this.append(this.leadingSpace);
      this.leadingSpace = "";
    }
    this.append(text);
  }

  /** Appends complete calls, each as one fragment with a fresh id and the next index. */
  calls(calls: readonly ParsedCall[]): void {
    if (calls.length === 0) return;
    this.leading = false;
    this.leadingSpace = "";
    const list = this.delta.toolCalls ?? [];
    this.delta.toolCalls = list;
    for (const call of calls) {
      list.push({
        index: this.nextIndex++,
        id: this.newId(),
        name: call.name,
        argumentsDelta: call.arguments,
      });
    }
  }

  /** Returns what was collected since the last take and starts afresh; `final` releases held whitespace. */
  take(final = false): ParserDelta {
    if (final && this.leadingSpace) {
      this.append(this.leadingSpace);
      this.leadingSpace = "";
    }
    const out = this.delta;
    this.delta = {};
    return out;
  }
}

/**
 * The shared shape of the tool-call parsers: text accumulates in `buf`, `run(final)` moves what is
 * decided into `out`, and each `feed` / `end` returns the delta decided so far. Subclasses implement
 * `run` as their own state machine.
 */
export abstract class BufferedToolParser implements ToolParser {
  /** Text received and not yet decided. */
  protected buf = "";
  /** Builds the content and tool-call deltas. */
  protected readonly out: DeltaBuilder;

  constructor(options: ToolParserOptions = {}) {
    this.out = new DeltaBuilder(options);
  }

  /** Takes the next piece of generated text; returns what is decided so far. */
  feed(delta: string): ParserDelta {
    this.buf += delta;
    this.run(false);
    return this.out.take();
  }

  /** Generation stopped: flushes (or falls back) whatever was held back. */
  end(): ParserDelta {
    this.run(true);
    return this.out.take(true);
  }

  /** Advances the state machine over `buf`; with `final`, nothing more will come. */
  protected abstract run(final: boolean): void;

  /**
   * Emits all of `buf` as text except, unless `final`, a suffix that may be the start of one of
   * `markers` (the next delta may complete it), which stays in `buf`.
   * @param emit Where the text goes. Defaults to the content of the delta.
   */
  protected emitHoldingMarkers(
    final: boolean,
    markers: readonly string[],
    emit: (text: string) => void = (text) => this.out.content(text),
  ): void {
    const cut = this.buf.length - (final ? 0 : partialTagSuffix(this.buf, markers));
    emit(this.buf.slice(0, cut));
    this.buf = this.buf.slice(cut);
  }
}

/** Reads one or more JSON calls (objects or arrays of them) one after another, e.g. one per line. */
export function callsFromJsonSequence(body: string): ParsedCall[] | undefined {
  const calls: ParsedCall[] = [];
  let at = skipSpace(body);
  while (at < body.length) {
    if (body[at] !== "{" && body[at] !== "[") return undefined;
    const end = scanJsonValueEnd(body, at);
    if (end < 0) return undefined;
    const some = callsFromJsonText(body.slice(at, end), true);
    if (!some) return undefined;
    calls.push(...some);
    at = skipSpace(body, end);
  }
  return calls.length > 0 ? calls : undefined;
}

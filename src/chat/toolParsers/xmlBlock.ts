/**
 * What the XML-style tool-call parsers share: a block parser (calls wrapped in an open and a close tag,
 * whose body each family reads its own way) and the conversion of a parameter's text to its JSON
 * Schema type from the request's tool definitions.
 */
import type { ChatTool } from "../../protocol/tools.ts";
import { skipSpace } from "../textScan.ts";
import { BufferedToolParser, type ParsedCall, type ToolParserOptions } from "./toolParser.ts";

/** Reads one block's body (the text between the open and close tags) into calls; `undefined` if malformed. */
export type BlockReader = (body: string, tools: readonly ChatTool[]) => ParsedCall[] | undefined;

/** How one family wraps its calls. */
export type BlockFormat = {
  /** The tag that opens a block of calls, e.g. `<tool_call>`. */
  open: string;
  /** The tag that closes it, e.g. `</tool_call>`. */
  close: string;
  /** Reads the body into calls. */
  read: BlockReader;
  /**
   * A block also accepted without the `open`/`close` wrapper, whose own tags start and end it and stay in
   * the body (Qwen3-Coder's bare `<function=…>…</function>`, which vLLM's `qwen3_coder` reads). Defaults to none.
   */
  bare?: { open: string; close: string };
  /** Structural tags removed from the content (e.g. Kimi K3's `<|close|>response<|sep|>`). Defaults to none. */
  drop?: readonly string[];
};

/**
 * Incremental parser of `open … close` blocks, each holding one or more calls: text before a block
 * streams as content (a possible start of `open` is held back, so no delta ever carries text that turns
 * out to be markup); a block becomes calls when its close tag arrives, or at `end()` when the model
 * stopped before the close tag but the body reads complete (its own inner closings all written).
 * Whitespace between and after blocks is dropped (and the format's `drop` tags, everywhere); other text
 * after a block streams as content. A body that does not read (malformed, half-written) falls back to
 * content: the `open` text is emitted verbatim and scanning resumes after it. A format's `bare` block
 * is read the same way. Unlike vLLM's parsers, which stream partial arguments, calls are emitted whole
 * (as the other parsers here do), so a malformed one can still become content.
 */
export class XmlBlockToolParser extends BufferedToolParser {
  private state: "text" | "call" | "after" = "text";
  private readonly tools: readonly ChatTool[];
  private readonly openers: readonly Opener[];
  /** The opener of the block being read (state `call`). */
  private current: Opener;

  constructor(
    private readonly format: BlockFormat,
    options: ToolParserOptions = {},
  ) {
    super(options);
    this.tools = options.tools ?? [];
    const main: Opener = { open: format.open, close: format.close, inclusive: false };
    this.openers = format.bare ? [main, { ...format.bare, inclusive: true }] : [main];
    this.current = main;
  }

  /** The tags whose start is held back: the openers and the dropped tags. */
  private get held(): readonly string[] {
    return [...this.openers.map((opener) => opener.open), ...(this.format.drop ?? [])];
  }

  /** The first opener or dropped tag in `buf`, if any (an opener wins a tie). */
  private firstTag(): { at: number; tag: string; opener?: Opener } | undefined {
    let best: { at: number; tag: string; opener?: Opener } | undefined;
    for (const opener of this.openers) {
      const at = this.buf.indexOf(opener.open);
      if (at >= 0 && (!best || at < best.at)) best = { at, tag: opener.open, opener };
    }
    for (const tag of this.format.drop ?? []) {
      const at = this.buf.indexOf(tag);
      if (at >= 0 && (!best || at < best.at)) best = { at, tag };
    }
    return best;
  }

  /** Enters a block of `opener` whose open tag starts `buf` at `at`. */
  private enter(opener: Opener, at: number): void {
    this.buf = this.buf.slice(at + opener.open.length);
    this.current = opener;
    this.state = "call";
  }

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "text") {
        const found = this.firstTag();
        if (found) {
          this.out.content(this.buf.slice(0, found.at));
          if (found.opener) this.enter(found.opener, found.at);
          else this.buf = this.buf.slice(found.at + found.tag.length);
          continue;
        }
        this.emitHoldingMarkers(final, this.held);
        return;
      }
      if (this.state === "call") {
        const { open, close, inclusive } = this.current;
        const at = this.buf.indexOf(close);
        if (at < 0 && !final) return;
        const inner = at < 0 ? this.buf : this.buf.slice(0, at);
        const body = inclusive ? open + inner + (at < 0 ? "" : close) : inner;
        const calls = this.format.read(body, this.tools);
        if (calls && calls.length > 0) {
          this.out.calls(calls);
          this.buf = at < 0 ? "" : this.buf.slice(at + close.length);
          this.state = "after";
        } else {
          this.out.content(open);
          this.state = "text";
        }
        continue;
      }
      this.buf = this.buf.slice(skipSpace(this.buf));
      if (this.buf === "") return;
      const opener = this.openers.find((candidate) => this.buf.startsWith(candidate.open));
      if (opener) {
        this.enter(opener, 0);
        continue;
      }
      const drop = (this.format.drop ?? []).find((tag) => this.buf.startsWith(tag));
      if (drop) {
        this.buf = this.buf.slice(drop.length);
        continue;
      }
      if (!final && this.held.some((tag) => tag.startsWith(this.buf))) return;
      this.state = "text";
    }
  }
}

/** A block's open and close tags; `inclusive` when both belong to the body the reader gets. */
type Opener = { open: string; close: string; inclusive: boolean };

/** The JSON Schema of parameter `key` of tool `name` among `tools`, or `undefined` when not declared. */
export function parameterSchema(tools: readonly ChatTool[], name: string, key: string): unknown {
  const tool = tools.find((candidate) => candidate.function.name === name);
  const properties = tool?.function.parameters?.properties;
  if (typeof properties !== "object" || properties === null || Array.isArray(properties)) return undefined;
  return Object.hasOwn(properties, key) ? (properties as Record<string, unknown>)[key] : undefined;
}

/** The schema's types (`type` as a string or list, else the `type`s of `anyOf`/`oneOf`), lower-cased. */
function schemaTypes(schema: unknown): string[] {
  if (typeof schema !== "object" || schema === null) return [];
  const record = schema as Record<string, unknown>;
  const type = record.type;
  if (typeof type === "string") return [type.toLowerCase()];
  if (Array.isArray(type)) return type.filter((t) => typeof t === "string").map((t) => t.toLowerCase());
  const union = Array.isArray(record.anyOf) ? record.anyOf : Array.isArray(record.oneOf) ? record.oneOf : [];
  return union.flatMap(schemaTypes);
}

function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

/**
 * Converts a parameter written as text to the JSON value its schema asks for, as vLLM's `qwen3_coder`
 * tool parser does: a nullable schema takes `null`/`None` as null; `string` keeps the text as is;
 * `integer` and `number` take a decimal number; `boolean` takes `true`/`false` (any case); `object`
 * and `array` take JSON; `null` takes null. Text that does not fit its type stays a string (vLLM turns a
 * bad boolean into `false`; keeping the text loses nothing). An undeclared parameter, or a schema
 * without a type, is JSON when the text parses as JSON, else a string.
 */
export function convertParameter(text: string, schema: unknown): unknown {
  const types = schemaTypes(schema);
  const trimmed = text.trim();
  const lower = trimmed.toLowerCase();
  if (types.length === 0) return parseJson(trimmed)?.value ?? (trimmed === "null" ? null : text);
  const isNull = lower === "null" || lower === "none";
  if (types.includes("null") && isNull) return null;
  for (const type of types) {
    if (type === "string") return text;
    if (type === "integer") {
      if (/^[-+]?\d+$/.test(trimmed)) return Number(trimmed);
    } else if (type === "number") {
      if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(trimmed)) return Number(trimmed);
    } else if (type === "boolean") {
      if (lower === "true" || lower === "false") return lower === "true";
    } else if (type === "object" || type === "array") {
      const parsed = parseJson(trimmed);
      const fits =
        parsed !== undefined &&
        (type === "array"
          ? Array.isArray(parsed.value)
          : typeof parsed.value === "object" && parsed.value !== null && !Array.isArray(parsed.value));
      if (fits) return parsed?.value;
    } else if (type === "null" && isNull) return null;
  }
  return text;
}

/** One call as {@link ParsedCall}: the parameters, converted per the tools' schemas, as compact JSON. */
export function typedCall(
  name: string,
  params: readonly [string, string][],
  tools: readonly ChatTool[],
): ParsedCall {
  const args: Record<string, unknown> = {};
  for (const [key, text] of params) args[key] = convertParameter(text, parameterSchema(tools, name, key));
  return { name, arguments: JSON.stringify(args) };
}

/** Removes one newline at each end of `text` (the lines the templates put around a value). */
export function stripNewlines(text: string): string {
  let out = text;
  if (out.startsWith("\r\n")) out = out.slice(2);
  else if (out.startsWith("\n")) out = out.slice(1);
  if (out.endsWith("\r\n")) out = out.slice(0, -2);
  else if (out.endsWith("\n")) out = out.slice(0, -1);
  return out;
}

/**
 * A cursor over a block body (from offset `at`, defaults to 0) for the readers: `expect(tag)` skips whitespace and then `tag` (false when
 * something else comes), `take(tag)` the same without skipping whitespace, `until(tag)` returns the text up to `tag` and moves past it (undefined when
 * `tag` never comes), `untilClose` the same, tolerating a forgotten close tag, `done()` is true when only
 * whitespace is left.
 */
export class BodyCursor {
  constructor(
    private readonly text: string,
    private at = 0,
  ) {}

  /** Skips whitespace, then `tag` if it comes next; returns whether it did. */
  expect(tag: string): boolean {
    const from = skipSpace(this.text, this.at);
    if (!this.text.startsWith(tag, from)) return false;
    this.at = from + tag.length;
    return true;
  }

  /** `tag` if it comes right at the cursor (no whitespace skipped); returns whether it did. */
  take(tag: string): boolean {
    if (!this.text.startsWith(tag, this.at)) return false;
    this.at += tag.length;
    return true;
  }

  /** True when `tag` comes next after whitespace (the cursor does not move). */
  peek(tag: string): boolean {
    return this.text.startsWith(tag, skipSpace(this.text, this.at));
  }

  /** The text up to the next `tag`, moving past the tag; `undefined` (cursor unmoved) when none. */
  until(tag: string): string | undefined {
    const end = this.text.indexOf(tag, this.at);
    if (end < 0) return undefined;
    const text = this.text.slice(this.at, end);
    this.at = end + tag.length;
    return text;
  }

  /**
   * The text up to the next `close` (moving past it) or, when one of `also` comes first, up to that one
   * (left in place): a value whose close tag was forgotten ends where the next element starts.
   * `undefined` (cursor unmoved) when none comes.
   */
  untilClose(close: string, also: readonly string[]): string | undefined {
    let end = this.text.indexOf(close, this.at);
    let skip = close.length;
    for (const tag of also) {
      const at = this.text.indexOf(tag, this.at);
      if (at >= 0 && (end < 0 || at < end)) {
        end = at;
        skip = 0;
      }
    }
    if (end < 0) return undefined;
    const text = this.text.slice(this.at, end);
    this.at = end + skip;
    return text;
  }

  /** True when only whitespace is left. */
  done(): boolean {
    return skipSpace(this.text, this.at) === this.text.length;
  }
}

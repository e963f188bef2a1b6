/**
 * Generic JSON tool calls: the whole output is a JSON object `{"name": …, "arguments": …}` or an array of
 * them — the exact shape `toolChoiceToJsonSchema` (../toolSchema.ts) makes the grammar force for `tool_choice`
 * `"required"` / named — also accepting llama.cpp's generic-format wrappers `{"tool_calls": [...]}`,
 * `{"tool_call": {...}}` and `{"response": "text"}`.
 */
import { scanJsonValueEnd, skipSpace } from "../textScan.ts";
import { BufferedToolParser, callsFromJsonValue, type ParsedCall } from "./toolParser.ts";

/** Reads a parsed top-level value as calls, or as a `{"response"}` text, or neither. */
function readGeneric(value: unknown): { calls: ParsedCall[] } | { text: string } | undefined {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    if (keys.length === 1 && typeof record.response === "string") return { text: record.response };
    if (keys.length === 1 && Array.isArray(record.tool_calls)) {
      const calls = callsFromJsonValue(record.tool_calls, true);
      return calls ? { calls } : undefined;
    }
    if (keys.length === 1 && record.tool_call !== undefined) {
      const calls = callsFromJsonValue(record.tool_call, false);
      return calls ? { calls } : undefined;
    }
  }
  const calls = callsFromJsonValue(value, true);
  return calls ? { calls } : undefined;
}

/**
 * Incremental generic parser. Only a JSON value at the very start of the output (after whitespace) can
 * be calls; leading whitespace is held until that is decided. The value is judged when it closes;
 * whitespace after it is dropped and any further text streams as content. Output that does not start
 * with `{`/`[`, or whose value is not calls, is content verbatim.
 */
export class GenericJsonToolParser extends BufferedToolParser {
  private state: "start" | "json" | "text" | "after" = "start";
  private prefix = "";

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "start") {
        const i = skipSpace(this.buf);
        if (i === this.buf.length && !final) return;
        if (this.buf[i] === "{" || this.buf[i] === "[") {
          this.prefix = this.buf.slice(0, i);
          this.buf = this.buf.slice(i);
          this.state = "json";
        } else {
          this.state = "text";
        }
        continue;
      }
      if (this.state === "json") {
        const endAt = scanJsonValueEnd(this.buf, 0);
        if (endAt < 0 && !final) return;
        let read: ReturnType<typeof readGeneric>;
        try {
          read = endAt < 0 ? undefined : readGeneric(JSON.parse(this.buf.slice(0, endAt)));
        } catch {
          read = undefined;
        }
        if (!read) {
          this.out.content(this.prefix);
          this.state = "text";
          continue;
        }
        if ("calls" in read) this.out.calls(read.calls);
        else this.out.content(read.text);
        this.buf = this.buf.slice(endAt);
        this.state = "after";
        continue;
      }
      if (this.state === "after") {
        this.buf = this.buf.slice(skipSpace(this.buf));
        if (this.buf === "") return;
        this.state = "text";
      }
      this.out.content(this.buf);
      this.buf = "";
      return;
    }
  }
}

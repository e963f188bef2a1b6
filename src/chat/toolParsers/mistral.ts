/**
 * Mistral tool calls: `[TOOL_CALLS][{"name": …, "arguments": …}, …]` (tokenizer v3, Mistral 7B v0.3 /
 * Nemo / Small, as vLLM's `mistral` tool parser reads them) and the newer `[TOOL_CALLS]name[ARGS]{…}`
 * form (tokenizer v11+, Devstral / Magistral / Ministral 3), which may repeat per call, with Mistral Small
 * 3.2's `[TOOL_CALLS]name[CALL_ID]id[ARGS]{…}` variant.
 */
import { partialTagSuffix, scanJsonValueEnd, skipSpace } from "../textScan.ts";
import { BufferedToolParser, callFromJson, callsFromJsonText, type ParsedCall } from "./toolParser.ts";

const TAG = "[TOOL_CALLS]";
const ARGS = "[ARGS]";
const CALL_ID = "[CALL_ID]";
const NAME_CHARS = /^[A-Za-z0-9_.-]*$/;
const MAX_NAME_LENGTH = 256;

/** The call `name[ARGS]{…}` stands for, when `argsText` is a complete JSON object. */
function callFromJsonArguments(name: string, argsText: string): ParsedCall | undefined {
  if (!argsText.startsWith("{")) return undefined;
  try {
    return callFromJson({ name, arguments: JSON.parse(argsText) });
  } catch {
    return undefined;
  }
}

/**
 * Incremental Mistral parser. Text before `[TOOL_CALLS]` streams as content (a possible start of the tag
 * is held back). After the tag comes either a JSON array/object of `{"name", "arguments"}` calls, or a
 * bare function name, `[ARGS]` and a JSON object. A call is emitted when its JSON closes. Whitespace after
 * a call is dropped; a further `[TOOL_CALLS]` starts more calls; other text streams as content. Anything
 * that does not read as a call falls back to content verbatim (the tag included) and scanning resumes
 * after the part already judged.
 */
export class MistralToolParser extends BufferedToolParser {
  private state: "text" | "tagged" | "json" | "name" | "args" | "after" = "text";
  /** Raw text consumed for the current candidate, re-emitted as content on fallback. */
  private prefix = "";
  private name = "";

  private fallback(): void {
    this.out.content(this.prefix);
    this.prefix = "";
    this.state = "text";
  }

  /** Handles the `json` and `args` states: waits for the JSON value to close, then judges it. */
  private readJson(final: boolean): boolean {
    const endAt = scanJsonValueEnd(this.buf, 0);
    if (endAt < 0 && !final) return false;
    const text = endAt < 0 ? "" : this.buf.slice(0, endAt);
    let calls: ParsedCall[] | undefined;
    if (this.state === "json") {
      calls = callsFromJsonText(text, true);
    } else {
      const call = callFromJsonArguments(this.name, text);
      calls = call ? [call] : undefined;
    }
    if (calls) {
      this.out.calls(calls);
      this.buf = this.buf.slice(endAt);
      this.prefix = "";
      this.state = "after";
    } else {
      this.prefix += this.buf.slice(0, 1);
      this.buf = this.buf.slice(1);
      this.fallback();
    }
    return true;
  }

  protected run(final: boolean): void {
    for (;;) {
      switch (this.state) {
        case "text": {
          const at = this.buf.indexOf(TAG);
          if (at < 0) {
            this.emitHoldingMarkers(final, [TAG]);
            return;
          }
          this.out.content(this.buf.slice(0, at));
          this.buf = this.buf.slice(at + TAG.length);
          this.prefix = TAG;
          this.state = "tagged";
          break;
        }
        case "tagged": {
          const i = skipSpace(this.buf);
          if (i === this.buf.length) {
            if (!final) return;
            this.fallback();
            break;
          }
          this.prefix += this.buf.slice(0, i);
          this.buf = this.buf.slice(i);
          this.state = this.buf[0] === "[" || this.buf[0] === "{" ? "json" : "name";
          break;
        }
        case "name": {
          const at = this.buf.indexOf(ARGS);
          const raw =
            at >= 0
              ? this.buf.slice(0, at)
              : this.buf.slice(0, this.buf.length - partialTagSuffix(this.buf, [ARGS, CALL_ID]));
          // Mistral Small 3.2 writes `name[CALL_ID]id[ARGS]{…}`; the id is checked and not kept.
          const idAt = raw.indexOf(CALL_ID);
          const name = idAt >= 0 ? raw.slice(0, idAt) : raw;
          const callId = idAt >= 0 ? raw.slice(idAt + CALL_ID.length) : "";
          const badName =
            !NAME_CHARS.test(name) || name.length > MAX_NAME_LENGTH || (idAt >= 0 && name === "");
          if (
            badName ||
            !NAME_CHARS.test(callId) ||
            callId.length > MAX_NAME_LENGTH ||
            (at >= 0 && name === "")
          ) {
            this.fallback();
            break;
          }
          if (at < 0) {
            if (!final) return;
            this.fallback();
            break;
          }
          this.name = name;
          this.prefix += raw + ARGS;
          this.buf = this.buf.slice(at + ARGS.length);
          this.state = "args";
          break;
        }
        case "args": {
          const i = skipSpace(this.buf);
          if (i === this.buf.length && !final) return;
          this.prefix += this.buf.slice(0, i);
          this.buf = this.buf.slice(i);
          if (this.buf[0] !== "{") {
            this.fallback();
            break;
          }
          if (!this.readJson(final)) return;
          break;
        }
        case "json":
          if (!this.readJson(final)) return;
          break;
        case "after":
          this.buf = this.buf.slice(skipSpace(this.buf));
          if (this.buf === "") return;
          if (this.buf.startsWith(TAG)) {
            this.buf = this.buf.slice(TAG.length);
            this.prefix = TAG;
            this.state = "tagged";
          } else if (!final && TAG.startsWith(this.buf)) {
            return;
          } else {
            this.state = "text";
          }
          break;
      }
    }
  }
}

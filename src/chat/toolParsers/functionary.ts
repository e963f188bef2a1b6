/**
 * Functionary v3.2 tool calls: `>>>NAME\n{…json…}` per call and `>>>all\ntext` for text to the user, as
 * meetkai-functionary-medium-v3.2.jinja asks for and llama.cpp's functionary v3.2 handler reads them. The
 * generation prompt already ends with `>>>`, so the output starts with a recipient line.
 */
import { scanJsonValueEnd, skipSpace } from "../textScan.ts";
import { BufferedToolParser, callFromJson } from "./toolParser.ts";

const MARK = ">>>";
const NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const MAX_NAME_LENGTH = 256;

/**
 * Incremental functionary v3.2 parser. A recipient line (`NAME` then a newline, at the start of the
 * output or after `>>>`) names either `all` (the text up to the next `>>>` is content) or a function
 * (the JSON object that follows is its arguments, emitted as one call when it closes). Whitespace between
 * calls is dropped. A recipient line that is not a name, or a function without a JSON object, falls back
 * to content verbatim (`>>>` included).
 */
export class FunctionaryV32ToolParser extends BufferedToolParser {
  private state: "recipient" | "args" | "text" | "after" = "recipient";
  /** Raw text of the current candidate, re-emitted as content on fallback. */
  private prefix = "";
  private name = "";

  private fallback(): void {
    this.out.content(this.prefix);
    this.prefix = "";
    this.state = "text";
  }

  protected run(final: boolean): void {
    for (;;) {
      if (this.state === "recipient") {
        const at = this.buf.indexOf("\n");
        const line = at < 0 ? this.buf : this.buf.slice(0, at);
        const plausible = line.length <= MAX_NAME_LENGTH && (line === "" || NAME.test(line.trim()));
        if (at < 0 && !final && plausible) return;
        if (at < 0 || !plausible || line.trim() === "") {
          this.fallback();
          continue;
        }
        this.buf = this.buf.slice(at + 1);
        if (line.trim() === "all") {
          this.prefix = "";
          this.state = "text";
        } else {
          this.name = line.trim();
          this.prefix += `${line}\n`;
          this.state = "args";
        }
        continue;
      }
      if (this.state === "args") {
        const i = skipSpace(this.buf);
        if (i === this.buf.length && !final) return;
        const end = this.buf[i] === "{" ? scanJsonValueEnd(this.buf, i) : -2;
        if (end === -1 && !final) return;
        let call: ReturnType<typeof callFromJson>;
        if (end > 0) {
          try {
            call = callFromJson({ name: this.name, arguments: JSON.parse(this.buf.slice(i, end)) });
          } catch {
            call = undefined;
          }
        }
        if (!call || end < 0) {
          this.fallback();
          continue;
        }
        this.out.calls([call]);
        this.buf = this.buf.slice(end);
        this.prefix = "";
        this.state = "after";
        continue;
      }
      if (this.state === "after") {
        this.buf = this.buf.slice(skipSpace(this.buf));
        if (this.buf === "") return;
        if (!final && MARK.startsWith(this.buf) && this.buf !== MARK) return;
        this.state = "text";
        continue;
      }
      const at = this.buf.indexOf(MARK);
      if (at < 0) {
        this.emitHoldingMarkers(final, [MARK]);
        return;
      }
      this.out.content(this.buf.slice(0, at));
      this.buf = this.buf.slice(at + MARK.length);
      this.prefix = MARK;
      this.state = "recipient";
    }
  }
}

/**
 * Pythonic tool calls: a Python list of calls with keyword arguments, `[get_weather(city='Paris'),
 * get_time(tz="UTC")]`, as vLLM's `pythonic` parser reads them (Llama 3.2 / 4, OLMo 3, LFM2 inside its
 * `<|tool_call_start|>` markers). The literals are read by a small parser of our own (strings, numbers,
 * `True`/`False`/`None`, lists, tuples, dicts): nothing is evaluated.
 */
import type { ParsedCall } from "./toolParser.ts";

const IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
const NAME = /[A-Za-z_][A-Za-z0-9_.-]*/y;
const NUMBER = /-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/y;

/**
 * Where the Python list, tuple or dict that opens at `text[0]` ends: the index just past its matching
 * closer, or -1 when the text stops before it closes. `'…'` and `"…"` strings and their escapes are
 * honoured; a mismatched closer ends the scan there (the parse then fails and the caller falls back).
 */
export function scanPythonValueEnd(text: string): number {
  const stack: string[] = [];
  let quote = "";
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (quote) {
      if (char === "\\") i++;
      else if (char === quote) quote = "";
      continue;
    }
    if (char === "'" || char === '"') quote = char;
    else if (char === "[") stack.push("]");
    else if (char === "(") stack.push(")");
    else if (char === "{") stack.push("}");
    else if (char === "]" || char === ")" || char === "}") {
      if (stack.pop() !== char || stack.length === 0) return i + 1;
    }
  }
  return -1;
}

class PythonReader {
  pos = 0;
  constructor(private readonly text: string) {}

  fail(): never {
    throw new SyntaxError(`unexpected input at ${this.pos}`);
  }

  space(): void {
    while (this.pos < this.text.length && /\s/.test(this.text[this.pos] ?? "")) this.pos++;
  }

  eat(char: string): boolean {
    this.space();
    if (this.text[this.pos] !== char) return false;
    this.pos++;
    return true;
  }

  expect(char: string): void {
    if (!this.eat(char)) this.fail();
  }

  match(pattern: RegExp): string | undefined {
    this.space();
    pattern.lastIndex = this.pos;
    const found = pattern.exec(this.text);
    if (!found) return undefined;
    this.pos += found[0].length;
    return found[0];
  }

  /** Items separated by commas (a trailing comma allowed) until `close`. */
  items(close: string, item: () => void): void {
    if (this.eat(close)) return;
    for (;;) {
      item();
      if (this.eat(close)) return;
      this.expect(",");
      if (this.eat(close)) return;
    }
  }

  string(): string {
    const quote = this.text[this.pos];
    this.pos++;
    let out = "";
    for (;;) {
      const char = this.text[this.pos++];
      if (char === undefined) this.fail();
      if (char === quote) return out;
      if (char !== "\\") {
        out += char;
        continue;
      }
      const next = this.text[this.pos++];
      const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", "0": "\0", "\n": "" };
      if (next === "u" || next === "x") {
        const length = next === "u" ? 4 : 2;
        const hex = this.text.slice(this.pos, this.pos + length);
        if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== length) this.fail();
        out += String.fromCharCode(Number.parseInt(hex, 16));
        this.pos += length;
      } else if (next !== undefined && simple[next] !== undefined) out += simple[next];
      else if (next !== undefined) out += next;
      else this.fail();
    }
  }

  value(): unknown {
    this.space();
    const char = this.text[this.pos];
    if (char === "'" || char === '"') return this.string();
    if (char === "[" || char === "(") {
      this.pos++;
      const list: unknown[] = [];
      this.items(char === "[" ? "]" : ")", () => list.push(this.value()));
      return list;
    }
    if (char === "{") {
      this.pos++;
      const dict: Record<string, unknown> = {};
      this.items("}", () => {
        const key = this.value();
        if (typeof key !== "string" && typeof key !== "number") this.fail();
        this.expect(":");
        dict[String(key)] = this.value();
      });
      return dict;
    }
    const number = this.match(NUMBER);
    if (number !== undefined) return Number(number);
    const word = this.match(IDENT);
    if (word === "True") return true;
    if (word === "False") return false;
    if (word === "None") return null;
    return this.fail();
  }

  call(): ParsedCall {
    const name = this.match(NAME);
    if (name === undefined) this.fail();
    this.expect("(");
    const args: Record<string, unknown> = {};
    this.items(")", () => {
      const key = this.match(IDENT);
      if (key === undefined) this.fail();
      this.expect("=");
      args[key] = this.value();
    });
    return { name, arguments: JSON.stringify(args) };
  }
}

/**
 * Reads `text` as a Python list of keyword-argument calls (`[f(a=1), g()]`; surrounding whitespace
 * allowed). Returns the calls, or `undefined` for anything else: positional arguments, expressions,
 * non-literal values, or an empty list.
 */
export function callsFromPythonList(text: string): ParsedCall[] | undefined {
  const reader = new PythonReader(text);
  const calls: ParsedCall[] = [];
  try {
    reader.expect("[");
    reader.items("]", () => calls.push(reader.call()));
    reader.space();
    if (reader.pos !== text.length) return undefined;
  } catch {
    return undefined;
  }
  return calls.length > 0 ? calls : undefined;
}

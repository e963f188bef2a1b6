/**
 * Gemma 4's tool-call argument syntax: `{city:<|"|>Paris<|"|>,days:[1,2],opts:{deep:true}}`, keys bare
 * (or quoted with `<|"|>`), strings between `<|"|>` tokens, numbers, `true`/`false`/`null`, lists and
 * maps — as google-gemma-4-31B-it.jinja renders calls and llama.cpp's Gemma 4 parser reads them.
 */

const QUOTE = '<|"|>';
const KEY = /[A-Za-z_][A-Za-z0-9_.-]*/y;
const NUMBER = /-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/y;
const WORD = /true|false|null/y;

class Gemma4Reader {
  pos = 0;
  constructor(private readonly text: string) {}

  fail(): never {
    throw new SyntaxError(`unexpected input at ${this.pos}`);
  }

  space(): void {
    while (/\s/.test(this.text[this.pos] ?? "")) this.pos++;
  }

  eat(token: string): boolean {
    this.space();
    if (!this.text.startsWith(token, this.pos)) return false;
    this.pos += token.length;
    return true;
  }

  match(pattern: RegExp): string | undefined {
    this.space();
    pattern.lastIndex = this.pos;
    const found = pattern.exec(this.text);
    if (!found) return undefined;
    this.pos += found[0].length;
    return found[0];
  }

  quoted(): string {
    const end = this.text.indexOf(QUOTE, this.pos);
    if (end < 0) this.fail();
    const value = this.text.slice(this.pos, end);
    this.pos = end + QUOTE.length;
    return value;
  }

  items(close: string, item: () => void): void {
    if (this.eat(close)) return;
    for (;;) {
      item();
      if (this.eat(close)) return;
      if (!this.eat(",")) this.fail();
    }
  }

  map(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    this.items("}", () => {
      const key = this.eat(QUOTE) ? this.quoted() : this.match(KEY);
      if (key === undefined) this.fail();
      if (!this.eat(":")) this.fail();
      out[key] = this.value();
    });
    return out;
  }

  value(): unknown {
    if (this.eat(QUOTE)) return this.quoted();
    if (this.eat("{")) return this.map();
    if (this.eat("[")) {
      const list: unknown[] = [];
      this.items("]", () => list.push(this.value()));
      return list;
    }
    const number = this.match(NUMBER);
    if (number !== undefined) return Number(number);
    const word = this.match(WORD);
    if (word !== undefined) return JSON.parse(word);
    return this.fail();
  }
}

/**
 * Reads Gemma 4 arguments `{…}` (the whole of `text`, surrounding whitespace allowed) into a plain
 * object; `undefined` when the text is anything else.
 */
export function gemma4Arguments(text: string): Record<string, unknown> | undefined {
  const reader = new Gemma4Reader(text);
  try {
    if (!reader.eat("{")) return undefined;
    const value = reader.map();
    reader.space();
    return reader.pos === text.length ? value : undefined;
  } catch {
    return undefined;
  }
}

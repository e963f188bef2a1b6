/**
 * Rule names of GBNF text: a small lexer that tells names apart from string literals, character classes
 * and comments, and renames rules so that two grammars can be joined (the forced tool-call grammars of
 * `serving/guided/toolGrammars.ts` join one grammar per tool).
 */

/** llama.cpp's GBNF name characters (`is_word_char`). */
function isWordChar(char: string | undefined): boolean {
  return char !== undefined && /[A-Za-z0-9-]/.test(char);
}

/** The index just past the literal opened at `start` (`"…"` or `[…]`), escapes honoured. */
function literalEnd(text: string, start: number): number {
  const close = text[start] === '"' ? '"' : "]";
  let i = start + 1;
  while (i < text.length && text[i] !== close) i += text[i] === "\\" ? 2 : 1;
  return Math.min(i + 1, text.length);
}

/**
 * Splits GBNF text into its rule names and the rest: calls `onName` for every name outside string
 * literals, character classes and comments, and returns the text with each name replaced by what
 * `onName` returns.
 */
function mapGbnfNames(gbnf: string, onName: (name: string) => string): string {
  let out = "";
  let i = 0;
  while (i < gbnf.length) {
    const char = gbnf[i];
    let end = i + 1;
    if (char === '"' || char === "[") end = literalEnd(gbnf, i);
    else if (char === "#") {
      const newline = gbnf.indexOf("\n", i);
      end = newline < 0 ? gbnf.length : newline;
    } else if (isWordChar(char)) {
      while (isWordChar(gbnf[end])) end++;
      out += onName(gbnf.slice(i, end));
      i = end;
      continue;
    }
    out += gbnf.slice(i, end);
    i = end;
  }
  return out;
}

/**
 * `gbnf` with every rule name prefixed by `prefix` (so that it can be joined to another grammar); only
 * defined rules are renamed (not the digits of a `{m,n}` repetition).
 */
export function prefixRules(gbnf: string, prefix: string): string {
  const defined = new Set([...gbnf.matchAll(/^\s*([A-Za-z0-9-]+)\s*::=/gm)].map((m) => m[1]));
  return mapGbnfNames(gbnf, (name) => (defined.has(name) ? `${prefix}${name}` : name));
}

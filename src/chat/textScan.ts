/**
 * Small text-scanning helpers shared by the incremental output parsers: holding back a possible start of
 * a markup tag, and finding where a JSON object or array ends without parsing it.
 */

/**
 * Length of the longest suffix of `text` that is a proper prefix of one of `tags` (0 when none): the
 * part a streaming parser must hold back because the next delta may complete it into a tag.
 * E.g. `partialTagSuffix("Hi <tool_", ["<tool_call>"])` is 6.
 */
export function partialTagSuffix(text: string, tags: readonly string[]): number {
  let best = 0;
  for (const tag of tags) {
    const max = Math.min(tag.length - 1, text.length);
    for (let length = max; length > best; length--) {
      if (text.endsWith(tag.slice(0, length))) {
        best = length;
        break;
      }
    }
  }
  return best;
}

/** True for the whitespace JSON allows between tokens (space, tab, CR, LF). */
export function isJsonSpace(char: string | undefined): boolean {
  return char === " " || char === "\t" || char === "\n" || char === "\r";
}

/** Index of the first character at or after `from` that is not JSON whitespace (`text.length` if none). */
export function skipSpace(text: string, from = 0): number {
  let i = from;
  while (i < text.length && isJsonSpace(text[i])) i++;
  return i;
}

/**
 * Where the JSON object or array that opens at `text[start]` (`{` or `[`) ends: the index just past its
 * matching closer, or -1 when the text stops before it closes. Strings and escapes are honoured; the
 * value is not validated (a mismatched closer such as `{]` ends the scan there, so `JSON.parse` of the
 * slice fails and the caller falls back deterministically).
 */
export function scanJsonValueEnd(text: string, start: number): number {
  const stack: string[] = [];
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const char = text[i];
    if (inString) {
      if (char === "\\") i++;
      else if (char === '"') inString = false;
      continue;
    }
    if (char === '"') inString = true;
    else if (char === "{") stack.push("}");
    else if (char === "[") stack.push("]");
    else if (char === "}" || char === "]") {
      if (stack.pop() !== char) return i + 1;
      if (stack.length === 0) return i + 1;
    }
  }
  return -1;
}

/**
 * The code of a Jinja template: the inside of its `{% … %}` and `{{ … }}` blocks joined by newlines,
 * comments (`{# … #}`) removed — what parser detection looks at, so prose never triggers it.
 */
export function jinjaCode(template: string): string {
  const noComments = template.replace(/\{#[\s\S]*?#\}/g, "");
  return (noComments.match(/\{%[\s\S]*?%\}|\{\{[\s\S]*?\}\}/g) ?? []).join("\n");
}

/**
 * A small Markdown renderer for the playground's assistant replies: paragraphs (a single newline is a
 * line break, as chat models mean it), headings, `-`/`*`/`+` and `1.` lists (one level), fenced code
 * blocks, inline code, `**bold**`, `*italic*` / `_italic_` and `[links](https://…)`. Every piece of
 * the source text is HTML-escaped before it reaches the output, so the result is safe for
 * `innerHTML`; links keep only http(s) URLs (others stay plain text) and open with
 * `rel="noopener noreferrer"`. Partial text (a reply still streaming: an unclosed fence, `**` or `[`)
 * renders without error: an open fence shows its code so far, unclosed emphasis stays literal.
 */

/** Escapes `& < > " '` so that the text is inert in HTML content and in quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;

/**
 * Renders Markdown `source` to an HTML string in which all of the source's text is escaped. Headings
 * `#`..`######` become `<h4>`..`<h6>` (capped), below the transcript's own headings. Line breaks and
 * blank lines stay in the text, so plain text keeps its exact textContent.
 */
export function markdownToHtml(source: string): string {
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  const out: string[] = [];
  let paragraph: string[] = [];
  let list: { tag: "ul" | "ol"; items: string[] } | null = null;
  const flushParagraph = () => {
    // "<br>\n": the line break shows, and the element's textContent keeps the source's newline.
    if (paragraph.length > 0) out.push(`<p>${paragraph.map(renderInline).join("<br>\n")}</p>`);
    paragraph = [];
  };
  const flushList = () => {
    if (list)
      out.push(
        `<${list.tag}>${list.items.map((item) => `<li>${renderInline(item)}</li>`).join("")}</${list.tag}>`,
      );
    list = null;
  };
  const flush = () => {
    flushParagraph();
    flushList();
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const marker = fence[1] ?? "```";
      const code: string[] = [];
      // The block ends at a fence of the same character at least as long (or at the end: streaming).
      while (++i < lines.length) {
        const closing = (lines[i] ?? "").trim();
        if (closing.startsWith(marker) && /^(`+|~+)$/.test(closing) && closing[0] === marker[0]) break;
        code.push(lines[i] ?? "");
      }
      const lang = (fence[2] ?? "").replace(/[^\w+#.-]/g, "");
      const attr = lang ? ` class="language-${escapeHtml(lang)}" data-lang="${escapeHtml(lang)}"` : "";
      out.push(`<pre><code${attr}>${escapeHtml(code.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      const level = Math.min(6, (heading[1] ?? "#").length + 3);
      out.push(`<h${level}>${renderInline(heading[2] ?? "")}</h${level}>`);
      continue;
    }
    const bullet = BULLET.exec(line);
    const numbered = bullet ? null : NUMBERED.exec(line);
    if (bullet || numbered) {
      flushParagraph();
      const tag = bullet ? "ul" : "ol";
      if (list && list.tag !== tag) flushList();
      list ??= { tag, items: [] };
      list.items.push((bullet ?? numbered)?.[1] ?? "");
      continue;
    }
    if (line.trim() === "") {
      flush();
      // A blank line adds a (non-rendered) newline between blocks, so textContent keeps it too.
      out.push("");
      continue;
    }
    if (list && /^\s{2,}\S/.test(line)) {
      // An indented line continues the list's last item.
      list.items[list.items.length - 1] += ` ${line.trim()}`;
      continue;
    }
    flushList();
    paragraph.push(line);
  }
  flush();
  // Blocks are joined by newlines (whitespace between blocks does not render): the HTML's textContent
  // is the source's text where the source has no Markdown syntax.
  return out.join("\n");
}

/**
 * Inline Markdown of one block's text: code spans and links are cut out first (their content is not
 * re-read as emphasis), the rest is escaped, then `**`/`__` and `*`/`_` pairs become `<strong>`/`<em>`.
 */
export function renderInline(text: string): string {
  const held: string[] = [];
  const hold = (html: string) => `\u0000${held.push(html) - 1}\u0000`;
  let rest = text.replace(/\u0000/g, "");
  rest = rest.replace(/(`+)([^`]|[^`].*?[^`])\1(?!`)/g, (_m, _ticks: string, code: string) =>
    hold(`<code>${escapeHtml(code.trim() === "" ? code : code.replace(/^ (.*) $/, "$1"))}</code>`),
  );
  rest = rest.replace(
    /\[([^\]\n]+)\]\(\s*<?([^\s)>]+)>?(?:\s+"[^"]*")?\s*\)/g,
    (_m, label: string, url: string) => {
      const inner = renderEmphasis(escapeHtml(label));
      return /^https?:\/\/[^\s]+$/i.test(url)
        ? hold(`<a href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${inner}</a>`)
        : hold(inner);
    },
  );
  const html = renderEmphasis(escapeHtml(rest));
  return html.replace(/\u0000(\d+)\u0000/g, (_m, index: string) => held[Number(index)] ?? "");
}

/** Bold and italic on already-escaped text. */
function renderEmphasis(html: string): string {
  return html
    .replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^\w])__(?=\S)(.+?)(?<=\S)__(?!\w)/g, "$1<strong>$2</strong>")
    .replace(/(^|[^*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?!\*)/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)/g, "$1<em>$2</em>");
}

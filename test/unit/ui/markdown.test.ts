import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { escapeHtml, markdownToHtml } from "../../../ui/src/markdown.ts";

describe("markdownToHtml", () => {
  it("escapes every HTML tag and attribute character of the source", () => {
    const html = markdownToHtml('<script>alert("x")</script> & <img src=x onerror=alert(1)>');
    assert.ok(!html.includes("<script") && !html.includes("<img"), html);
    assert.match(html, /&#60;script&#62;alert\(&#34;x&#34;\)&#60;\/script&#62; &#38; &#60;img/);
    assert.equal(escapeHtml(`<>&"'`), "&#60;&#62;&#38;&#34;&#39;");
  });

  it("renders paragraphs, headings, emphasis, inline code and lists", () => {
    assert.equal(
      markdownToHtml("## Plan\nFirst **bold** and *it* and `a<b`\nnext line\n\n- one\n- _two_\n\n1. a\n2. b"),
      "<h5>Plan</h5>\n<p>First <strong>bold</strong> and <em>it</em> and <code>a&#60;b</code><br>\nnext line</p>" +
        "\n\n<ul><li>one</li><li><em>two</em></li></ul>\n\n<ol><li>a</li><li>b</li></ol>",
    );
    assert.equal(markdownToHtml("snake_case and 2*3*4"), "<p>snake_case and 2*3*4</p>");
  });

  it("links only http(s) URLs, with rel=noopener noreferrer; javascript: stays text", () => {
    assert.equal(
      markdownToHtml("[docs](https://example.com/?a=1&b=2)"),
      '<p><a href="https://example.com/?a=1&#38;b=2" target="_blank" rel="noopener noreferrer">docs</a></p>',
    );
    for (const url of [
      "javascript:alert(1)",
      "JavaScript:alert(1)",
      "data:text/html,x",
      "vbscript:x",
      "//evil",
    ]) {
      const html = markdownToHtml(`[click](${url})`);
      assert.ok(!html.includes("<a"), html);
      assert.ok(!html.includes("href"), html);
    }
    const quoted = markdownToHtml('[a](https://x.com/"onmouseover="alert(1))');
    assert.ok(!/ onmouseover=/.test(quoted) && quoted.includes("&#34;onmouseover=&#34;"), quoted);
  });

  it("keeps a fenced code block's content verbatim (escaped, no Markdown inside)", () => {
    const code = 'const x = "<b>" && **y** || _z_;\n\n# not a heading\n- not a list';
    const html = markdownToHtml(`Before\n\`\`\`ts\n${code}\n\`\`\`\nAfter`);
    assert.equal(
      html,
      `<p>Before</p>\n<pre><code class="language-ts" data-lang="ts">${escapeHtml(code)}</code></pre>\n<p>After</p>`,
    );
    // The language is reduced to safe characters.
    assert.match(
      markdownToHtml('```"><script>\nx\n```'),
      /^<pre><code( class="language-[\w+#.-]*" data-lang="[\w+#.-]*")?>x<\/code><\/pre>$/,
    );
  });

  it("renders every prefix of a streaming reply without throwing", () => {
    const reply =
      "# Title\nSome **bold *nested* text** with `code` and [a link](https://example.com).\n\n" +
      "1. first\n2. second\n   continued\n\n```python\nprint('<hi>')\n```\n_done_ ~~~\n\u0000";
    for (let end = 0; end <= reply.length; end++) {
      const html = markdownToHtml(reply.slice(0, end));
      assert.equal(typeof html, "string");
      assert.ok(!/<(?!\/?(h[4-6]|p|br|strong|em|code|pre|a|ul|ol|li)[\s>])/.test(html), html);
    }
    assert.equal(
      markdownToHtml("```js\nlet a = 1"),
      '<pre><code class="language-js" data-lang="js">let a = 1</code></pre>',
    );
    assert.equal(markdownToHtml("partial **bo"), "<p>partial **bo</p>");
  });
});

/**
 * The API reference page (`GET /docs`): the OpenAPI document rendered to one self-contained HTML page
 * on the server (no script, no CDN, nothing fetched), so it works offline and under a strict
 * Content-Security-Policy.
 */

type Operation = {
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Record<string, unknown>[];
  "x-auth"?: string;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses?: Record<string, { $ref?: string; description?: string; content?: Record<string, unknown> }>;
};

type Document = {
  info?: { title?: string; version?: string; description?: string };
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, unknown> };
};

/** The page's Content-Security-Policy: inline styles only, nothing else from anywhere. */
export const DOCS_CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'";

/** Renders the OpenAPI document as an HTML page: one section per operation, schemas at the end. */
export function renderDocsPage(document: Record<string, unknown>): string {
  const doc = document as Document;
  const operations: string[] = [];
  for (const [path, methods] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(methods)) operations.push(renderOperation(method, path, op));
  }
  const schemas = Object.entries(doc.components?.schemas ?? {}).map(
    ([name, schema]) =>
      `<section id="schema-${escapeHtml(name)}"><h3>${escapeHtml(name)}</h3>${json(schema)}</section>`,
  );
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(doc.info?.title ?? "API")} ${escapeHtml(doc.info?.version ?? "")} — API reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
h2{margin-top:2em;border-bottom:1px solid #ddd}
.op{border:1px solid #ddd;border-radius:6px;padding:.5em 1em;margin:1em 0}
.method{font:bold 13px monospace;padding:2px 6px;border-radius:4px;color:#fff;background:#555}
.get{background:#2b7bb9}.post{background:#3a9b4f}
code,pre{font-family:ui-monospace,monospace;font-size:13px}
pre{background:#f6f8fa;padding:.6em;overflow:auto;max-height:30em}
.lock{color:#a60}
</style>
</head>
<body>
<h1>${escapeHtml(doc.info?.title ?? "API")} <small>${escapeHtml(doc.info?.version ?? "")}</small></h1>
<p>${escapeHtml(doc.info?.description ?? "")}</p>
<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>
<h2>Endpoints</h2>
${operations.join("\n")}
<h2>Schemas</h2>
${schemas.join("\n")}
</body>
</html>
`;
}

function renderOperation(method: string, path: string, op: Operation): string {
  const secured = (op.security ?? []).length > 0;
  const auth = secured
    ? `<p class="lock">Requires <code>Authorization: Bearer KEY</code> ${escapeHtml(op["x-auth"] ?? "when the server has --api-key")}.</p>`
    : "";
  const body = Object.entries(op.requestBody?.content ?? {})
    .map(
      ([type, media]) =>
        `<details><summary>Request body (${escapeHtml(type)})</summary>${json(media.schema)}</details>`,
    )
    .join("");
  const responses = Object.entries(op.responses ?? {})
    .map(([status, response]) => {
      const target = response.$ref?.split("/").pop() ?? "";
      const text = response.description ?? target;
      const content = response.content ? json(response.content) : "";
      return `<li><b>${escapeHtml(status)}</b> ${escapeHtml(text)}${content ? `<details><summary>body</summary>${content}</details>` : ""}</li>`;
    })
    .join("");
  return `<section class="op" id="${escapeHtml(`${method}-${path}`)}">
<h3><span class="method ${escapeHtml(method)}">${escapeHtml(method.toUpperCase())}</span> <code>${escapeHtml(path)}</code></h3>
<p>${escapeHtml(op.summary ?? "")}</p>${op.description ? `<p>${escapeHtml(op.description)}</p>` : ""}${auth}${body}
<ul>${responses}</ul>
</section>`;
}

function json(value: unknown): string {
  return `<pre>${escapeHtml(JSON.stringify(value, null, 2))}</pre>`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

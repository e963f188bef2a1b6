import { existsSync } from "node:fs";
import { resolve } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import { projectRoot } from "../paths.ts";

/** Where `npm run build` (Vite, `ui/vite.config.ts`) writes the web UI. */
export const uiDistDir: string = resolve(projectRoot, "ui/dist");

/** Options of {@link registerUi}. */
export type UiOptions = {
  /** Folder holding the built UI (`index.html` and `assets/`). Defaults to {@link uiDistDir}. */
  distDir?: string;
};

/**
 * The UI's Content-Security-Policy: everything from this server only, so the page works offline and
 * can never load a script, style or font from elsewhere.
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/**
 * Serves the web UI (playground and dashboard) at `/` from the files Vite built into `distDir`, looked
 * up per request (a rebuild while the server runs is picked up). A GET for a path with no such file
 * falls through to the app's JSON 404, so unknown API paths such as `/v1/nope` answer as before; other
 * methods are not touched. Hashed assets (`assets/`) are cached for a year, the rest is revalidated.
 * When the UI has not been built, `/` answers a small page saying how to build it instead of failing.
 */
export function registerUi(app: FastifyInstance, options: UiOptions = {}): void {
  const distDir = options.distDir ?? uiDistDir;
  const indexPath = resolve(distDir, "index.html");
  const assetsDir = resolve(distDir, "assets");
  if (!existsSync(indexPath)) app.log.warn({ distDir }, "web UI not built: run npm run build");

  app.register(fastifyStatic, {
    root: distDir,
    prefix: "/",
    index: false,
    // Folders are not pages: `/assets/` is a 404 like any unknown path (not send's 403).
    allowedPath: (path) => !path.endsWith("/"),
    cacheControl: false,
    setHeaders(response, path) {
      response.setHeader("x-content-type-options", "nosniff");
      if (path.endsWith(".html")) response.setHeader("content-security-policy", CONTENT_SECURITY_POLICY);
      // Vite puts a content hash in every name under assets/; anything else may change between builds.
      const hashed = path.startsWith(`${assetsDir}/`);
      response.setHeader("cache-control", hashed ? "public, max-age=31536000, immutable" : "no-cache");
    },
  });
  app.get("/", async (_request, reply) => {
    if (existsSync(indexPath)) return reply.sendFile("index.html");
    return reply
      .header("content-type", "text/html; charset=utf-8")
      .header("content-security-policy", CONTENT_SECURITY_POLICY)
      .header("cache-control", "no-cache")
      .send(NOT_BUILT_PAGE);
  });
}

/** The page `/` shows when `ui/dist` is missing. */
const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>lmserve — UI not built</title></head>
<body>
<h1>lmserve</h1>
<p>UI not built — run <code>npm run build</code> in the lmserve folder, then reload this page.</p>
<p>The API is served at <code>/v1</code> as usual (for example <a href="/v1/models">/v1/models</a>).</p>
</body>
</html>
`;

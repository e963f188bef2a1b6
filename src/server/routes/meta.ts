import type { FastifyInstance } from "fastify";
import type { VersionResponse } from "../../protocol/responseSchemas.ts";
import { serverVersion } from "../../version.ts";
import { DOCS_CONTENT_SECURITY_POLICY, renderDocsPage } from "../docsPage.ts";
import { type DocumentOptions, openApiDocument, registeredRoutes } from "../openapi.ts";

export { serverVersion } from "../../version.ts";

/**
 * GET /v1/version (`{version}`, as vLLM's `/version`), GET /openapi.json (the OpenAPI 3.1 document,
 * built once the routes are known, its security per `options`) and GET /docs (that document as an HTML page).
 */
export function registerMetaRoutes(app: FastifyInstance, options: DocumentOptions = {}): void {
  let document: Record<string, unknown> | undefined;
  let page: string | undefined;
  const getDocument = () => {
    document ??= openApiDocument(serverVersion, registeredRoutes(app), options);
    return document;
  };
  app.get("/v1/version", async (): Promise<VersionResponse> => ({ version: serverVersion }));
  app.get("/openapi.json", async () => getDocument());
  app.get("/docs", async (_request, reply) => {
    page ??= renderDocsPage(getDocument());
    return reply
      .header("content-type", "text/html; charset=utf-8")
      .header("content-security-policy", DOCS_CONTENT_SECURITY_POLICY)
      .send(page);
  });
}

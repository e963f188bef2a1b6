/**
 * The OpenAPI document against the app: every registered route is documented and every documented
 * route is registered (the stale check), the document's schemas are valid JSON Schema that accept real
 * requests, and each response schema infers exactly the type the code builds (checked by `tsc`).
 * Tier 2: the app in-process with an empty model registry, through Fastify's `inject`.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { FastifyInstance } from "fastify";
import type { z } from "zod";
import type { ChatCompletionChunk, ChatCompletionResponse } from "../../../src/protocol/chat.ts";
import type { Usage } from "../../../src/protocol/common.ts";
import type { CompletionResponse } from "../../../src/protocol/completions.ts";
import type { ModelList, ModelObject } from "../../../src/protocol/models.ts";
import type {
  ChatCompletionChunkSchema,
  ChatCompletionResponseSchema,
  CompletionResponseSchema,
  ErrorBodySchema,
  ModelListSchema,
  ModelObjectSchema,
  UsageSchema,
} from "../../../src/protocol/responseSchemas.ts";
import { buildApp } from "../../../src/server/app.ts";
import type { ErrorBody } from "../../../src/server/errorBody.ts";
import { ServerMetrics } from "../../../src/server/metrics.ts";
import { API_ROUTES, openApiDocument, registeredRoutes, routeKey } from "../../../src/server/openapi.ts";
import { serverVersion } from "../../../src/server/routes/meta.ts";
import { ModelRegistry } from "../../../src/serving/ModelRegistry.ts";
import { SeedSource } from "../../../src/serving/request/generationParams.ts";

/** True when A and B are mutually assignable (same fields, same optionality, same value types). */
type Equal<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

// Compile-time: each documented response schema is exactly the type the server builds. When a type
// in src/protocol changes, update src/protocol/responseSchemas.ts to match (tsc fails here until then).
const sameShapes: [
  Equal<z.infer<typeof UsageSchema>, Usage>,
  Equal<z.infer<typeof CompletionResponseSchema>, CompletionResponse>,
  Equal<z.infer<typeof ChatCompletionResponseSchema>, ChatCompletionResponse>,
  Equal<z.infer<typeof ChatCompletionChunkSchema>, ChatCompletionChunk>,
  Equal<z.infer<typeof ModelObjectSchema>, ModelObject>,
  Equal<z.infer<typeof ModelListSchema>, ModelList>,
  Equal<z.infer<typeof ErrorBodySchema>, ErrorBody>,
] = [true, true, true, true, true, true, true];

describe("OpenAPI document", () => {
  let app: FastifyInstance;
  before(async () => {
    app = buildApp(
      {
        registry: new ModelRegistry(),
        seeds: new SeedSource(0),
        isReady: () => true,
        metrics: new ServerMetrics(),
      },
      { logger: false },
    );
    await app.ready();
  });
  after(() => app.close());

  it("documents every registered route, and registers every documented one", () => {
    assert.ok(sameShapes.every(Boolean));
    const registered = registeredRoutes(app);
    assert.ok(registered.includes("POST /v1/chat/completions"), registered.join(", "));
    const documented = new Set(API_ROUTES.map(routeKey));
    const undocumented = registered.filter((route) => !documented.has(route));
    assert.deepEqual(undocumented, [], `routes missing from src/server/openapi.ts API_ROUTES`);
    const unregistered = API_ROUTES.filter(
      (route) => !route.optional && !registered.includes(routeKey(route)),
    );
    assert.deepEqual(unregistered.map(routeKey), [], "documented routes that the app does not register");
  });

  it("is served at /openapi.json with every registered route's path", async () => {
    const response = await app.inject({ method: "GET", url: "/openapi.json" });
    assert.equal(response.statusCode, 200);
    const document = response.json() as { openapi: string; info: { version: string }; paths: object };
    assert.equal(document.openapi, "3.1.0");
    assert.equal(document.info.version, serverVersion);
    const paths = document.paths as Record<string, Record<string, unknown>>;
    for (const route of API_ROUTES) {
      if (route.optional && !registeredRoutes(app).includes(routeKey(route))) continue;
      assert.ok(paths[route.path]?.[route.method.toLowerCase()], `${route.method} ${route.path}`);
    }
  });

  it("holds valid JSON Schemas that accept real requests and refuse wrong ones, and resolvable $refs", () => {
    const document = openApiDocument(serverVersion) as {
      components: { schemas: Record<string, object> };
    };
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    const validators = Object.fromEntries(
      Object.entries(document.components.schemas).map(([name, schema]) => [name, ajv.compile(schema)]),
    );
    const valid = (name: string, value: unknown) => {
      const validate = validators[name];
      assert.ok(validate, name);
      return validate(value);
    };
    assert.ok(valid("CompletionRequest", { model: "m", prompt: "Once", max_tokens: 5, stop: ["\n"] }));
    assert.ok(!valid("CompletionRequest", { model: "m", prompt: 5 }));
    assert.ok(valid("ChatCompletionRequest", { model: "m", messages: [{ role: "user", content: "Hi" }] }));
    assert.ok(!valid("ChatCompletionRequest", { model: "m", messages: [] }));
    assert.ok(valid("TokenizeChatRequest", { messages: [{ role: "user", content: "Hi" }] }));
    assert.ok(valid("DetokenizeRequest", { tokens: [1, 2] }));
    assert.ok(!valid("DetokenizeRequest", { tokens: [-1] }));
    const text = JSON.stringify(document);
    for (const [, name] of text.matchAll(/"#\/components\/(?:schemas|responses)\/([^"]+)"/g)) {
      assert.ok(text.includes(`"${name}":`), `dangling $ref ${name}`);
    }
  });

  it("declares path parameters, typed bodies, the statuses each route can answer and security per configuration (issue #14)", () => {
    type Operation = {
      parameters?: { name: string; in: string; required: boolean }[];
      responses: Record<string, { content?: Record<string, { schema: { type?: string } }> }>;
      security: Record<string, string[]>[];
    };
    const documentOf = (options: Parameters<typeof openApiDocument>[2]) =>
      openApiDocument(serverVersion, undefined, options) as {
        paths: Record<string, Record<string, Operation>>;
      };
    const keyed = documentOf({ keyed: true, protectMetrics: false });
    const open = documentOf({ keyed: false });
    const model = keyed.paths["/v1/models/{model}"]?.get;
    assert.deepEqual(
      model?.parameters?.map(({ name, in: where, required }) => [name, where, required]),
      [["model", "path", true]],
    );
    const openapi = keyed.paths["/openapi.json"]?.get;
    assert.equal(openapi?.responses["200"]?.content?.["application/json"]?.schema.type, "object");
    // Every path with `{name}` declares each name as a path parameter.
    for (const [path, operations] of Object.entries(keyed.paths)) {
      const names = [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]);
      for (const operation of Object.values(operations))
        assert.deepEqual(operation.parameters?.map((p) => p.name) ?? [], names, path);
    }
    const chat = (document: typeof keyed) => document.paths["/v1/chat/completions"]?.post as Operation;
    assert.deepEqual(chat(keyed).security, [{ bearerAuth: [] }]);
    assert.deepEqual(chat(open).security, [{}, { bearerAuth: [] }]);
    assert.deepEqual(keyed.paths["/metrics"]?.get?.security, [{}, { bearerAuth: [] }]);
    assert.deepEqual(documentOf({ keyed: true, protectMetrics: true }).paths["/metrics"]?.get?.security, [
      { bearerAuth: [] },
    ]);
    assert.deepEqual(keyed.paths["/health"]?.get?.security, []);
    const statuses = (operation: Operation | undefined) => Object.keys(operation?.responses ?? {});
    for (const status of ["400", "408", "413", "415", "422", "429", "500", "503", "504"])
      assert.ok(statuses(chat(keyed)).includes(status), `chat completions declare ${status}`);
    assert.ok(statuses(keyed.paths["/v1/health/ready"]?.get).includes("503"));
    assert.ok(
      !statuses(keyed.paths["/v1/health/live"]?.get).includes("503"),
      "liveness answers while draining",
    );
  });

  it("renders /docs as a self-contained page listing every path", async () => {
    const response = await app.inject({ method: "GET", url: "/docs" });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers["content-type"]), /text\/html/);
    assert.match(String(response.headers["content-security-policy"]), /default-src 'none'/);
    assert.doesNotMatch(response.body, /<script|https?:\/\/(?!json-schema)/);
    for (const route of API_ROUTES.filter((r) => !r.optional)) {
      assert.ok(response.body.includes(`<code>${route.path.replace(/[{}]/g, (c) => c)}</code>`), route.path);
    }
  });
});

describe("draining for shutdown", () => {
  it("answers 503 shutting_down on every route but liveness", async () => {
    const app = buildApp(
      { registry: new ModelRegistry(), seeds: new SeedSource(0), isReady: () => true },
      { logger: false },
    );
    await app.ready();
    assert.equal((await app.inject({ method: "GET", url: "/v1/health/ready" })).statusCode, 200);
    app.inFlight?.startDraining();
    for (const [method, url] of [
      ["GET", "/v1/health/ready"],
      ["GET", "/health"],
      ["POST", "/v1/completions"],
      ["GET", "/v1/models"],
    ] as const) {
      const response = await app.inject({ method, url, ...(method === "POST" ? { payload: {} } : {}) });
      assert.equal(response.statusCode, 503, url);
      assert.equal(response.json().error.code, "shutting_down", url);
      assert.equal(response.headers["retry-after"], "1");
    }
    assert.equal((await app.inject({ method: "GET", url: "/v1/health/live" })).statusCode, 200);
    await app.close();
  });
});

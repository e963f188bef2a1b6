/**
 * The OpenAPI 3.1 document of the server (`GET /openapi.json`), generated from the zod schemas of
 * `src/protocol/` with zod 4's `z.toJSONSchema` (JSON Schema 2020-12, the dialect OpenAPI 3.1 uses).
 * {@link API_ROUTES} lists every route; `test/unit/openapi.test.ts` fails when a registered route is
 * missing from it or a listed route is not registered.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import {
  AnthropicCountTokensRequestSchema,
  AnthropicCountTokensResponseSchema,
  AnthropicErrorBodySchema,
  AnthropicMessageResponseSchema,
  AnthropicMessagesRequestSchema,
  AnthropicStreamEventSchema,
} from "../protocol/anthropicMessages.ts";
import { ChatCompletionRequestSchema } from "../protocol/chat.ts";
import { CompletionRequestSchema } from "../protocol/completions.ts";
import { EmbeddingRequestSchema, EmbeddingResponseSchema } from "../protocol/embeddings.ts";
import { LoadLoraAdapterRequestSchema, UnloadLoraAdapterRequestSchema } from "../protocol/loraAdapters.ts";
import { ModelRequestSchema } from "../protocol/models.ts";
import {
  ResponseCreateRequestSchema,
  ResponseObjectSchema,
  ResponseStreamEventSchema,
} from "../protocol/openaiResponses.ts";
import {
  RerankRequestSchema,
  RerankResponseSchema,
  ScoreRequestSchema,
  ScoreResponseSchema,
} from "../protocol/rerank.ts";
import {
  ChatCompletionChunkSchema,
  ChatCompletionResponseSchema,
  CompletionResponseSchema,
  ErrorBodySchema,
  HealthResponseSchema,
  ModelActionResponseSchema,
  ModelListSchema,
  ModelObjectSchema,
  VersionResponseSchema,
} from "../protocol/responseSchemas.ts";
import {
  DetokenizeRequestSchema,
  DetokenizeResponseSchema,
  TokenizeChatRequestSchema,
  TokenizeCompletionRequestSchema,
  TokenizeResponseSchema,
} from "../protocol/tokenize.ts";

/** The schemas of `components.schemas`, by name; requests are documented as their input shape. */
const SCHEMAS = {
  CompletionRequest: { schema: CompletionRequestSchema, io: "input" },
  ChatCompletionRequest: { schema: ChatCompletionRequestSchema, io: "input" },
  TokenizeCompletionRequest: { schema: TokenizeCompletionRequestSchema, io: "input" },
  TokenizeChatRequest: { schema: TokenizeChatRequestSchema, io: "input" },
  DetokenizeRequest: { schema: DetokenizeRequestSchema, io: "input" },
  EmbeddingRequest: { schema: EmbeddingRequestSchema, io: "input" },
  EmbeddingResponse: { schema: EmbeddingResponseSchema, io: "output" },
  RerankRequest: { schema: RerankRequestSchema, io: "input" },
  RerankResponse: { schema: RerankResponseSchema, io: "output" },
  ScoreRequest: { schema: ScoreRequestSchema, io: "input" },
  ScoreResponse: { schema: ScoreResponseSchema, io: "output" },
  ResponseCreateRequest: { schema: ResponseCreateRequestSchema, io: "input" },
  Response: { schema: ResponseObjectSchema, io: "output" },
  ResponseStreamEvent: { schema: ResponseStreamEventSchema, io: "output" },
  AnthropicMessagesRequest: { schema: AnthropicMessagesRequestSchema, io: "input" },
  AnthropicCountTokensRequest: { schema: AnthropicCountTokensRequestSchema, io: "input" },
  AnthropicMessage: { schema: AnthropicMessageResponseSchema, io: "output" },
  AnthropicStreamEvent: { schema: AnthropicStreamEventSchema, io: "output" },
  AnthropicCountTokensResponse: { schema: AnthropicCountTokensResponseSchema, io: "output" },
  AnthropicError: { schema: AnthropicErrorBodySchema, io: "output" },
  CompletionResponse: { schema: CompletionResponseSchema, io: "output" },
  ChatCompletionResponse: { schema: ChatCompletionResponseSchema, io: "output" },
  ChatCompletionChunk: { schema: ChatCompletionChunkSchema, io: "output" },
  ModelList: { schema: ModelListSchema, io: "output" },
  Model: { schema: ModelObjectSchema, io: "output" },
  ModelRequest: { schema: ModelRequestSchema, io: "input" },
  LoadLoraAdapterRequest: { schema: LoadLoraAdapterRequestSchema, io: "input" },
  UnloadLoraAdapterRequest: { schema: UnloadLoraAdapterRequestSchema, io: "input" },
  ModelActionResponse: { schema: ModelActionResponseSchema, io: "output" },
  TokenizeResponse: { schema: TokenizeResponseSchema, io: "output" },
  DetokenizeResponse: { schema: DetokenizeResponseSchema, io: "output" },
  VersionResponse: { schema: VersionResponseSchema, io: "output" },
  HealthResponse: { schema: HealthResponseSchema, io: "output" },
  Error: { schema: ErrorBodySchema, io: "output" },
} as const satisfies Record<string, { schema: z.ZodType; io: "input" | "output" }>;

type SchemaName = keyof typeof SCHEMAS;

/** One documented route. */
export type RouteDoc = {
  method: "GET" | "POST";
  /** The OpenAPI path (`/v1/models/{model}`). */
  path: string;
  /** The Fastify route pattern when it differs from `path` (`/v1/models/*`). */
  route?: string;
  summary: string;
  description?: string;
  tag: string;
  /** Needs `Authorization: Bearer` when the server has `--api-key` (see `server/auth.ts`). */
  auth: boolean | "with --protect-metrics";
  /** Request body schema(s); several = any one of them. */
  request?: SchemaName[];
  /** The 200 body: a schema, or raw content of a media type (typed by `schema`; a string by default). */
  response: SchemaName | { mediaType: string; description: string; schema?: Record<string, unknown> };
  /** The schema of each `data:` event when the request asks for `stream: true`. */
  stream?: SchemaName;
  /** The stream ends with `data: [DONE]` (OpenAI's chat framing). Defaults to true. */
  streamDone?: boolean;
  /** The schema of the error bodies. Defaults to `Error` (OpenAI's plus NIM's fields). */
  errorSchema?: SchemaName;
  /**
   * Error statuses beyond the ones {@link operation} adds: 400 (an undecodable URL), 408
   * (`--receive-timeout`), 431 (headers over 16 KiB), 500 and 503 (shutting down) on every route but
   * liveness; 413 and 415 with a request body; 401 and 429 when `auth` is true.
   */
  errors?: number[];
  /** Answered 200 even while the server drains for shutdown (liveness): no 503. */
  alwaysUp?: boolean;
  /** A route another part of the server may not register (e.g. `/metrics`); not an error when absent. */
  optional?: boolean;
};

/** Generation routes: a bad value, an unknown model, a schema violation, `--request-timeout` (504). */
const GENERATION_ERRORS = [404, 422, 504];

/** What the three rerank paths (Jina / llama-server, llama-server's, Cohere v2) share. */
const RERANK_DESCRIPTION =
  "A cross-encoder reranker (task `rerank`) scores each document against `query`: `results` sorted by `relevance_score` (the model's raw score, as llama-server's), best first, each with its `index`; `top_n` keeps the best N, `return_documents` adds each document. Another kind of model is a 400.";

const PERCENTILES_SCHEMA = {
  type: "object",
  properties: { p50: { type: "number" }, p90: { type: "number" }, p99: { type: "number" } },
};
/** GET /metrics/history's body (`HistorySnapshot` of `src/shared/metricsHistory.ts`). */
const METRICS_HISTORY_SCHEMA = {
  type: "object",
  required: ["interval_ms", "models"],
  properties: {
    interval_ms: { type: "integer" },
    models: {
      type: "object",
      additionalProperties: {
        type: "array",
        items: {
          type: "object",
          required: ["time", "ttft", "itl", "e2e", "outcomes"],
          properties: {
            time: { type: "number" },
            running: { type: "number" },
            waiting: { type: "number" },
            kvCache: { type: "number" },
            outputTps: { type: "number" },
            promptTps: { type: "number" },
            ttft: PERCENTILES_SCHEMA,
            itl: PERCENTILES_SCHEMA,
            e2e: PERCENTILES_SCHEMA,
            generationTokens: { type: "number" },
            promptTokens: { type: "number" },
            outcomes: { type: "object", additionalProperties: { type: "number" } },
            prefixHitRate: { type: "number" },
          },
        },
      },
    },
  },
};

/** Every route of the API, as `test/unit/openapi.test.ts` checks against the registered ones. */
export const API_ROUTES: readonly RouteDoc[] = [
  {
    method: "POST",
    path: "/v1/completions",
    summary: "Create a completion",
    description:
      "OpenAI's legacy completions with vLLM / NIM (`nvext`) extensions. `stream: true` answers server-sent events, ended by `data: [DONE]`; a failure after the stream started is a final `data:` event holding the error body.",
    tag: "Generation",
    auth: true,
    request: ["CompletionRequest"],
    response: "CompletionResponse",
    stream: "CompletionResponse",
    errors: GENERATION_ERRORS,
  },
  {
    method: "POST",
    path: "/v1/chat/completions",
    summary: "Create a chat completion",
    description:
      "OpenAI's chat completions with vLLM / NIM extensions; the prompt is rendered with the model's chat template. Streams as `/v1/completions` does.",
    tag: "Generation",
    auth: true,
    request: ["ChatCompletionRequest"],
    response: "ChatCompletionResponse",
    stream: "ChatCompletionChunk",
    errors: GENERATION_ERRORS,
  },
  {
    method: "POST",
    path: "/v1/embeddings",
    summary: "Create embeddings",
    description:
      "OpenAI's embeddings: `input` as a string, strings, token ids or lists of token ids (one embedding each, in order); `encoding_format` `float` or `base64` (little-endian float32); `dimensions` the model's own width, or one of its declared Matryoshka widths (`--matryoshka-dimensions`: the prefix, renormalised). The prompt's final hidden states are pooled (`--pooling`, else the GGUF's `pooling_type`, else mean) and L2-normalised; the requests run in the step loop beside generation.",
    tag: "Generation",
    auth: true,
    request: ["EmbeddingRequest"],
    response: "EmbeddingResponse",
    errors: [404, 422],
  },
  ...["/v1/rerank", "/rerank", "/v2/rerank"].map(
    (path): RouteDoc => ({
      method: "POST",
      path,
      summary:
        path === "/v2/rerank"
          ? "Rerank documents (Cohere v2)"
          : `Rerank documents (${path === "/rerank" ? "llama-server's path" : "Jina / llama-server"})`,
      description: `${RERANK_DESCRIPTION}${path === "/v2/rerank" ? " Adds Cohere's `meta`." : ""}`,
      tag: "Generation",
      auth: true,
      request: ["RerankRequest"],
      response: "RerankResponse",
      errors: [400, 404, 422],
    }),
  ),
  ...["/score", "/v1/score"].map(
    (path): RouteDoc => ({
      method: "POST",
      path,
      summary: "Score text pairs (vLLM)",
      description:
        "vLLM's score API on a reranker: `text_1` against each `text_2` (or pairwise when both are lists of one length); one `score` per pair, in order.",
      tag: "Generation",
      auth: true,
      request: ["ScoreRequest"],
      response: "ScoreResponse",
      errors: [400, 404, 422],
    }),
  ),
  {
    method: "POST",
    path: "/v1/responses",
    summary: "Create a response (OpenAI Responses, stateless)",
    description:
      "OpenAI's Responses API on the chat serving: `input` (a string or message / function_call / function_call_output / reasoning items), `instructions`, `max_output_tokens`, `temperature`, `top_p`, `text.format`, function `tools`, `tool_choice`, `reasoning.effort`, `include: [\"reasoning.encrypted_content\"]`. A model's parsed reasoning is a `reasoning` output item before the message (`usage.output_tokens_details.reasoning_tokens` counts it). `previous_response_id` and `store: true` are a 400 (nothing is stored). `stream: true` answers `event: TYPE` / `data: {json}` events in OpenAI's order, ending with `response.completed` or `response.incomplete` (no `[DONE]`).",
    tag: "Generation",
    auth: true,
    request: ["ResponseCreateRequest"],
    response: "Response",
    stream: "ResponseStreamEvent",
    streamDone: false,
    errors: GENERATION_ERRORS,
  },
  {
    method: "POST",
    path: "/v1/messages",
    summary: "Create a message (Anthropic Messages)",
    description:
      "Anthropic's Messages API on the chat serving: `system`, `messages` with text / tool_use / tool_result / thinking blocks, `max_tokens`, `stop_sequences`, `temperature`, `top_p`, `top_k`, `tools`, `tool_choice`, `thinking` (`enabled` with `budget_tokens`, `adaptive`, `disabled`; models with a reasoning parser): thinking comes back as `thinking` blocks before the text. Authenticated by `x-api-key` or `Authorization: Bearer`. Errors in Anthropic's shape. `stream: true` answers Anthropic's `event: TYPE` / `data: {json}` events (`message_start` ... `message_stop`, no `[DONE]`).",
    tag: "Generation",
    auth: true,
    request: ["AnthropicMessagesRequest"],
    response: "AnthropicMessage",
    stream: "AnthropicStreamEvent",
    streamDone: false,
    errorSchema: "AnthropicError",
    // Anthropic answers a schema violation with a 400 too (no 422 on its routes).
    errors: [400, 404, 504],
  },
  {
    method: "POST",
    path: "/v1/messages/count_tokens",
    summary: "Count a message request's input tokens (Anthropic)",
    description:
      "The prompt rendered exactly as `/v1/messages` renders it, tokenized. Errors in Anthropic's shape.",
    tag: "Generation",
    auth: true,
    request: ["AnthropicCountTokensRequest"],
    response: "AnthropicCountTokensResponse",
    errorSchema: "AnthropicError",
    errors: [400, 404],
  },
  {
    method: "GET",
    path: "/v1/models",
    summary: "List the served models (aliases included)",
    tag: "Models",
    auth: true,
    response: "ModelList",
  },
  {
    method: "GET",
    path: "/models",
    summary: "List the served models, as GET /v1/models (llama-server's router path)",
    tag: "Models",
    auth: true,
    response: "ModelList",
  },
  {
    method: "GET",
    path: "/v1/models/{model}",
    route: "/v1/models/*",
    summary: "Retrieve a served model",
    tag: "Models",
    auth: true,
    response: "Model",
    errors: [404],
  },
  {
    method: "POST",
    path: "/models/load",
    summary: "Load a servable model (llama-server's router)",
    description:
      "Loads the model (from `--models-dir`, the download cache, or a configured model that was unloaded), first unloading the least recently used idle models when `--models-max` or `--memory-budget` needs room. Answers once the model is loaded (llama-server answers at once). 400 when it is already loaded; 503 `model_load_failed` with the loader's reason, or `model_capacity` with the numbers.",
    tag: "Models",
    auth: true,
    request: ["ModelRequest"],
    response: "ModelActionResponse",
    errors: [400, 404, 422, 503],
  },
  {
    method: "POST",
    path: "/models/unload",
    summary: "Unload a model (llama-server's router)",
    description:
      "The model takes no new requests (503 `model_unloading`), the requests it is running finish (up to `--shutdown-timeout`, then they end with `model_unloaded`), then it is freed. Answers once it is freed. 400 when it is not loaded.",
    tag: "Models",
    auth: true,
    request: ["ModelRequest"],
    response: "ModelActionResponse",
    errors: [400, 404, 422],
  },
  {
    method: "POST",
    path: "/v1/load_lora_adapter",
    summary: "Load a LoRA adapter (vLLM)",
    description:
      "Loads a LoRA adapter GGUF (`lora_path`, on the server) onto the first served model, or `base_model_name` (lmserve's extension), and serves it as `lora_name`: a request whose `model` is that name runs on the base model with the adapter. Answers vLLM's plain-text sentence. 400 when a name or path is missing, the name is already served, or the file is not a LoRA adapter for the model (`lora_load_failed`); 404 `lora_not_found` when no file is at the path.",
    tag: "Models",
    auth: true,
    request: ["LoadLoraAdapterRequest"],
    response: { mediaType: "text/plain", description: "`Success: LoRA adapter 'NAME' added successfully.`" },
    errors: [400, 404, 422, 503],
  },
  {
    method: "POST",
    path: "/v1/unload_lora_adapter",
    summary: "Unload a LoRA adapter (vLLM)",
    description:
      "Stops serving the adapter at once (new requests naming it get 404); requests already queued or running under it finish first, then it is freed. Answers vLLM's plain-text sentence at once. 404 `lora_not_found` when no adapter has that name.",
    tag: "Models",
    auth: true,
    request: ["UnloadLoraAdapterRequest"],
    response: {
      mediaType: "text/plain",
      description: "`Success: LoRA adapter 'NAME' removed successfully.`",
    },
    errors: [400, 404, 422],
  },
  {
    method: "POST",
    path: "/tokenize",
    summary: "Tokenize a prompt or chat messages (vLLM)",
    description:
      "`prompt` is tokenized as is (`add_special_tokens` default true); `messages` are rendered with the chat template first, exactly as a chat completion renders them.",
    tag: "Tokenizer",
    auth: true,
    request: ["TokenizeCompletionRequest", "TokenizeChatRequest"],
    response: "TokenizeResponse",
    errors: [404, 422],
  },
  {
    method: "POST",
    path: "/detokenize",
    summary: "Turn token ids back into text (vLLM)",
    tag: "Tokenizer",
    auth: true,
    request: ["DetokenizeRequest"],
    response: "DetokenizeResponse",
    errors: [404, 422],
  },
  {
    method: "GET",
    path: "/v1/version",
    summary: "The server's version",
    tag: "Server",
    auth: true,
    response: "VersionResponse",
  },
  {
    method: "GET",
    path: "/health",
    summary: "Health (vLLM): 200 when serving",
    tag: "Health",
    auth: false,
    response: "HealthResponse",
  },
  {
    method: "GET",
    path: "/v1/health/live",
    summary: "Liveness (NIM): the process is up",
    tag: "Health",
    auth: false,
    response: "HealthResponse",
    alwaysUp: true,
  },
  {
    method: "GET",
    path: "/v1/health/ready",
    summary: "Readiness (NIM): 200 once every model is loaded; 503 while loading or shutting down",
    tag: "Health",
    auth: false,
    response: "HealthResponse",
  },
  {
    method: "GET",
    path: "/metrics",
    summary: "Prometheus metrics (vLLM's names)",
    tag: "Server",
    auth: "with --protect-metrics",
    response: { mediaType: "text/plain", description: "Prometheus text exposition format." },
    optional: true,
  },
  {
    method: "GET",
    path: "/metrics/history",
    summary: "The dashboard's last 10 minutes of metrics",
    description:
      "What the web UI's dashboard charts, per model, sampled by the server from its own /metrics every `interval_ms` (2 s) over the last 10 minutes (at most 300 points per model), oldest first. Times are ms since the epoch; latency percentiles (seconds) cover the 30 s before each point; a value the server could not compute yet is absent.",
    tag: "Server",
    auth: "with --protect-metrics",
    response: {
      mediaType: "application/json",
      description: "Per-model series of dashboard points.",
      schema: METRICS_HISTORY_SCHEMA,
    },
    optional: true,
  },
  {
    method: "GET",
    path: "/openapi.json",
    summary: "This OpenAPI document",
    tag: "Server",
    auth: false,
    response: {
      mediaType: "application/json",
      description: "OpenAPI 3.1 document.",
      schema: { type: "object", required: ["openapi", "info", "paths"] },
    },
  },
  {
    method: "GET",
    path: "/docs",
    summary: "The API reference, rendered from this document",
    tag: "Server",
    auth: false,
    response: { mediaType: "text/html", description: "HTML page." },
  },
];

const STATUS_TEXT: Record<number, string> = {
  400: "Malformed JSON, a refused key, an undecodable URL, or a value out of range or conflicting (the field in `param`).",
  401: "Missing or wrong API key (`WWW-Authenticate: Bearer`).",
  404: "Unknown model or route.",
  408: "The request was not received within `--receive-timeout`.",
  413: "The body is larger than `--max-body-size`.",
  415: "The Content-Type is not `application/json`.",
  422: "A field is missing or has the wrong type (FastAPI's `detail`).",
  429: "Over `--rate-limit` (`Retry-After`, `x-ratelimit-*` headers).",
  431: "The request headers are larger than 16 KiB.",
  500: "Internal error (no internals in the message).",
  503: "Overloaded, loading, the model file changed on disk, or shutting down (`Retry-After`).",
  504: "The request did not finish within `--request-timeout`.",
};

/** How the server is configured, for the parts of the document that depend on it. */
export type DocumentOptions = {
  /** The server has API keys (`--api-key`): protected routes require `bearerAuth`. Defaults to true. */
  keyed?: boolean;
  /** `--protect-metrics`: `/metrics` requires the key too. Defaults to false. */
  protectMetrics?: boolean;
};

/** The Fastify `METHOD pattern` of a documented route, as the route list spells it. */
export function routeKey(route: Pick<RouteDoc, "method" | "path" | "route">): string {
  return `${route.method} ${route.route ?? route.path}`;
}

const collected = new WeakMap<FastifyInstance, Set<string>>();

/**
 * Records every route registered on `app` from now on (`METHOD pattern`), through Fastify's `onRoute`
 * hook; Fastify's automatic `HEAD` twins and CORS's `OPTIONS *` are left out. Call before the routes
 * are registered.
 */
export function collectRoutes(app: FastifyInstance): void {
  const routes = new Set<string>();
  collected.set(app, routes);
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (method === "HEAD" || method === "OPTIONS") continue;
      routes.add(`${method} ${route.url}`);
    }
  });
}

/** The routes {@link collectRoutes} has seen on `app` (`METHOD pattern`). */
export function registeredRoutes(app: FastifyInstance): string[] {
  return [...(collected.get(app) ?? [])].sort();
}

/**
 * Builds the OpenAPI 3.1 document.
 * @param registered the registered routes (`METHOD pattern`); optional routes not among them are left
 *   out. Undefined keeps every route.
 */
export function openApiDocument(
  version: string,
  registered?: readonly string[],
  options: DocumentOptions = {},
): Record<string, unknown> {
  const present = registered ? new Set(registered) : undefined;
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of API_ROUTES) {
    if (route.optional && present && !present.has(routeKey(route))) continue;
    const operations = paths[route.path] ?? {};
    operations[route.method.toLowerCase()] = operation(route, options);
    paths[route.path] = operations;
  }
  const schemas = Object.fromEntries(
    Object.entries(SCHEMAS).map(([name, { schema, io }]) => {
      const { $schema: _, ...json } = z.toJSONSchema(schema, { io, unrepresentable: "any" });
      return [name, json];
    }),
  );
  return {
    openapi: "3.1.0",
    info: {
      title: "lmserve",
      version,
      description:
        "OpenAI-compatible inference server for GGUF models. Errors use OpenAI's body plus NIM's top-level fields (schema `Error`). The document describes the running configuration: with `--api-key`, routes whose `security` is `bearerAuth` need `Authorization: Bearer KEY`; without keys a bearer token is optional and ignored.",
      license: { name: "MIT", identifier: "MIT" },
    },
    tags: [...new Set(API_ROUTES.map((route) => route.tag))].map((name) => ({ name })),
    paths,
    components: {
      schemas,
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer" } },
      responses: Object.fromEntries(
        Object.entries(STATUS_TEXT).map(([status, description]) => [
          `Error${status}`,
          { description, content: { "application/json": { schema: ref("Error") } } },
        ]),
      ),
    },
  };
}

/** The `security` of a route under `options`: required, optional (`{}` first) or none. */
function securityOf(route: RouteDoc, options: DocumentOptions): Record<string, string[]>[] {
  if (route.auth === false) return [];
  const required = (options.keyed ?? true) && (route.auth === true || (options.protectMetrics ?? false));
  return required ? [{ bearerAuth: [] }] : [{}, { bearerAuth: [] }];
}

/** The path parameters of an OpenAPI path (`{model}`): required strings. */
function pathParameters(path: string): Record<string, unknown>[] {
  return [...path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => ({
    name,
    in: "path",
    required: true,
    schema: { type: "string", minLength: 1 },
  }));
}

function operation(route: RouteDoc, options: DocumentOptions): Record<string, unknown> {
  const ok =
    typeof route.response === "string"
      ? {
          description: "OK",
          content: {
            "application/json": { schema: ref(route.response) },
            ...(route.stream
              ? {
                  "text/event-stream": {
                    schema: { type: "string" },
                    description:
                      route.streamDone === false
                        ? `With \`stream: true\`: \`event: TYPE\` + \`data: {json}\` events, each a \`${route.stream}\` (no \`[DONE]\`).`
                        : `With \`stream: true\`: \`data: {json}\` events, each a \`${route.stream}\`, then \`data: [DONE]\`.`,
                    "x-event-schema": ref(route.stream),
                    "x-done": route.streamDone !== false,
                  },
                }
              : {}),
          },
        }
      : {
          description: route.response.description,
          content: { [route.response.mediaType]: { schema: route.response.schema ?? { type: "string" } } },
        };
  const request = route.request;
  const statuses = new Set([400, 408, 431, 500, ...(route.errors ?? [])]);
  if (!route.alwaysUp) statuses.add(503);
  if (request) for (const status of [413, 415]) statuses.add(status);
  if (route.auth !== false) statuses.add(401);
  if (route.auth === true) statuses.add(429);
  const parameters = pathParameters(route.path);
  return {
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: [route.tag],
    operationId: `${route.method.toLowerCase()}${route.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c?: string) => (c ?? "").toUpperCase())}`,
    security: securityOf(route, options),
    ...(typeof route.auth === "string" ? { "x-auth": route.auth } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(request
      ? {
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: request.length === 1 ? ref(request[0] as SchemaName) : { anyOf: request.map(ref) },
              },
            },
          },
        }
      : {}),
    responses: {
      200: ok,
      ...Object.fromEntries(
        [...statuses]
          .sort((a, b) => a - b)
          .map((status) => [
            status,
            route.errorSchema
              ? {
                  description: STATUS_TEXT[status],
                  content: { "application/json": { schema: ref(route.errorSchema) } },
                }
              : { $ref: `#/components/responses/Error${status}` },
          ]),
      ),
    },
  };
}

function ref(name: SchemaName): { $ref: string } {
  return { $ref: `#/components/schemas/${name}` };
}

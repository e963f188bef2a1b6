/**
 * Run-time model residency on the HTTP side (issue 28): every request to an endpoint that takes
 * `model` holds its model for as long as the request runs (so an unload or an eviction waits for it),
 * loading it first when autoload is on, and honours Ollama's `keep_alive`; plus llama-server's router
 * routes `POST /models/load` and `POST /models/unload` (behind the API key, `auth.ts`).
 */
import type { FastifyInstance } from "fastify";
import { badRequest } from "../errors.ts";
import { ModelRequestSchema } from "../protocol/models.ts";
import type { ModelRegistry } from "../serving/ModelRegistry.ts";
import { parseKeepAlive } from "../serving/request/keepAlive.ts";
import { parseBody } from "./validation.ts";

/** The POST routes whose body names a `model` (every one that runs one). */
export const MODEL_ROUTES: ReadonlySet<string> = new Set([
  "/v1/completions",
  "/v1/chat/completions",
  "/v1/embeddings",
  "/v1/responses",
  "/v1/messages",
  "/v1/messages/count_tokens",
  "/v1/rerank",
  "/rerank",
  "/v2/rerank",
  "/score",
  "/v1/score",
  "/tokenize",
  "/detokenize",
]);

/**
 * Registers the residency hook (a `preHandler` on {@link MODEL_ROUTES}) and the load/unload routes.
 * The hook leaves a request alone when its `model` is not a string or names no model (the endpoint
 * answers its own 422/404). `keep_alive` is refused (400) without autoload: a model it unloaded would
 * not come back.
 */
export function registerModelResidency(app: FastifyInstance, registry: ModelRegistry): void {
  app.addHook("preHandler", async (request, reply) => {
    if (request.method !== "POST" || !MODEL_ROUTES.has(request.routeOptions.url ?? "")) return;
    const body = request.body;
    if (typeof body !== "object" || body === null || Array.isArray(body)) return;
    const fields = body as Record<string, unknown>;
    const keepAliveMs = parseKeepAlive(fields.keep_alive);
    if (keepAliveMs !== undefined && !registry.autoload) {
      throw badRequest(
        "keep_alive needs --models-autoload (on by default with --models-dir): a model it unloads would not be loaded again.",
        "keep_alive",
      );
    }
    const model = fields.model;
    if (model !== undefined && model !== null && typeof model !== "string") return;
    const name = model ?? registry.defaultName();
    if (name === undefined || !registry.has(name)) return;
    const lease = await registry.acquire(name, {
      ...(keepAliveMs !== undefined ? { keepAliveMs } : {}),
      abort: (reason) => request.server.inFlight?.abortRequest(request, reason),
    });
    if (reply.raw.destroyed || reply.raw.writableFinished || request.raw.socket?.destroyed) {
      lease.release();
      return;
    }
    reply.raw.once("close", () => lease.release());
  });

  app.post("/models/load", async (request) => {
    const { model } = parseBody(ModelRequestSchema, request.body);
    await registry.load(model);
    return { success: true };
  });
  app.post("/models/unload", async (request) => {
    const { model } = parseBody(ModelRequestSchema, request.body);
    await registry.unload(model, "request");
    return { success: true };
  });
}

import type { FastifyInstance } from "fastify";
import type { ModelList } from "../../protocol/models.ts";
import type { AppContext } from "../appContext.ts";

/**
 * GET /v1/models and GET /v1/models/{id} (OpenAI's shapes, plus vLLM's `max_model_len`), and GET /models,
 * the same list at llama-server's router path (beside its `POST /models/load` and `/models/unload`).
 */
export function registerModelRoutes(app: FastifyInstance, context: AppContext): void {
  const list = async (): Promise<ModelList> => ({ object: "list", data: context.registry.modelObjects() });
  app.get("/v1/models", list);
  app.get("/models", list);
  app.get<{ Params: { "*": string } }>("/v1/models/*", async (request) =>
    context.registry.modelObject(request.params["*"]),
  );
}

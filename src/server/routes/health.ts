import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, overloaded } from "../../errors.ts";
import type { AppContext } from "../appContext.ts";
import { sendError } from "../errorBody.ts";

/**
 * GET /health (vLLM: 200 when serving), GET /v1/health/live (NIM: the process is up) and
 * GET /v1/health/ready (NIM: 200 once every model is loaded, else 503; also 503 once a model's file
 * changed on disk while served, `models/modelFileWatch.ts`).
 */
export function registerHealthRoutes(app: FastifyInstance, context: AppContext): void {
  const ready = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!context.isReady()) return sendError(request, reply, overloaded("The model is still loading.", 5));
    const changed = context.registry.changedModelFiles();
    if (changed.length > 0) {
      const error = new ApiError(
        503,
        "service_unavailable",
        "model_file_changed",
        `Not ready: a model file changed on disk while served (${changed.join("; ")}). Restart the server.`,
      );
      return sendError(request, reply, error);
    }
    return { object: "health.response", message: "Service is ready." };
  };
  app.get("/health", ready);
  app.get("/v1/health/ready", ready);
  app.get("/v1/health/live", async () => ({ object: "health.response", message: "Service is live." }));
}

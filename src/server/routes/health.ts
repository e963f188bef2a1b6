import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { overloaded } from "../../errors.ts";
import type { AppContext } from "../app.ts";
import { sendError } from "../app.ts";

/**
 * GET /health (vLLM: 200 when serving), GET /v1/health/live (NIM: the process is up) and
 * GET /v1/health/ready (NIM: 200 once every model is loaded, else 503).
 */
export function registerHealthRoutes(app: FastifyInstance, context: AppContext): void {
  const ready = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!context.isReady()) return sendError(request, reply, overloaded("The model is still loading.", 5));
    return { object: "health.response", message: "Service is ready." };
  };
  app.get("/health", ready);
  app.get("/v1/health/ready", ready);
  app.get("/v1/health/live", async () => ({ object: "health.response", message: "Service is live." }));
}

import type { FastifyInstance } from "fastify";
import { EmbeddingRequestSchema } from "../../protocol/embeddings.ts";
import { createEmbeddings } from "../../serving/embeddings.ts";
import type { AppContext } from "../appContext.ts";
import { clientSignal } from "../streamReply.ts";
import { parseBody } from "../validation.ts";

/** POST /v1/embeddings (OpenAI's shape). */
export function registerEmbeddingRoutes(app: FastifyInstance, context: AppContext): void {
  app.post("/v1/embeddings", async (request, reply) =>
    createEmbeddings(
      context.registry,
      parseBody(EmbeddingRequestSchema, request.body),
      clientSignal(request, reply),
    ),
  );
}

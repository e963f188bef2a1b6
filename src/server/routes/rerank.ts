import type { FastifyInstance } from "fastify";
import { RerankRequestSchema, ScoreRequestSchema } from "../../protocol/rerank.ts";
import { createRerank, createScore } from "../../serving/rerank.ts";
import type { AppContext } from "../appContext.ts";
import { clientSignal } from "../streamReply.ts";
import { parseBody } from "../validation.ts";

/** POST /v1/rerank, /rerank (Jina, llama-server), /v2/rerank (Cohere); POST /score, /v1/score (vLLM). */
export function registerRerankRoutes(app: FastifyInstance, context: AppContext): void {
  for (const path of ["/v1/rerank", "/rerank", "/v2/rerank"]) {
    app.post(path, async (request, reply) =>
      createRerank(
        context.registry,
        parseBody(RerankRequestSchema, request.body),
        clientSignal(request, reply),
        path === "/v2/rerank",
      ),
    );
  }
  for (const path of ["/score", "/v1/score"]) {
    app.post(path, async (request, reply) =>
      createScore(
        context.registry,
        parseBody(ScoreRequestSchema, request.body),
        clientSignal(request, reply),
      ),
    );
  }
}

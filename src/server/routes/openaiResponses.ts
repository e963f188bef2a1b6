import type { FastifyInstance } from "fastify";
import { ResponseCreateRequestSchema } from "../../protocol/openaiResponses.ts";
import { completeResponse, planResponse, streamResponse } from "../../serving/adapters/openaiResponses.ts";
import type { AppContext } from "../appContext.ts";
import { cacheDomain } from "../cacheDomain.ts";
import { clientSignal, openStream, planUnder } from "../streamReply.ts";
import { parseBody } from "../validation.ts";

/**
 * POST /v1/responses (OpenAI Responses, stateless), streamed (`response.*` events with `event:` lines,
 * no `[DONE]`) or not.
 */
export function registerResponsesRoutes(app: FastifyInstance, context: AppContext): void {
  app.post("/v1/responses", async (request, reply) => {
    const body = parseBody(ResponseCreateRequestSchema, request.body);
    const signal = clientSignal(request, reply);
    const plan = await planUnder(
      signal,
      planResponse(
        context.registry,
        body,
        context.seeds,
        context.maxTokensCap ?? context.defaultMaxTokens,
        signal,
        cacheDomain(request, body.cache_salt, context.prefixCacheScope),
      ),
    );
    if (plan === null) return reply;
    if (!body.stream) {
      const response = await completeResponse(plan, signal);
      return response ?? reply;
    }
    return openStream(request, reply, signal, (sink) => streamResponse(plan, sink, signal), {
      done: false,
      eventName: (payload) => (payload as { type?: string }).type,
    });
  });
}

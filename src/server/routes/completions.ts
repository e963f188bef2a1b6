import type { FastifyInstance } from "fastify";
import { CompletionRequestSchema } from "../../protocol/completions.ts";
import { completeCompletion, planCompletion, streamCompletion } from "../../serving/completions.ts";
import type { AppContext } from "../appContext.ts";
import { cacheDomain } from "../cacheDomain.ts";
import { clientSignal, openStream, planUnder } from "../streamReply.ts";
import { parseBody } from "../validation.ts";

/** POST /v1/completions, streamed (SSE) or not. */
export function registerCompletionRoutes(app: FastifyInstance, context: AppContext): void {
  app.post("/v1/completions", async (request, reply) => {
    const body = parseBody(CompletionRequestSchema, request.body);
    const signal = clientSignal(request, reply);
    const plan = await planUnder(
      signal,
      planCompletion(
        context.registry,
        body,
        context.seeds,
        context.maxTokensCap,
        signal,
        cacheDomain(request, body.cache_salt, context.prefixCacheScope),
      ),
    );
    if (plan === null) return reply;
    if (!body.stream) {
      const response = await completeCompletion(plan, signal);
      return response ?? reply;
    }
    return openStream(request, reply, signal, (sink) => streamCompletion(plan, sink, signal));
  });
}

import type { FastifyInstance } from "fastify";
import { ChatCompletionRequestSchema } from "../../protocol/chat.ts";
import { planChat } from "../../serving/chat.ts";
import { completeChat, streamChat } from "../../serving/chatResponse.ts";
import type { AppContext } from "../appContext.ts";
import { cacheDomain } from "../cacheDomain.ts";
import { clientSignal, openStream, planUnder } from "../streamReply.ts";
import { parseBody } from "../validation.ts";

/** POST /v1/chat/completions, streamed (SSE) or not. */
export function registerChatRoutes(app: FastifyInstance, context: AppContext): void {
  app.post("/v1/chat/completions", async (request, reply) => {
    const body = parseBody(ChatCompletionRequestSchema, request.body);
    const signal = clientSignal(request, reply);
    const plan = await planUnder(
      signal,
      planChat(
        context.registry,
        body,
        context.seeds,
        context.maxTokensCap ?? context.defaultMaxTokens,
        context.imageLimits,
        signal,
        cacheDomain(request, body.cache_salt, context.prefixCacheScope),
      ),
    );
    if (plan === null) return reply;
    if (!body.stream) {
      const response = await completeChat(plan, signal);
      return response ?? reply;
    }
    return openStream(request, reply, signal, (sink) => streamChat(plan, sink, signal));
  });
}

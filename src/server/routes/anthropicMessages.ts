import type { FastifyInstance } from "fastify";
import {
  AnthropicCountTokensRequestSchema,
  AnthropicMessagesRequestSchema,
} from "../../protocol/anthropicMessages.ts";
import {
  completeMessages,
  countMessageTokens,
  planMessages,
  streamMessages,
} from "../../serving/adapters/anthropicMessages.ts";
import type { AppContext } from "../appContext.ts";
import { cacheDomain } from "../cacheDomain.ts";
import { clientSignal, openStream, planUnder } from "../streamReply.ts";
import { parseBody } from "../validation.ts";

/**
 * POST /v1/messages (Anthropic Messages; streamed as Anthropic's `event:` / `data:` events, no
 * `[DONE]`) and POST /v1/messages/count_tokens.
 */
export function registerMessagesRoutes(app: FastifyInstance, context: AppContext): void {
  app.post("/v1/messages", async (request, reply) => {
    const body = parseBody(AnthropicMessagesRequestSchema, request.body);
    const signal = clientSignal(request, reply);
    const plan = await planUnder(
      signal,
      planMessages(
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
      const response = await completeMessages(plan, signal);
      return response ?? reply;
    }
    return openStream(request, reply, signal, (sink) => streamMessages(plan, sink, signal), {
      done: false,
      eventName: (payload) => (payload as { type?: string }).type,
    });
  });
  app.post("/v1/messages/count_tokens", async (request) =>
    countMessageTokens(context.registry, parseBody(AnthropicCountTokensRequestSchema, request.body)),
  );
}

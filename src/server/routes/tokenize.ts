import type { FastifyInstance } from "fastify";
import {
  DetokenizeRequestSchema,
  TokenizeChatRequestSchema,
  TokenizeCompletionRequestSchema,
} from "../../protocol/tokenize.ts";
import { detokenize, tokenize } from "../../serving/tokenization.ts";
import type { AppContext } from "../appContext.ts";
import { parseBody } from "../validation.ts";

/**
 * vLLM's tokenizer routes: POST /tokenize (`prompt`, or `messages` rendered with the chat template)
 * and POST /detokenize.
 */
export function registerTokenizeRoutes(app: FastifyInstance, context: AppContext): void {
  app.post("/tokenize", async (request) => {
    const body = request.body;
    const isChat = typeof body === "object" && body !== null && "messages" in body;
    return tokenize(
      context.registry,
      isChat ? parseBody(TokenizeChatRequestSchema, body) : parseBody(TokenizeCompletionRequestSchema, body),
    );
  });
  app.post("/detokenize", async (request) =>
    detokenize(context.registry, parseBody(DetokenizeRequestSchema, request.body)),
  );
}

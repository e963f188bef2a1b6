/**
 * The chat request another API's request is mapped to (`openaiResponses.ts`, `anthropicMessages.ts`): built as plain
 * data and validated by the chat schema, so that the chat serving receives exactly what a chat
 * completions request would give it (defaults included).
 */
import { badRequest } from "../../errors.ts";
import { type ChatCompletionRequest, ChatCompletionRequestSchema } from "../../protocol/chat.ts";

/**
 * Validates a mapped chat request; `undefined` values are dropped first.
 * @throws ApiError 400 naming the chat field when the mapped request does not validate (the
 *   caller's own schema normally refuses such input first).
 */
export function toInternalChatRequest(raw: Record<string, unknown>): ChatCompletionRequest {
  const defined = Object.fromEntries(Object.entries(raw).filter(([, value]) => value !== undefined));
  const result = ChatCompletionRequestSchema.safeParse(defined);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const path = issue?.path.join(".") ?? "";
  throw badRequest(
    `Invalid request (as a chat request, at ${path || "the body"}): ${issue?.message}`,
    path || null,
  );
}

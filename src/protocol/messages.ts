/**
 * OpenAI chat messages on the wire: the zod schema a request's `messages` entries must match (content
 * parts, assistant tool calls). The chat layer (`chat/messages.ts`) normalises validated messages for
 * the chat templates.
 */
import { z } from "zod";

const textPart = z.object({ type: z.literal("text"), text: z.string() });
const refusalPart = z.object({ type: z.literal("refusal"), refusal: z.string() });
/** Media parts are accepted by the schema so the normaliser can answer with a precise 400. */
const mediaPart = <T extends string>(type: T) => z.looseObject({ type: z.literal(type) });

/**
 * One content part: `text`, `refusal`, or a media part (`image_url`, `input_audio`, `video_url`,
 * `file`), as OpenAI's ChatCompletionContentPart (plus vLLM's `video_url`).
 */
export const contentPartSchema = z.discriminatedUnion("type", [
  textPart,
  refusalPart,
  mediaPart("image_url"),
  mediaPart("input_audio"),
  mediaPart("video_url"),
  mediaPart("file"),
]);

/** A validated content part. */
export type ContentPart = z.infer<typeof contentPartSchema>;

const content = z.union([z.string(), z.array(contentPartSchema)]);
const name = z.string().optional();

/** An assistant message's `tool_calls[]` entry: `{id, type: "function", function: {name, arguments}}`. */
export const messageToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function").default("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

/**
 * One entry of a chat request's `messages` (OpenAI's ChatCompletionMessageParam), discriminated by
 * `role`: `system` / `developer` / `user` (content required), `assistant` (content may be null or absent
 * beside `tool_calls`; optional `reasoning_content` / `reasoning` as vLLM accepts for interleaved
 * thinking; legacy `function_call`), `tool` (`tool_call_id` required) and the legacy `function` (`name`
 * required). Unknown keys are dropped.
 */
export const chatMessageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content, name }),
  z.object({ role: z.literal("developer"), content, name }),
  z.object({ role: z.literal("user"), content, name }),
  z.object({
    role: z.literal("assistant"),
    content: content.nullish(),
    name,
    tool_calls: z.array(messageToolCallSchema).nullish(),
    function_call: z.object({ name: z.string(), arguments: z.string() }).nullish(),
    refusal: z.string().nullish(),
    reasoning_content: z.string().nullish(),
    reasoning: z.string().nullish(),
  }),
  z.object({ role: z.literal("tool"), content, tool_call_id: z.string(), name }),
  z.object({ role: z.literal("function"), content: z.string().nullable(), name: z.string() }),
]);

/** A validated request message. */
export type ChatMessage = z.infer<typeof chatMessageSchema>;

/** A request's `messages`: a non-empty array of {@link chatMessageSchema}. */
export const chatMessagesSchema = z.array(chatMessageSchema).min(1);

/** OpenAI `tools` / `tool_choice` request shapes (the forced-call schema is built in `chat/toolSchema.ts`). */
import { z } from "zod";

/**
 * One entry of the request's `tools`: `{type: "function", function: {name, description?, parameters?,
 * strict?}}` (OpenAI's ChatCompletionTool; `type` defaults to `"function"` as in vLLM's
 * ChatCompletionToolsParam). Templates receive the entries as validated.
 */
export const chatToolSchema = z.object({
  type: z.literal("function").default("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});

/** A validated tool definition. */
export type ChatTool = z.infer<typeof chatToolSchema>;

/**
 * The request's `tool_choice`: `"none"`, `"auto"`, `"required"`, or `{type: "function", function: {name}}`
 * (OpenAI's ChatCompletionToolChoiceOption).
 */
export const toolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function").default("function"), function: z.object({ name: z.string() }) }),
]);

/** A validated `tool_choice`. */
export type ToolChoice = z.infer<typeof toolChoiceSchema>;

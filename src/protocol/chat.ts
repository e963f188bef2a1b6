/** POST /v1/chat/completions: the request schema (OpenAI + vLLM + NIM fields) and response types. */
import { z } from "zod";
import { SamplingFieldsSchema, type Usage } from "./common.ts";

/** A content part of a message: text, or media this server may refuse (images, audio, files). */
export const ContentPartSchema = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
});

/** A tool call in an assistant message (OpenAI). */
export const ToolCallSchema = z.object({
  id: z.string().nullish(),
  type: z.literal("function").nullish(),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

/** A chat message: roles system, developer, user, assistant, tool and the legacy function. */
export const ChatMessageSchema = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: z.union([z.string(), z.array(ContentPartSchema)]).nullish(),
  name: z.string().nullish(),
  tool_calls: z.array(ToolCallSchema).nullish(),
  tool_call_id: z.string().nullish(),
  /** vLLM: earlier reasoning passed back in history. */
  reasoning_content: z.string().nullish(),
});

/** A validated chat message. */
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

/** A function tool definition (OpenAI `tools[]`). */
export const ToolSchema = z.object({
  type: z.literal("function").default("function"),
  function: z.object({
    name: z.string(),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});

/** `tool_choice`: none | auto | required | a named function. */
export const ToolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function").default("function"), function: z.object({ name: z.string() }) }),
]);

/** The chat completions request body; unknown fields are accepted and ignored (as vLLM). */
export const ChatCompletionRequestSchema = z.object({
  messages: z.array(ChatMessageSchema).min(1),
  model: z.string(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  /** Default: until EOS or the end of the context. */
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  tools: z.array(ToolSchema).nullish(),
  tool_choice: ToolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  ...SamplingFieldsSchema,
  // --- vLLM chat extensions ---
  echo: z.boolean().nullish(),
  add_generation_prompt: z.boolean().nullish(),
  continue_final_message: z.boolean().nullish(),
  documents: z.array(z.record(z.string(), z.string())).nullish(),
  chat_template: z.string().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  mm_processor_kwargs: z.record(z.string(), z.unknown()).nullish(),
});

/** A validated chat completions request. */
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

/** A tool call in a response message. */
export type ResponseToolCall = {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
};

/** One entry of chat logprobs `content`. */
export type ChatLogprobEntry = {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs: { token: string; logprob: number; bytes: number[] | null }[];
};

/** A choice of a non-streamed chat completion. */
export type ChatChoice = {
  index: number;
  message: {
    role: "assistant";
    content: string | null;
    reasoning_content?: string | null;
    tool_calls?: ResponseToolCall[];
  };
  logprobs: { content: ChatLogprobEntry[] } | null;
  finish_reason: "stop" | "length" | "tool_calls" | null;
  stop_reason: string | number | null;
};

/** The chat completions response (`object: "chat.completion"`). */
export type ChatCompletionResponse = {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: ChatChoice[];
  usage: Usage;
};

/** A choice of a chat stream chunk. */
export type ChatChunkChoice = {
  index: number;
  delta: {
    role?: "assistant";
    content?: string | null;
    reasoning_content?: string | null;
    tool_calls?: {
      index: number;
      id?: string;
      type?: "function";
      function: { name?: string; arguments?: string };
    }[];
  };
  logprobs: { content: ChatLogprobEntry[] } | null;
  finish_reason: "stop" | "length" | "tool_calls" | null;
  stop_reason?: string | number | null;
};

/** A chat stream chunk (`object: "chat.completion.chunk"`). */
export type ChatCompletionChunk = {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: ChatChunkChoice[];
  usage?: Usage | null;
};

/**
 * POST /v1/chat/completions: the request schema (OpenAI + vLLM + NIM fields) and response types.
 * The message and tool schemas are `messages.ts` and `tools.ts`.
 */
import { z } from "zod";
import { REASONING_EFFORTS, SamplingFieldsSchema, type Usage } from "./common.ts";
import { chatMessagesSchema } from "./messages.ts";
import { chatToolSchema, toolChoiceSchema } from "./tools.ts";

/** The chat completions request body; unknown fields are accepted and ignored (as vLLM). */
export const ChatCompletionRequestSchema = z.object({
  messages: chatMessagesSchema,
  /** Defaults to the first served model. */
  model: z.string().nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  /** Default: until EOS or the end of the context. */
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  tools: z.array(chatToolSchema).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  /** OpenAI's reasoning effort: reaches the chat template's own knob (`chat/reasoningEffort.ts`). */
  reasoning_effort: z.enum(REASONING_EFFORTS).nullish(),
  ...SamplingFieldsSchema,
  // --- vLLM chat extensions ---
  add_generation_prompt: z.boolean().nullish(),
  continue_final_message: z.boolean().nullish(),
  documents: z.array(z.record(z.string(), z.string())).nullish(),
  chat_template: z.string().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  mm_processor_kwargs: z.record(z.string(), z.unknown()).nullish(),
  /** vLLM's thinking budget: an alias of `nvext.max_thinking_tokens`. */
  thinking_token_budget: z.number().int().min(0).nullish(),
  /** llama-server's thinking budget (-1: unlimited): an alias of `nvext.max_thinking_tokens`. */
  reasoning_budget_tokens: z.number().int().min(-1).nullish(),
  /** llama-server's second spelling of `reasoning_budget_tokens`. */
  thinking_budget_tokens: z.number().int().min(-1).nullish(),
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
  /** lmserve version + engine build + backend + model file (`serving/output/systemFingerprint.ts`). */
  system_fingerprint: string;
  /** vLLM: per prompt token logprobs, first entry null (see serving/output/logprobs.ts). */
  prompt_logprobs?: (Record<string, { logprob: number; rank: number; decoded_token: string }> | null)[];
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
  /** As {@link ChatCompletionResponse.system_fingerprint}. */
  system_fingerprint: string;
};

/**
 * vLLM's tokenizer endpoints: `POST /tokenize` and `POST /detokenize` (vLLM
 * `entrypoints/openai/protocol.py`: TokenizeCompletionRequest, TokenizeChatRequest, TokenizeResponse,
 * DetokenizeRequest, DetokenizeResponse). Field names, defaults and order as vLLM's.
 */
import { z } from "zod";
import { REASONING_EFFORTS } from "./common.ts";
import { chatMessagesSchema } from "./messages.ts";
import { chatToolSchema } from "./tools.ts";

/** `/tokenize` of a text prompt. `model` defaults to the first served model. */
export const TokenizeCompletionRequestSchema = z.object({
  model: z.string().nullish(),
  prompt: z.string(),
  /** Add special tokens (BOS) as the model asks. Default true. */
  add_special_tokens: z.boolean().nullish(),
  /** Also return each token's vocabulary piece (`token_strs`). Default false. */
  return_token_strs: z.boolean().nullish(),
});

/** `/tokenize` of chat messages, rendered with the model's chat template as a chat request would be. */
export const TokenizeChatRequestSchema = z.object({
  model: z.string().nullish(),
  messages: chatMessagesSchema,
  /** Default true; cannot be true together with `continue_final_message`. */
  add_generation_prompt: z.boolean().nullish(),
  return_token_strs: z.boolean().nullish(),
  continue_final_message: z.boolean().nullish(),
  /** Special tokens on top of what the template writes. Default false. */
  add_special_tokens: z.boolean().nullish(),
  chat_template: z.string().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  /** As chat's `reasoning_effort`: sets the template's own thinking knob. */
  reasoning_effort: z.enum(REASONING_EFFORTS).nullish(),
  mm_processor_kwargs: z.record(z.string(), z.unknown()).nullish(),
  tools: z.array(chatToolSchema).nullish(),
});

/** A validated `/tokenize` request of a text prompt. */
export type TokenizeCompletionRequest = z.infer<typeof TokenizeCompletionRequestSchema>;
/** A validated `/tokenize` request of chat messages. */
export type TokenizeChatRequest = z.infer<typeof TokenizeChatRequestSchema>;

/** The `/tokenize` response. */
export const TokenizeResponseSchema = z.object({
  count: z.number().int(),
  /** The model's context length in tokens (`--max-model-len`). */
  max_model_len: z.number().int(),
  tokens: z.array(z.number().int()),
  /** Vocabulary pieces of the tokens (as Hugging Face's `convert_ids_to_tokens`), when asked for. */
  token_strs: z.array(z.string()).optional(),
});

/** A `/tokenize` response. */
export type TokenizeResponse = z.infer<typeof TokenizeResponseSchema>;

/** `/detokenize`: token ids back to text. `model` defaults to the first served model. */
export const DetokenizeRequestSchema = z.object({
  model: z.string().nullish(),
  tokens: z.array(z.number().int().min(0)),
});

/** A validated `/detokenize` request. */
export type DetokenizeRequest = z.infer<typeof DetokenizeRequestSchema>;

/** The `/detokenize` response: the text of the tokens, special tokens rendered (HF `decode`). */
export const DetokenizeResponseSchema = z.object({ prompt: z.string() });

/** A `/detokenize` response. */
export type DetokenizeResponse = z.infer<typeof DetokenizeResponseSchema>;

/** POST /v1/completions: the request schema (OpenAI + vLLM + NIM + Nscale fields) and response types. */
import { z } from "zod";
import { SamplingFieldsSchema, type Usage } from "./common.ts";

/** `prompt`: a string, a list of strings, a list of token ids, or a list of lists of token ids. */
export const PromptSchema = z.union([
  z.string(),
  z.array(z.string()).min(1),
  z.array(z.number().int().min(0)).min(1),
  z.array(z.array(z.number().int().min(0)).min(1)).min(1),
]);

/** The completions request body; unknown fields are accepted and ignored (as vLLM). */
export const CompletionRequestSchema = z.object({
  /** Defaults to the first served model. */
  model: z.string().nullish(),
  prompt: PromptSchema,
  /** Nscale: generate `best_of` and return the `n` best by cumulative logprob. */
  best_of: z.number().int().min(1).max(16).nullish(),
  echo: z.boolean().nullish(),
  /** Top-k logprobs per token, 0..20 (OpenAI allows up to 5; vLLM up to 20). */
  logprobs: z.number().int().min(0).max(20).nullish(),
  /** Default 16, as OpenAI and the NIM spec; null = until the context ends. */
  max_tokens: z.number().int().min(1).nullish(),
  suffix: z.string().nullish(),
  ...SamplingFieldsSchema,
});

/** A validated completions request. */
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

/** OpenAI's completion logprobs object. */
export type CompletionLogprobs = {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  text_offset: number[];
};

/** One choice of a completions response or stream chunk. */
export type CompletionChoice = {
  index: number;
  text: string;
  logprobs: CompletionLogprobs | null;
  finish_reason: "stop" | "length" | null;
  stop_reason: string | number | null;
};

/** The completions response (`object: "text_completion"`); stream chunks share the shape. */
export type CompletionResponse = {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage?: Usage | null;
  /** lmserve version + engine build + backend + model file (`serving/output/systemFingerprint.ts`). */
  system_fingerprint: string;
};

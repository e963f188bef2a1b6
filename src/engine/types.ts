/**
 * The engine's request and result types. The serving layer builds a {@link GenerationRequest} from a
 * validated API request; the engine knows nothing of HTTP or JSON.
 */

/** Sampling parameters of one sequence, already validated and defaulted. */
export type SamplingParams = {
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus sampling mass in (0, 1]; 1 = off. */
  topP: number;
  /** Keep the k most likely tokens; 0 = off (the API's -1). */
  topK: number;
  /** Drop tokens whose probability is below `minP` times the top one; 0 = off. */
  minP: number;
  /** Seed of this sequence's sampler (a 32-bit unsigned integer). */
  seed: number;
};

/** One generation: a prompt's tokens in, a completion out. */
export type GenerationRequest = {
  /** The prompt, already tokenized (BOS included when wanted). */
  promptTokens: readonly number[];
  /** Upper bound of generated tokens; the context's end also stops the generation. */
  maxTokens: number;
  sampling: SamplingParams;
  /** Stop strings: the text ends before the first one found (vLLM's `stop`). */
  stop: readonly string[];
  /** Keep the matched stop string in the text (vLLM's `include_stop_str_in_output`). */
  includeStopStrInOutput: boolean;
  /** Scheduling priority, vLLM semantics: lower runs first; ties are FIFO. */
  priority: number;
};

/** Why a generation ended, as the API's `finish_reason` (`abort` never reaches a 200 response). */
export type FinishReason = "stop" | "length" | "abort";

/** Text and tokens produced since the previous delta of the same generation. */
export type GenerationDelta = {
  /** Newly emitted text: never half a UTF-8 character, never text a stop string later claims. */
  text: string;
  /** The ids of the tokens generated since the previous delta. */
  tokenIds: readonly number[];
};

/** The outcome of a generation. */
export type GenerationResult = {
  finishReason: FinishReason;
  /** The matched stop string, or null (EOS, length, abort), as vLLM's `stop_reason`. */
  stopReason: string | number | null;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens whose KV state was reused from an earlier request (prefix caching). */
  cachedTokens: number;
  /** Why an aborted generation was aborted (the abort signal's reason), else undefined. */
  abortReason?: unknown;
};

/** Receives a generation's output as it is produced; called synchronously from the token loop. */
export type GenerationObserver = {
  onDelta(delta: GenerationDelta): void;
};

import type { LoraAdapter } from "./LoraAdapter.ts";
import type { NativeMediaPrompt } from "./native.ts";

/**
 * The engine's request and result types. The serving layer builds a {@link GenerationRequest} from a
 * validated API request; the engine knows nothing of HTTP or JSON.
 */

/**
 * A guided-decoding grammar as it crosses into the engine: GBNF text (compiled and validated by
 * `structured/`), which the native sampler builds per sequence with llama.cpp's grammar sampler.
 */
export type Grammar = {
  /** GBNF text. */
  readonly gbnf: string;
  /** The start rule. Defaults to "root". */
  readonly root?: string;
  /**
   * Present for a lazy grammar (llama.cpp's `grammar_lazy` with trigger words): the output is free text
   * until one of `triggers` appears in it (outside a thinking block), and from that trigger's first
   * character on the grammar's start rule matches the rest, the trigger included. A drawn token that
   * completes a trigger the grammar refuses to go on from is never taken. Free text costs no mask.
   */
  readonly lazy?: LazyGrammarStart;
};

/** Where a lazy grammar starts (see `Grammar.lazy`; native `LazyStart`). */
export type LazyGrammarStart = {
  /** The texts that start the grammar (not empty; none of them empty). */
  readonly triggers: readonly string[];
  /**
   * A thinking block the triggers are not looked for in: inside it from the start when `opened`, else
   * when the output starts with `open`, until `close`. Absent: none.
   */
  readonly thinking?: { readonly open: string; readonly close: string; readonly opened: boolean };
};

/** Where an image sits in a prompt: `length` placeholder entries of `promptTokens` from `start`. */
export type MediaSpan = {
  /** Index in `promptTokens` of the image's first position. */
  readonly start: number;
  /** KV cells (prompt tokens) the image takes. */
  readonly length: number;
  /** Positions it advances (differs from `length` under M-RoPE). */
  readonly nPos: number;
  /** Index of the image's chunk in the native prompt. */
  readonly chunk: number;
};

/**
 * A prompt's images: the native prompt (mtmd's chunks) and where each image sits. In `promptTokens` an
 * image's positions hold a negative placeholder id derived from the image's hash, so that prefix caching
 * never reuses one image's KV cells for another (as llama-server keys them on the image hash).
 */
export type PromptMedia = {
  readonly prompt: NativeMediaPrompt;
  readonly spans: readonly MediaSpan[];
};

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
  /** Seed of this sequence's own random generator (a 32-bit unsigned integer; mulberry32). */
  seed: number;
  /** Subtracted per occurrence of a token in the completion so far (OpenAI), -2..2; 0 = off. */
  frequencyPenalty: number;
  /** Subtracted once from every token present in the completion so far (OpenAI), -2..2; 0 = off. */
  presencePenalty: number;
  /** Divides positive / multiplies negative logits of tokens in prompt or completion (HF/vLLM); 1 = off. */
  repetitionPenalty: number;
  /** Added to the logits of these token ids (OpenAI `logit_bias`, -100..100). */
  logitBias: ReadonlyMap<number, number>;
};

/** Per-token log probabilities of one generated (or prompt) token, before any sampling transform. */
export type TokenLogprob = {
  /** The token id. */
  id: number;
  /** Natural log of its probability under the raw distribution (temperature 1, no truncation, no penalty). */
  logprob: number;
  /** 1-based rank of the token in the raw distribution. */
  rank: number;
  /** The `k` most likely tokens of that step, most likely first (`k` = the request's top-logprobs count). */
  top: { id: number; logprob: number }[];
  /**
   * Where the token's text starts in the generation's decoded text, in UTF-16 code units (JavaScript
   * string length), as vLLM's `text_offset`; set by the token loop for generated tokens.
   */
  textOffset?: number;
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
  /** EOS and stop strings / stop token ids have no effect before this many tokens (vLLM `min_tokens`). */
  minTokens: number;
  /** Keep generating past EOS (vLLM / NIM `ignore_eos`): EOS tokens are never sampled. */
  ignoreEos: boolean;
  /** Token ids that end the generation like EOS; the id becomes `stop_reason` (vLLM `stop_token_ids`). */
  stopTokenIds: readonly number[];
  /**
   * Top log probabilities to report per generated token: null = none, 0 = only the sampled token's.
   * Computed natively from the raw logits of the step (see {@link TokenLogprob}).
   */
  logprobs: number | null;
  /** Top log probabilities to report per prompt token (vLLM `prompt_logprobs`); null = none. */
  promptLogprobs: number | null;
  /**
   * The guided-decoding grammar the output must follow (llama.cpp's GBNF sampler), or null. Logprobs
   * stay those of the raw distribution.
   */
  grammar: Grammar | null;
  /**
   * Run this generation with no other sequence in its decode batches, so that its numbers (and, with
   * a seed, its sampled text) do not depend on the load (`--batch-invariant-seeds`). Costs throughput;
   * see docs/ARCHITECTURE.md.
   */
  batchInvariant: boolean;
  /**
   * Optional hook, asked once after each sampled token (after that token's text reached the
   * observer): token ids to append to the sequence now, as if the model had generated them, or
   * undefined. Injected tokens count as completion tokens, go through detokenization and stop strings
   * like sampled ones (within `maxTokens` and the context), are fed to the sampler (penalties, grammar),
   * and carry no logprobs. The chat serving uses it for `nvext.max_thinking_tokens`: once the budget
   * is spent inside a thinking block, it injects the block's closing text.
   */
  injectTokens?: () => readonly number[] | undefined;
  /**
   * Render special (control) tokens' text in the output, as llama-server's `preserved_tokens`: for
   * families whose markup is control tokens (gpt-oss Harmony's `<|channel|>`, Command-A's
   * `<|START_THINKING|>`). Such text is decoded without the prompt's tokens as context. Defaults to false.
   */
  renderSpecialTokens?: boolean;
  /** The prompt's images, when it has any (the model's projector evaluates them). */
  media?: PromptMedia;
  /**
   * The prefix-cache isolation domain: the scheduler reuses cached prompt cells only from a request of
   * the same domain (vLLM's `cache_salt`, RFC #16016; see `server/cacheDomain.ts`), so no request can
   * time another domain's prompts. Defaults to "" (the one shared domain).
   */
  cacheDomain?: string;
  /**
   * The LoRA adapter the generation runs under (its `model` named the adapter); absent: the base model.
   * Steps run one adapter set at a time (see `Scheduler`), and cached prompt cells are only reused under
   * the same adapter.
   */
  adapter?: LoraAdapter;
  /**
   * Return the prompt's pooled embedding instead of generating (`/v1/embeddings`): `mean` of every
   * position's final hidden state, the first position's (`cls`) or the last one's (`last`). Unnormalised.
   */
  embed?: Pooling;
};

/** How a prompt's per-position hidden states become one embedding (the GGUF's `pooling_type`, `--pooling`). */
export type Pooling = "mean" | "cls" | "last" | "rank";

/** What a model serves (`--task`): generation, embeddings, or reranking. */
export type ModelTask = "generate" | "embed" | "rerank";

/** Why a generation ended, as the API's `finish_reason` (`abort` never reaches a 200 response). */
export type FinishReason = "stop" | "length" | "abort";

/** Text and tokens produced since the previous delta of the same generation. */
export type GenerationDelta = {
  /** Newly emitted text: never half a UTF-8 character, never text a stop string later claims. */
  text: string;
  /** The ids of the tokens generated since the previous delta. */
  tokenIds: readonly number[];
  /** Their log probabilities, when the request asked for them. */
  logprobs?: readonly TokenLogprob[];
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
  /** Sum of the generated tokens' logprobs (for `best_of`); NaN when logprobs were not computed. */
  cumulativeLogprob: number;
  /** Per prompt token log probabilities (first entry null), when `promptLogprobs` was asked. */
  promptLogprobs?: (TokenLogprob | null)[];
  /** The pooled prompt embedding of an `embed` request (unnormalised). */
  embedding?: Float32Array;
};

/** Receives a generation's output as it is produced; called synchronously from the token loop. */
export type GenerationObserver = {
  onDelta(delta: GenerationDelta): void;
  /** Called once when the generation takes a slot (leaves the waiting queue), before any step. */
  onStart?(): void;
};

/** The guided-decoding mask cache of a model's context (see native/src/constraint.h). */
export type MaskCacheStats = {
  /** Token-mask lookups answered from the cache, since the model was loaded. */
  hits: number;
  /** Lookups the cache had no mask for (the sampler then checks single tokens or computes the mask). */
  misses: number;
  /** Masks computed by a pass over the vocabulary. */
  computed: number;
  /** Memory the cached masks hold, in bytes. */
  bytes: number;
  /** Milliseconds spent computing masks (the misses) since the model was loaded. */
  computeMs: number;
};

/**
 * What the scheduler reports as requests move through it (for metrics); every callback is optional
 * and called synchronously. Times are in seconds.
 */
export type SchedulerEvents = {
  /** A generation has finished (or was aborted): its result, and its time from submission to first token and to the end. */
  onFinished?(
    result: GenerationResult,
    timing: { queueSeconds: number; ttftSeconds: number | null; e2eSeconds: number },
  ): void;
  /** A completion token was sampled, `secondsSincePrevious` after the previous one of the same generation. */
  onInterTokenLatency?(secondsSincePrevious: number): void;
  /** Jump-forward appended `tokens` forced tokens after a sampled one (0: the grammar forced nothing). */
  onJumpForward?(tokens: number): void;
  /**
   * A step went to llama.cpp with `tokens` tokens (prompt chunks and one per decoding sequence); it took
   * `decodeMs` in `llama_decode` and `sampleMs` sampling its outputs (for benchmarks' breakdowns).
   */
  onIteration?(tokens: number, timing?: { decodeMs: number; sampleMs: number }): void;
};

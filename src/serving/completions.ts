/**
 * POST /v1/completions: turns a validated request into engine work and engine output into OpenAI
 * `text_completion` responses and stream chunks (with vLLM's `echo`, `best_of`, `prompt_logprobs`,
 * `stream_options.continuous_usage_stats` and `return_tokens_as_token_ids`).
 */
import { randomUUID } from "node:crypto";
import type { GenerationRequest, GenerationResult, TokenLogprob } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import type { CompletionChoice, CompletionRequest, CompletionResponse } from "../protocol/completions.ts";
import type { EngineHost, EngineModel } from "./engine.ts";
import { grammarForConstraint } from "./guided/guidedDecoding.ts";
import type { ModelRegistry } from "./ModelRegistry.ts";
import { completionLogprobs, promptLogprobs, type TokenNaming } from "./output/logprobs.ts";
import { type ChunkSink, finishReasonOf, StreamAssembler, sumUsage } from "./output/streaming.ts";
import { systemFingerprint } from "./output/systemFingerprint.ts";
import {
  generationRequest,
  type LogprobCounts,
  resolveMaxTokens,
  type SeedSource,
} from "./request/generationParams.ts";
import { refusePeerFields } from "./request/peerFields.ts";
import { checkRequest } from "./request/requestChecks.ts";
import { requestFields } from "./request/requestFields.ts";
import { runChoices } from "./runChoices.ts";

/** One prompt of the request: its tokens and the text `echo` gives back. */
type PlannedPrompt = { tokens: number[]; text: string };

/** A completions request resolved against its model: ready to run, streamed or not. */
export type CompletionPlan = {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly scheduler: EngineModel;
  readonly body: CompletionRequest;
  readonly prompts: PlannedPrompt[];
  /** Generations per prompt: `best_of` (or `n`); the `n` best are returned. */
  readonly perPrompt: number;
  /** Choices returned per prompt. */
  readonly n: number;
  /** One engine request per generation, prompt-major. */
  readonly requests: GenerationRequest[];
  readonly naming: TokenNaming;
};

/**
 * Validates a completions request against its model and tokenizes its prompts. `maxTokensCap`
 * (`--max-tokens-cap`) bounds a request whose `max_tokens` is null (larger values were refused before).
 * `cacheDomain` is the request's prefix-cache isolation domain (`server/cacheDomain.ts`); defaults to
 * "" (shared).
 * @throws ApiError 404 for an unknown model; 400 for conflicting fields (`requestChecks.ts`: `echo` with
 *   `stream`, `best_of` < `n`, `best_of` with `stream`, ...), `suffix` on a model without fill-in-the-middle tokens,
 *   token ids outside the vocabulary, a prompt plus `max_tokens` longer than the context, or a
 *   guided-decoding constraint that cannot be enforced (see `guidedDecoding.ts`); `signal`'s reason once it
 *   aborts while the constraint waits for the compiler.
 */
export async function planCompletion(
  registry: ModelRegistry,
  body: CompletionRequest,
  seeds: SeedSource,
  maxTokensCap?: number,
  signal?: AbortSignal,
  cacheDomain = "",
): Promise<CompletionPlan> {
  const { name: model, scheduler } = registry.resolve(body.model, "generate");
  refusePeerFields(body);
  const fields = requestFields(body);
  checkRequest(body, fields);
  const n = body.n ?? 1;
  const perPrompt = body.best_of ?? n;
  const host = scheduler.host;
  const prompts = normalisePrompts(body.prompt).map((prompt, index) => planPrompt(host, body, prompt, index));
  // best_of ranks by cumulative logprob, so the logprobs of every token are needed.
  const logprobs = body.logprobs ?? (perPrompt > n ? 0 : null);
  const counts: LogprobCounts = {
    logprobs,
    promptLogprobs:
      body.echo && logprobs !== null
        ? Math.max(logprobs, body.prompt_logprobs ?? 0)
        : (body.prompt_logprobs ?? null),
  };
  const grammar = await grammarForConstraint(
    fields.constraint,
    fields.whitespacePattern,
    signal,
    fields.whitespacePatternParam,
  );
  const requests: GenerationRequest[] = [];
  for (const prompt of prompts) {
    const maxTokens = resolveMaxTokens(
      // OpenAI's default for an omitted max_tokens is 16 (null: until the context ends), both capped.
      body.max_tokens === undefined ? Math.min(16, maxTokensCap ?? 16) : body.max_tokens,
      prompt.tokens.length,
      host.contextSize,
      maxTokensCap,
    );
    for (let choice = 0; choice < perPrompt; choice++) {
      const request = generationRequest(
        body,
        fields,
        host,
        prompt.tokens,
        maxTokens,
        requests.length,
        seeds,
        counts,
        grammar,
      );
      request.cacheDomain = cacheDomain;
      requests.push(request);
    }
  }
  return {
    id: body.request_id || `cmpl-${randomUUID().replaceAll("-", "")}`,
    created: Math.floor(Date.now() / 1000),
    model,
    scheduler,
    body,
    prompts,
    perPrompt,
    n,
    requests,
    naming: { vocabulary: host.vocabulary, asIds: body.return_tokens_as_token_ids ?? false },
  };
}

/** Tokenizes one prompt; with `suffix`, builds the fill-in-the-middle prompt. */
function planPrompt(
  host: EngineHost,
  body: CompletionRequest,
  prompt: string | number[],
  index: number,
): PlannedPrompt {
  const addSpecialTokens = body.add_special_tokens ?? true;
  let tokens: number[];
  if (typeof prompt === "string") tokens = host.tokenize(prompt, addSpecialTokens);
  else {
    const position = prompt.findIndex((token) => token >= host.vocabularySize);
    if (position >= 0) {
      // A list of token lists names the prompt and the position; one token list, the position.
      const batched = Array.isArray(body.prompt) && Array.isArray(body.prompt[0]);
      throw badRequest(
        `Token id ${prompt[position]} is outside the vocabulary (0..${host.vocabularySize - 1}).`,
        batched ? `prompt[${index}][${position}]` : `prompt[${position}]`,
      );
    }
    tokens = prompt;
  }
  if (body.suffix !== undefined && body.suffix !== null) {
    const infill = host.infillTokens;
    if (!infill) {
      throw badRequest(
        `The model ${host.id} has no fill-in-the-middle tokens, so it cannot complete with a suffix.`,
        "suffix",
      );
    }
    const [prefixToken, suffixToken, middleToken] = infill;
    const body_ = typeof prompt === "string" ? host.tokenize(prompt, false) : prompt;
    const bos = addSpecialTokens && tokens[0] !== body_[0] ? tokens.slice(0, 1) : [];
    tokens = [...bos, prefixToken, ...body_, suffixToken, ...host.tokenize(body.suffix, false), middleToken];
  }
  if (tokens.length === 0) throw badRequest("The prompt is empty: give at least one token.", "prompt");
  return { tokens, text: typeof prompt === "string" ? prompt : host.detokenize(prompt) };
}

/** What a generation produced: its text and per-token logprobs as they arrived. */
type Collected = { text: string; tokenIds: number[]; logprobs: TokenLogprob[] };

/**
 * Runs a planned completion to the end and builds the response.
 * Resolves with null when the client went away (`signal` aborted) before it finished.
 */
export async function completeCompletion(
  plan: CompletionPlan,
  signal: AbortSignal,
): Promise<CompletionResponse | null> {
  const collected: Collected[] = plan.requests.map(() => ({ text: "", tokenIds: [], logprobs: [] }));
  const results = await runChoices(
    plan.scheduler,
    plan.requests,
    (choice, delta) => {
      const target = collected[choice] as Collected;
      target.text += delta.text;
      target.tokenIds.push(...delta.tokenIds);
      if (delta.logprobs) target.logprobs.push(...delta.logprobs);
    },
    signal,
  );
  if (results.some((result) => result.finishReason === "abort")) return null;
  const choices: CompletionChoice[] = [];
  const returned: GenerationResult[] = [];
  plan.prompts.forEach((prompt, promptIndex) => {
    const start = promptIndex * plan.perPrompt;
    const candidates = results
      .slice(start, start + plan.perPrompt)
      .map((result, offset) => ({ result, offset }));
    // best_of: keep the n generations with the highest cumulative logprob, in that order.
    if (plan.perPrompt > plan.n)
      candidates.sort((a, b) => b.result.cumulativeLogprob - a.result.cumulativeLogprob);
    for (const { result, offset } of candidates.slice(0, plan.n)) {
      returned.push(result);
      choices.push(finalChoice(plan, choices.length, prompt, collected[start + offset] as Collected, result));
    }
  });
  return {
    id: plan.id,
    object: "text_completion",
    created: plan.created,
    model: plan.model,
    choices,
    usage: sumUsage(returned, plan.n),
    system_fingerprint: systemFingerprint(plan.scheduler.host),
  };
}

function finalChoice(
  plan: CompletionPlan,
  index: number,
  prompt: PlannedPrompt,
  output: Collected,
  result: GenerationResult,
): CompletionChoice & { prompt_logprobs?: unknown } {
  const echo = plan.body.echo ?? false;
  const choice: CompletionChoice & { prompt_logprobs?: unknown } = {
    index,
    text: (echo ? prompt.text : "") + output.text,
    logprobs: null,
    finish_reason: finishReasonOf(result),
    stop_reason: result.stopReason,
  };
  if (plan.body.logprobs !== undefined && plan.body.logprobs !== null) {
    // Prompt token offsets come from detokenizing the prompt's prefixes: exact where a tokenizer
    // drops or adds a leading space at the start of a text.
    const host = plan.scheduler.host;
    const promptEntries = echo
      ? prompt.tokens.map((id, position) => ({
          id,
          logprob: result.promptLogprobs?.[position] ?? null,
          offset: Math.min(host.detokenize(prompt.tokens.slice(0, position)).length, prompt.text.length),
        }))
      : [];
    // Every generated token, EOS and a stop string's tokens included, as vLLM reports them; offsets
    // are where each token's text starts in the decoded output (after the echoed prompt).
    const base = echo ? prompt.text.length : 0;
    const generated = output.logprobs.map((logprob) => ({
      id: logprob.id,
      logprob,
      offset: base + (logprob.textOffset ?? 0),
    }));
    choice.logprobs = completionLogprobs([...promptEntries, ...generated], plan.naming, 0);
  }
  if (
    plan.body.prompt_logprobs !== undefined &&
    plan.body.prompt_logprobs !== null &&
    result.promptLogprobs
  ) {
    choice.prompt_logprobs = promptLogprobs(result.promptLogprobs, plan.naming);
  }
  return choice;
}

/**
 * Runs a planned completion as a stream of `text_completion` chunks: text deltas per choice (with
 * the logprobs of their own tokens), one final chunk per choice with its `finish_reason`, then (with
 * `stream_options.include_usage`) a usage chunk with `choices: []`. With
 * `stream_options.continuous_usage_stats` every chunk carries the usage so far (vLLM). Ends the sink;
 * a failure mid-stream becomes the final error event.
 * @throws ApiError 503 synchronously (before anything is written) when the queue is full.
 */
export function streamCompletion(plan: CompletionPlan, sink: ChunkSink, signal: AbortSignal): Promise<void> {
  const stream = new StreamAssembler<"text_completion", CompletionChoice>(
    sink,
    {
      id: plan.id,
      object: "text_completion",
      created: plan.created,
      model: plan.model,
      systemFingerprint: systemFingerprint(plan.scheduler.host),
    },
    {
      streamOptions: plan.body.stream_options,
      promptTokens: plan.prompts.reduce((sum, prompt) => sum + prompt.tokens.length, 0),
      choicesPerPrompt: plan.n,
    },
  );
  const run = runChoices(
    plan.scheduler,
    plan.requests,
    (choice, delta) => {
      stream.count(delta);
      if (delta.text.length === 0 && !delta.logprobs?.length) return;
      // Offsets as in the non-streamed object: where each token's text starts in the decoded output.
      const logprobs = delta.logprobs
        ? completionLogprobs(
            delta.logprobs.map((logprob) => ({ id: logprob.id, logprob, offset: logprob.textOffset ?? 0 })),
            plan.naming,
            0,
          )
        : null;
      stream.send([{ index: choice, text: delta.text, logprobs, finish_reason: null, stop_reason: null }]);
    },
    signal,
  );
  return stream.finish(run, (result, index) => {
    stream.send([
      {
        index,
        text: "",
        logprobs: null,
        finish_reason: finishReasonOf(result),
        stop_reason: result.stopReason,
      },
    ]);
  });
}

function normalisePrompts(prompt: CompletionRequest["prompt"]): (string | number[])[] {
  if (typeof prompt === "string") return [prompt];
  if (prompt.length > 0 && typeof prompt[0] === "number") return [prompt as number[]];
  return prompt as (string | number[])[];
}

/**
 * POST /v1/completions: turns a validated request into engine work and engine output into OpenAI
 * `text_completion` responses and stream chunks.
 */
import { randomUUID } from "node:crypto";
import type { Scheduler } from "../engine/Scheduler.ts";
import type { GenerationRequest, GenerationResult } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import type { Usage } from "../protocol/common.ts";
import type { CompletionChoice, CompletionRequest, CompletionResponse } from "../protocol/completions.ts";
import {
  generationRequest,
  refuseUnsupportedFields,
  resolveMaxTokens,
  type SeedSource,
} from "./generationParams.ts";
import type { ModelRegistry } from "./ModelRegistry.ts";
import { runChoices } from "./runChoices.ts";
import { type ChunkSink, finishReasonOf, finishStream, includeUsage, sumUsage } from "./streaming.ts";

/** A completions request resolved against its model: ready to run, streamed or not. */
export type CompletionPlan = {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly scheduler: Scheduler;
  readonly body: CompletionRequest;
  /** One engine request per choice, in choice order (prompt-major, then `n`). */
  readonly requests: GenerationRequest[];
};

/**
 * Validates a completions request against its model and tokenizes its prompts.
 * @throws ApiError 404 for an unknown model; 400 for conflicting fields, token ids outside the
 *   vocabulary, or a prompt plus `max_tokens` longer than the context.
 */
export function planCompletion(
  registry: ModelRegistry,
  body: CompletionRequest,
  seeds: SeedSource,
): CompletionPlan {
  const scheduler = registry.get(body.model);
  if (body.echo && body.stream) throw badRequest("'echo' and 'stream' cannot both be true.", "echo");
  refuseUnsupportedFields(body);
  const host = scheduler.host;
  const addSpecialTokens = body.add_special_tokens ?? true;
  const prompts = normalisePrompts(body.prompt).map((prompt, index) => {
    if (typeof prompt === "string") return host.tokenize(prompt, addSpecialTokens);
    const vocabulary = host.vocabularySize;
    const bad = prompt.find((token) => token >= vocabulary);
    if (bad !== undefined) {
      throw badRequest(
        `Token id ${bad} is outside the vocabulary (0..${vocabulary - 1}).`,
        `prompt[${index}]`,
      );
    }
    return prompt;
  });
  const n = body.n ?? 1;
  const requests: GenerationRequest[] = [];
  for (const promptTokens of prompts) {
    if (promptTokens.length === 0)
      throw badRequest("The prompt is empty: give at least one token.", "prompt");
    const maxTokens = resolveMaxTokens(
      body.max_tokens === undefined ? 16 : body.max_tokens,
      promptTokens.length,
      host.contextSize,
    );
    for (let choice = 0; choice < n; choice++) {
      requests.push(generationRequest(body, promptTokens, maxTokens, requests.length, seeds));
    }
  }
  return {
    id: body.request_id ?? `cmpl-${randomUUID().replaceAll("-", "")}`,
    created: Math.floor(Date.now() / 1000),
    model: body.model,
    scheduler,
    body,
    requests,
  };
}

/**
 * Runs a planned completion to the end and builds the response.
 * Resolves with null when the client went away (`signal` aborted) before it finished.
 */
export async function completeCompletion(
  plan: CompletionPlan,
  signal: AbortSignal,
): Promise<CompletionResponse | null> {
  const texts = plan.requests.map(() => "");
  const results = await runChoices(
    plan.scheduler,
    plan.requests,
    (choice, delta) => {
      texts[choice] += delta.text;
    },
    signal,
  );
  if (results.some((result) => result.finishReason === "abort")) return null;
  return {
    id: plan.id,
    object: "text_completion",
    created: plan.created,
    model: plan.model,
    choices: results.map((result, index) => choiceOf(index, texts[index] ?? "", result)),
    usage: sumUsage(results, plan.body.n ?? 1),
  };
}

/**
 * Runs a planned completion as a stream of `text_completion` chunks: text deltas per choice, one
 * final chunk per choice with its `finish_reason`, then (with `stream_options.include_usage`) a usage
 * chunk with `choices: []`. Ends the sink; a failure mid-stream becomes the final error event.
 * @throws ApiError 503 synchronously (before anything is written) when the queue is full.
 */
export function streamCompletion(plan: CompletionPlan, sink: ChunkSink, signal: AbortSignal): Promise<void> {
  const chunk = (choices: CompletionChoice[], usage?: Usage): CompletionResponse => ({
    id: plan.id,
    object: "text_completion",
    created: plan.created,
    model: plan.model,
    choices,
    ...(usage ? { usage } : {}),
  });
  const run = runChoices(
    plan.scheduler,
    plan.requests,
    (choice, delta) => {
      if (delta.text.length === 0) return;
      sink.send(
        chunk([{ index: choice, text: delta.text, logprobs: null, finish_reason: null, stop_reason: null }]),
      );
    },
    signal,
  );
  return finishStream(sink, run, (results) => {
    results.forEach((result, index) => {
      sink.send(chunk([choiceOf(index, "", result)]));
    });
    if (includeUsage(plan.body.stream_options)) sink.send(chunk([], sumUsage(results, plan.body.n ?? 1)));
  });
}

function choiceOf(index: number, text: string, result: GenerationResult): CompletionChoice {
  return {
    index,
    text,
    logprobs: null,
    finish_reason: finishReasonOf(result),
    stop_reason: result.stopReason,
  };
}

function normalisePrompts(prompt: CompletionRequest["prompt"]): (string | number[])[] {
  if (typeof prompt === "string") return [prompt];
  if (prompt.length > 0 && typeof prompt[0] === "number") return [prompt as number[]];
  return prompt as (string | number[])[];
}

/**
 * POST /v1/chat/completions: renders the chat template, runs the choices, and builds
 * `chat.completion` responses and `chat.completion.chunk` streams.
 */
import { randomUUID } from "node:crypto";
import { normalizeMessages } from "../chat/messages.ts";
import {
  CHATML_FALLBACK_TEMPLATE,
  promptStartsWithBos,
  renderChatTemplate,
} from "../chat/renderChatTemplate.ts";
import type { ModelHost } from "../engine/ModelHost.ts";
import type { Scheduler } from "../engine/Scheduler.ts";
import type { GenerationRequest, GenerationResult, TokenLogprob } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import type {
  ChatChoice,
  ChatChunkChoice,
  ChatCompletionChunk,
  ChatCompletionRequest,
  ChatCompletionResponse,
} from "../protocol/chat.ts";
import type { Usage } from "../protocol/common.ts";
import {
  generationRequest,
  refuseUnsupportedFields,
  resolveMaxTokens,
  type SeedSource,
} from "./generationParams.ts";
import { grammarForRequest } from "./guidedDecoding.ts";
import { chatLogprobs, promptLogprobs, type TokenNaming } from "./logprobs.ts";
import type { ModelRegistry } from "./ModelRegistry.ts";
import { runChoices } from "./runChoices.ts";
import { type ChunkSink, finishReasonOf, finishStream, includeUsage, sumUsage } from "./streaming.ts";

/** A chat request resolved against its model: the rendered prompt and one engine request per choice. */
export type ChatPlan = {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly scheduler: Scheduler;
  readonly body: ChatCompletionRequest;
  readonly requests: GenerationRequest[];
  readonly naming: TokenNaming;
};

/**
 * Renders the prompt of a chat request and plans its choices.
 * @throws ApiError 404 for an unknown model; 400 for unsupported content (images), a template that
 *   fails to render, or a prompt plus `max_tokens` longer than the context.
 */
export async function planChat(
  registry: ModelRegistry,
  body: ChatCompletionRequest,
  seeds: SeedSource,
): Promise<ChatPlan> {
  const scheduler = registry.get(body.model);
  refuseUnsupportedFields(body);
  const host = scheduler.host;
  const promptTokens = host.tokenize(...renderPrompt(host, body));
  const maxTokens = resolveMaxTokens(
    body.max_completion_tokens ?? body.max_tokens,
    promptTokens.length,
    host.contextSize,
  );
  if (body.top_logprobs !== undefined && body.top_logprobs !== null && !body.logprobs) {
    throw badRequest("top_logprobs requires logprobs to be true.", "top_logprobs");
  }
  const counts = {
    logprobs: body.logprobs ? (body.top_logprobs ?? 0) : null,
    promptLogprobs: body.prompt_logprobs ?? null,
  };
  const grammar = await grammarForRequest(body);
  const requests = Array.from({ length: body.n ?? 1 }, (_, choice) =>
    generationRequest(body, host, promptTokens, maxTokens, choice, seeds, counts, grammar),
  );
  return {
    id: body.request_id ?? `chatcmpl-${randomUUID().replaceAll("-", "")}`,
    created: Math.floor(Date.now() / 1000),
    model: body.model,
    scheduler,
    body,
    requests,
    naming: { vocabulary: host.vocabulary, asIds: body.return_tokens_as_token_ids ?? false },
  };
}

/** The fields of a chat request that shape its prompt (a `/tokenize` messages request has the same). */
export type ChatPromptFields = Pick<
  ChatCompletionRequest,
  | "messages"
  | "tools"
  | "documents"
  | "add_generation_prompt"
  | "continue_final_message"
  | "chat_template"
  | "chat_template_kwargs"
  | "add_special_tokens"
>;

/**
 * The prompt text and whether to add special tokens: the request's `chat_template`, else the model's
 * (flag or GGUF), else ChatML as llama-server falls back to. `add_special_tokens` defaults to false as
 * in vLLM, and BOS is never doubled when the template already wrote it. Also used by `/tokenize`
 * (`serving/tokenization.ts`) for a `messages` request.
 * @throws ApiError 400 for unsupported content or a template that fails to render.
 */
export function renderPrompt(host: ModelHost, body: ChatPromptFields): [string, boolean] {
  const template = body.chat_template ?? host.chatTemplate ?? CHATML_FALLBACK_TEMPLATE;
  const prompt = renderChatTemplate(template, {
    messages: normalizeMessages(body.messages),
    tools: body.tools ?? null,
    documents: body.documents ?? null,
    addGenerationPrompt: body.add_generation_prompt ?? !body.continue_final_message,
    continueFinalMessage: body.continue_final_message ?? false,
    bosToken: host.bosText,
    eosToken: host.eosText,
    kwargs: body.chat_template_kwargs ?? null,
  });
  const addSpecialTokens = (body.add_special_tokens ?? false) && !promptStartsWithBos(prompt, host.bosText);
  return [prompt, addSpecialTokens];
}

/**
 * Runs a planned chat completion to the end and builds the response.
 * Resolves with null when the client went away before it finished.
 */
export async function completeChat(
  plan: ChatPlan,
  signal: AbortSignal,
): Promise<ChatCompletionResponse | null> {
  const texts = plan.requests.map(() => "");
  const logprobs: TokenLogprob[][] = plan.requests.map(() => []);
  const results = await runChoices(
    plan.scheduler,
    plan.requests,
    (choice, delta) => {
      texts[choice] += delta.text;
      if (delta.logprobs) logprobs[choice]?.push(...delta.logprobs);
    },
    signal,
  );
  if (results.some((result) => result.finishReason === "abort")) return null;
  return {
    id: plan.id,
    object: "chat.completion",
    created: plan.created,
    model: plan.model,
    choices: results.map(
      (result, index): ChatChoice => ({
        index,
        message: { role: "assistant", content: texts[index] ?? "" },
        logprobs: plan.body.logprobs ? { content: chatLogprobs(logprobs[index] ?? [], plan.naming) } : null,
        finish_reason: finishReasonOf(result),
        stop_reason: result.stopReason,
      }),
    ),
    usage: sumUsage(results, plan.requests.length),
    ...(plan.body.prompt_logprobs !== undefined &&
    plan.body.prompt_logprobs !== null &&
    results[0]?.promptLogprobs
      ? { prompt_logprobs: promptLogprobs(results[0].promptLogprobs, plan.naming) }
      : {}),
  };
}

/**
 * Runs a planned chat completion as a stream: per choice a first chunk `{role: "assistant",
 * content: ""}`, content deltas, a last chunk with `finish_reason`; then (with
 * `stream_options.include_usage`) a usage chunk with `choices: []`. Ends the sink.
 * @throws ApiError 503 synchronously (before anything is written) when the queue is full.
 */
export function streamChat(plan: ChatPlan, sink: ChunkSink, signal: AbortSignal): Promise<void> {
  const chunk = (choices: ChatChunkChoice[], usage?: Usage): ChatCompletionChunk => ({
    id: plan.id,
    object: "chat.completion.chunk",
    created: plan.created,
    model: plan.model,
    choices,
    ...(usage ? { usage } : continuous ? { usage: runningUsage() } : {}),
  });
  const continuous = plan.body.stream_options?.continuous_usage_stats ?? false;
  const promptTokens = plan.requests[0]?.promptTokens.length ?? 0;
  let completionTokens = 0;
  const runningUsage = (): Usage => ({
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  });
  const run = runChoices(
    plan.scheduler,
    plan.requests,
    (choice, delta) => {
      completionTokens += delta.tokenIds.length;
      if (delta.text.length === 0 && !delta.logprobs?.length) return;
      const logprobs = delta.logprobs ? { content: chatLogprobs(delta.logprobs, plan.naming) } : null;
      sink.send(chunk([{ index: choice, delta: { content: delta.text }, logprobs, finish_reason: null }]));
    },
    signal,
  );
  plan.requests.forEach((_, index) => {
    sink.send(
      chunk([{ index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }]),
    );
  });
  return finishStream(sink, run, (results: GenerationResult[]) => {
    results.forEach((result, index) => {
      sink.send(
        chunk([
          {
            index,
            delta: {},
            logprobs: null,
            finish_reason: finishReasonOf(result),
            stop_reason: result.stopReason,
          },
        ]),
      );
    });
    if (includeUsage(plan.body.stream_options)) sink.send(chunk([], sumUsage(results, plan.requests.length)));
  });
}

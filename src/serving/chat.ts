/**
 * POST /v1/chat/completions, its plan: renders the chat template and plans the choices (tools, reasoning,
 * guided decoding). The runners, which build `chat.completion` responses and `chat.completion.chunk`
 * streams from a plan, are in `chatResponse.ts` (which imports this file, not the other way).
 */
import { randomUUID } from "node:crypto";
import {
  createChatOutputParser,
  detectReasoningParser,
  promptThinkingState,
  thinkingMarkup,
} from "../chat/index.ts";
import { type MediaPrompt, normalizeMessages } from "../chat/messages.ts";
import { reasoningEffortVariables } from "../chat/reasoningEffort.ts";
import {
  CHATML_FALLBACK_TEMPLATE,
  promptStartsWithBos,
  renderChatTemplateSandboxed,
} from "../chat/renderChatTemplate.ts";
import type { GenerationRequest, PromptMedia } from "../engine/types.ts";
import { badRequest } from "../errors.ts";
import type { ChatCompletionRequest } from "../protocol/chat.ts";
import type { EngineHost, EngineModel } from "./engine.ts";
import { chatGrammar, type ThinkingStart } from "./guided/chatGrammar.ts";
import { resolveToolCalling } from "./guided/chatTools.ts";
import { type ImageLimits, tokenizeWithImages } from "./images/chatImages.ts";
import type { ChatSettings, ModelRegistry } from "./ModelRegistry.ts";
import { ChoiceOutput } from "./output/chatOutput.ts";
import type { TokenNaming } from "./output/logprobs.ts";
import { generationRequest, resolveMaxTokens, type SeedSource } from "./request/generationParams.ts";
import { refusePeerFields } from "./request/peerFields.ts";
import { checkRequest } from "./request/requestChecks.ts";
import { requestFields } from "./request/requestFields.ts";

/**
 * A chat request resolved against its model: the rendered prompt, one engine request per choice and
 * one output (its parser chain) per choice.
 */
export type ChatPlan = {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly scheduler: EngineModel;
  readonly body: ChatCompletionRequest;
  readonly requests: GenerationRequest[];
  /** Per choice, the parser chain its text goes through (shared with `requests[i].injectTokens`). */
  readonly outputs: ChoiceOutput[];
  readonly naming: TokenNaming;
};

/**
 * Renders the prompt of a chat request and plans its choices:
 * - tools (`chatTools.ts`): `tool_choice` `"required"` / named force the call(s) with a grammar (parsed
 *   back by the `generic` parser); `"auto"` parses the free output with `--tool-call-parser` or the
 *   parser detected from the template (none: plain content); `"none"` never parses calls;
 * - reasoning: `--reasoning-parser` or the parser detected from the template splits thinking blocks off
 *   the content; the prompt decides whether the output starts inside one or after a closed one
 *   (`promptThinkingState`); `nvext.max_thinking_tokens` (and its aliases) closes the block at the
 *   budget (0 with a prompt that opened it: the close text is appended to the prompt); without a
 *   reasoning parser it has no effect;
 * - guided decoding (`chatGrammar.ts`): when the prompt closed the block (thinking off) the constraint
 *   applies to the whole output; otherwise its grammar admits a thinking block first, and the thinking
 *   is bounded (the client's budget, else half of the completion tokens) so the answer comes.
 * A request without `max_tokens`/`max_completion_tokens` generates until the context ends, at most
 * `maxTokensCap` tokens (`--max-tokens-cap`). `cacheDomain` is the request's prefix-cache isolation
 * domain (`server/cacheDomain.ts`); defaults to "" (shared).
 * @throws ApiError 404 for an unknown model; 400 for conflicting fields (`requestChecks.ts`), unsupported content (images), a template that
 *   fails to render, a prompt plus `max_tokens` longer than the context, and invalid tool use; `signal`'s
 *   reason once it aborts while the constraint waits for the compiler.
 */
export async function planChat(
  registry: ModelRegistry,
  body: ChatCompletionRequest,
  seeds: SeedSource,
  maxTokensCap?: number,
  imageLimits: ImageLimits = DEFAULT_IMAGE_LIMITS,
  signal?: AbortSignal,
  cacheDomain = "",
): Promise<ChatPlan> {
  const { name: model, scheduler, chat } = registry.resolve(body.model, "generate");
  refusePeerFields(body);
  const fields = requestFields(body);
  checkRequest(body, fields);
  const host = scheduler.host;
  const template = chatTemplateOf(chat, body);
  const tools = resolveToolCalling(body, chat.toolCallParser, template);
  const reasoningParser = chat.reasoningParser ?? detectReasoningParser(template);
  // A model with a projector takes image parts: each becomes the projector's marker in the prompt.
  const media: MediaPrompt | undefined =
    host.imageMarker !== null ? { marker: host.imageMarker, images: [] } : undefined;
  let [prompt, addSpecialTokens] = await renderPrompt(host, chat, body, media);
  const markup = reasoningParser !== undefined ? thinkingMarkup(reasoningParser) : undefined;
  const parserFor = (startsInThinking: boolean | undefined, thinkingClosed: boolean) =>
    createChatOutputParser({
      ...(reasoningParser !== undefined ? { reasoningParser } : {}),
      ...(tools.parser !== undefined ? { toolParser: tools.parser, tools: body.tools ?? [] } : {}),
      ...(startsInThinking !== undefined ? { startsInThinking } : {}),
      thinkingClosed,
    });
  // The prompt's end says whether the output starts inside the block, after it (closed), or neither.
  const promptState = markup ? promptThinkingState(prompt, markup) : undefined;
  let startsInThinking = promptState === undefined ? undefined : promptState === "open";
  let thinkingClosed = promptState === "closed";
  const probe = parserFor(startsInThinking, thinkingClosed);
  let opened = probe.inReasoning();
  const closeText = probe.reasoning?.closeText;
  if (closeText !== undefined && fields.maxThinkingTokens === 0 && opened) {
    // No thinking at all: close the block in the prompt, as Qwen3's `enable_thinking: false` does.
    prompt += closeText;
    startsInThinking = false;
    thinkingClosed = true;
    opened = false;
  }
  // A closed block (thinking off) leaves the whole output to the answer: the grammar applies from the start.
  const thinking: ThinkingStart =
    reasoningParser === undefined || thinkingClosed ? "none" : opened ? "open" : "optional";
  let promptTokens: number[];
  let promptMedia: PromptMedia | undefined;
  if (media && media.images.length > 0) {
    if (body.prompt_logprobs !== undefined && body.prompt_logprobs !== null) {
      throw badRequest("prompt_logprobs cannot be combined with images yet.", "prompt_logprobs");
    }
    const tokenized = await tokenizeWithImages(host, prompt, addSpecialTokens, media.images, imageLimits);
    promptTokens = tokenized.promptTokens;
    promptMedia = tokenized.media;
  } else promptTokens = host.tokenize(prompt, addSpecialTokens);
  if (promptTokens.length === 0) {
    // The chat template rendered nothing (e.g. one that prints only the message content, given "").
    throw badRequest(
      "The rendered prompt is empty: the chat template produced no tokens for these messages.",
      "messages",
    );
  }
  const maxTokens = resolveMaxTokens(fields.maxTokens, promptTokens.length, host.contextSize, maxTokensCap);
  const counts = {
    logprobs: body.logprobs ? (body.top_logprobs ?? 0) : null,
    promptLogprobs: body.prompt_logprobs ?? null,
  };
  // A constraint on the answer after thinking needs the thinking to end: without a budget of the
  // client's, it gets half of the completion tokens (the close text is forced there).
  const answerConstraint =
    tools.schema !== undefined || (fields.constraint !== null && fields.constraint.kind !== "grammar");
  const budget =
    fields.maxThinkingTokens ??
    (answerConstraint && thinking !== "none" ? Math.floor(maxTokens / 2) : undefined);
  const grammar = await chatGrammar(fields, tools, thinking, signal, markup);
  const closeTokens =
    closeText !== undefined && budget !== undefined && budget > 0 ? host.tokenize(closeText, false) : null;
  const outputs: ChoiceOutput[] = [];
  const requests = Array.from({ length: body.n ?? 1 }, (_, choice): GenerationRequest => {
    const output = new ChoiceOutput(parserFor(startsInThinking, thinkingClosed), {
      parallelToolCalls: tools.parallel,
      forcedToolCall: tools.mode === "forced",
    });
    outputs.push(output);
    const request = generationRequest(
      body,
      fields,
      host,
      promptTokens,
      maxTokens,
      choice,
      seeds,
      counts,
      grammar,
    );
    if (promptMedia) request.media = promptMedia;
    if (markup?.specialTokens) request.renderSpecialTokens = true;
    request.cacheDomain = cacheDomain;
    if (closeTokens && budget !== undefined)
      request.injectTokens = output.thinkingBudget(budget, closeTokens);
    return request;
  });
  return {
    id: body.request_id || `chatcmpl-${randomUUID().replaceAll("-", "")}`,
    created: Math.floor(Date.now() / 1000),
    model,
    scheduler,
    body,
    requests,
    outputs,
    naming: { vocabulary: host.vocabulary, asIds: body.return_tokens_as_token_ids ?? false },
  };
}

/** Image limits when the server gives none: 20 MB, public URLs only, 10 s (as `--max-image-bytes`). */
const DEFAULT_IMAGE_LIMITS: ImageLimits = { maxBytes: 20_000_000, allowPrivate: false };

/** The chat template a request renders with: its own `chat_template`, else the model's, else ChatML. */
export function chatTemplateOf(
  chat: ChatSettings,
  body: Pick<ChatCompletionRequest, "chat_template">,
): string {
  if (body.chat_template !== undefined && body.chat_template !== null && !chat.trustRequestTemplate) {
    throw badRequest(
      "Request chat templates are disabled: a template runs arbitrary Jinja on the server. Start the server with --trust-request-chat-template to allow them (as vLLM).",
      "chat_template",
    );
  }
  return body.chat_template ?? chat.template ?? CHATML_FALLBACK_TEMPLATE;
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
  | "reasoning_effort"
  | "add_special_tokens"
>;

/**
 * The prompt text and whether to add special tokens: the request's `chat_template`, else the model's
 * (flag or GGUF), else ChatML as llama-server falls back to. `add_special_tokens` defaults to false as
 * in vLLM, and BOS is never doubled when the template already wrote it. Also used by `/tokenize`
 * (`serving/tokenization.ts`) for a `messages` request. The template renders in the template sandbox
 * (worker threads under range, output, memory and time limits: `chat/TemplateSandbox.ts`).
 * @throws ApiError 400 for unsupported content, a template that fails to render or goes past a limit.
 */
export async function renderPrompt(
  host: EngineHost,
  chat: ChatSettings,
  body: ChatPromptFields,
  media?: MediaPrompt,
): Promise<[string, boolean]> {
  const template = chatTemplateOf(chat, body);
  // `reasoning_effort` sets the template's own knob; the client's `chat_template_kwargs` win.
  const effort = reasoningEffortVariables(template, body.reasoning_effort ?? undefined);
  const kwargs = { ...effort, ...(body.chat_template_kwargs ?? {}) };
  const prompt = await renderChatTemplateSandboxed(template, {
    messages: normalizeMessages(body.messages, media),
    tools: body.tools ?? null,
    documents: body.documents ?? null,
    addGenerationPrompt: body.add_generation_prompt ?? !body.continue_final_message,
    continueFinalMessage: body.continue_final_message ?? false,
    bosToken: host.bosText,
    eosToken: host.eosText,
    kwargs,
  });
  const addSpecialTokens = (body.add_special_tokens ?? false) && !promptStartsWithBos(prompt, host.bosText);
  return [prompt, addSpecialTokens];
}

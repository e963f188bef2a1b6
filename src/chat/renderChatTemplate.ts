/**
 * Renders a model's Jinja chat template into the prompt text, the way transformers'
 * `apply_chat_template` (and so vLLM) does, with `@huggingface/jinja`.
 */
import { Template } from "@huggingface/jinja";
import { badRequest } from "../errors.ts";
import type { ChatTool } from "../protocol/tools.ts";
import { installJinjaExtensions } from "./jinjaExtensions.mjs";
import type { TemplateMessage } from "./messages.ts";
import { TemplateRenderError, TemplateSandbox } from "./TemplateSandbox.ts";
import { shapeConversation, type TemplateCaps, templateCaps, templateCapsAsync } from "./templateCaps.ts";

/**
 * The template used when a model has none: ChatML, as llama-server falls back to (llama.cpp's
 * `CHATML_TEMPLATE_SRC`). Each message becomes `<|im_start|>{role}\n{content}<|im_end|>\n`; the generation
 * prompt is `<|im_start|>assistant\n`. It renders no tools and no tool calls.
 */
export const CHATML_FALLBACK_TEMPLATE = `{%- for message in messages -%}
  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\\n' -}}
{%- endif -%}`;

/** What a template is rendered with. */
export type RenderChatTemplateContext = {
  /** Normalised messages (see `normalizeMessages`). */
  messages: readonly TemplateMessage[];
  /** The request's tools, as given; absent or empty → the template sees `tools = none`. */
  tools?: readonly ChatTool[] | null;
  /** RAG documents (transformers' `documents`); absent → `none`. */
  documents?: readonly Record<string, unknown>[] | null;
  /** Append the assistant turn's opening (transformers' `add_generation_prompt`). */
  addGenerationPrompt: boolean;
  /** Leave the final message open for the model to continue (vLLM's `continue_final_message`). */
  continueFinalMessage?: boolean;
  /** The model's BOS token text (`bos_token`), `""` when it has none. */
  bosToken: string;
  /** The model's EOS token text (`eos_token`). */
  eosToken: string;
  /** The request's `chat_template_kwargs` (e.g. `{enable_thinking: false}`), spread into the variables. */
  kwargs?: Record<string, unknown> | null;
};

installJinjaExtensions();

const MAX_CACHED_TEMPLATES = 64;
const templateCache = new Map<string, Template>();

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The parsed template for `text`, from a small cache keyed by the text (parsing is the costly part).
 * Throws 400 when the template does not parse (a request's own `chat_template` can be broken).
 */
function parsedTemplate(text: string): Template {
  const cached = templateCache.get(text);
  if (cached) return cached;
  let template: Template;
  try {
    template = new Template(text);
  } catch (error) {
    throw parseFailed(errorMessage(error));
  }
  if (templateCache.size >= MAX_CACHED_TEMPLATES) {
    const oldest = templateCache.keys().next().value;
    if (oldest !== undefined) templateCache.delete(oldest);
  }
  templateCache.set(text, template);
  return template;
}

/**
 * Cuts `rendered` right after the final message's content, exactly as transformers'
 * `apply_chat_template(continue_final_message=True)`: find the last occurrence of the stripped content;
 * keep the content's trailing whitespace when the template kept it, else cut after the stripped text.
 * Throws 400 when the content does not appear in the rendered text.
 */
function cutAfterFinalMessage(rendered: string, finalContent: string): string {
  const stripped = finalContent.trim();
  const at = rendered.lastIndexOf(stripped);
  if (at < 0) {
    throw badRequest(
      "continue_final_message is set but the final message does not appear in the chat after applying the chat template.",
      "continue_final_message",
    );
  }
  const untrimmedStart = finalContent.trimStart();
  if (rendered.slice(at, at + untrimmedStart.length) === finalContent)
    return rendered.slice(0, at + untrimmedStart.length);
  return rendered.slice(0, at + stripped.length);
}

/**
 * Renders `template` with transformers' variables: `messages`, `tools` and `documents` (`null` when
 * absent, so `is none` tests hold as in Python), `add_generation_prompt`, `bos_token`, `eos_token`, plus
 * `chat_template_kwargs` spread in (our own variables win over same-named kwargs). With
 * `continueFinalMessage` the template is rendered without a generation prompt and the text is cut after
 * the final message's content (see above), so the model continues that message.
 *
 * Throws 400: when both `addGenerationPrompt` and `continueFinalMessage` are set (vLLM's check, `param:
 * "continue_final_message"`); when the template does not parse (`param: "chat_template"`); when rendering
 * fails, e.g. the template's `raise_exception("Conversation roles must alternate…")`, with the template's
 * message (`param: "messages"`, code `chat_template_error`).
 */
export function renderChatTemplate(template: string, ctx: RenderChatTemplateContext): string {
  checkFlags(ctx);
  const compiled = parsedTemplate(template);
  const caps = templateCaps(template, (variables) => compiled.render(variables));
  const shaped = shapedContext(ctx, caps);
  let rendered: string;
  try {
    rendered = compiled.render(templateVariables(shaped));
  } catch (error) {
    throw renderFailed(errorMessage(error), caps.stringArguments ? [] : ctx.messages);
  }
  return finishRender(rendered, shaped);
}

/** `ctx` with its messages and tools shaped for a template with `caps` (see `shapeConversation`). */
function shapedContext(ctx: RenderChatTemplateContext, caps: TemplateCaps): RenderChatTemplateContext {
  const shaped = shapeConversation(ctx.messages, ctx.tools, caps);
  return { ...ctx, messages: shaped.messages, tools: shaped.tools };
}

/**
 * {@link renderChatTemplate} in a {@link TemplateSandbox} (worker threads under hard limits), so that no
 * template can crash the process or block the event loop. Same variables, same result, same errors,
 * plus a 400 `chat_template_limit` (`param: "chat_template"`) when the template goes past a limit: a
 * `range()` over 100,000 items (as jinja2's sandbox, which vLLM uses), a prompt over 16 Mi characters,
 * more than 256 MiB of heap or 5 s of rendering (see `DEFAULT_TEMPLATE_LIMITS`).
 * @param sandbox Defaults to one shared sandbox with the default limits, created on first use.
 */
export async function renderChatTemplateSandboxed(
  template: string,
  ctx: RenderChatTemplateContext,
  sandbox: TemplateSandbox = sharedSandbox(),
): Promise<string> {
  checkFlags(ctx);
  let rendered: string;
  let shaped: RenderChatTemplateContext;
  let caps: TemplateCaps | undefined;
  try {
    // A probe that goes past a limit ends the request: the template would go past it again.
    caps = await templateCapsAsync(
      template,
      (variables) => sandbox.render(template, variables),
      (error) => error instanceof TemplateRenderError && error.stage !== "render",
    );
    shaped = shapedContext(ctx, caps);
    rendered = await sandbox.render(template, templateVariables(shaped));
  } catch (error) {
    if (!(error instanceof TemplateRenderError)) throw error;
    if (error.stage === "parse") throw parseFailed(error.message);
    if (error.stage === "render")
      throw renderFailed(error.message, caps?.stringArguments === false ? ctx.messages : []);
    throw badRequest(
      `The chat template went past the server's limits: ${error.message}`,
      "chat_template",
      "chat_template_limit",
    );
  }
  return finishRender(rendered, shaped);
}

let shared: TemplateSandbox | undefined;

/** The process-wide sandbox with the default limits (its idle workers never keep the process alive). */
function sharedSandbox(): TemplateSandbox {
  shared ??= new TemplateSandbox();
  return shared;
}

/** Throws 400 when both `continueFinalMessage` and `addGenerationPrompt` are set (vLLM's check). */
function checkFlags(ctx: RenderChatTemplateContext): void {
  if ((ctx.continueFinalMessage ?? false) && ctx.addGenerationPrompt) {
    throw badRequest(
      "Cannot set both `continue_final_message` and `add_generation_prompt` to true.",
      "continue_final_message",
    );
  }
}

/** The template's variables (see {@link renderChatTemplate}). */
function templateVariables(ctx: RenderChatTemplateContext): Record<string, unknown> {
  const continueFinal = ctx.continueFinalMessage ?? false;
  return {
    ...(ctx.kwargs ?? {}),
    messages: ctx.messages,
    tools: ctx.tools && ctx.tools.length > 0 ? ctx.tools : null,
    documents: ctx.documents && ctx.documents.length > 0 ? ctx.documents : null,
    add_generation_prompt: continueFinal ? false : ctx.addGenerationPrompt,
    bos_token: ctx.bosToken,
    eos_token: ctx.eosToken,
  };
}

/** The rendered text, cut after the final message under `continueFinalMessage`. */
function finishRender(rendered: string, ctx: RenderChatTemplateContext): string {
  if (!(ctx.continueFinalMessage ?? false)) return rendered;
  const last = ctx.messages[ctx.messages.length - 1];
  if (!last) throw badRequest("continue_final_message needs at least one message.", "messages");
  return cutAfterFinalMessage(rendered, last.content);
}

function parseFailed(message: string) {
  return badRequest(`The chat template does not parse: ${message}`, "chat_template", "invalid_chat_template");
}

/**
 * The 400 for a template that raised while rendering. When the conversation holds a tool call whose
 * `arguments` is not a JSON object (kept as the client's string), the template most likely failed on it
 * (templates that iterate `arguments.items()`): the error then names that field first, since the
 * template's own message ("Unknown StringValue filter: items") does not say what to fix.
 */
function renderFailed(message: string, messages: readonly TemplateMessage[] = []) {
  for (const [i, m] of messages.entries()) {
    for (const [j, call] of (m.tool_calls ?? []).entries()) {
      if (typeof call.function.arguments !== "string") continue;
      return badRequest(
        `messages[${i}].tool_calls[${j}].function.arguments is not a JSON object, and this model's chat template reads the arguments as an object; send the arguments as JSON object text (the template failed: ${message})`,
        `messages[${i}].tool_calls[${j}].function.arguments`,
        "chat_template_error",
      );
    }
  }
  return badRequest(`The chat template failed to render: ${message}`, "messages", "chat_template_error");
}

/**
 * True when the rendered prompt already starts with the BOS token's text (templates such as Llama 3's
 * and Gemma's write `{{ bos_token }}`): the caller must then tokenize it without adding another BOS
 * (llama.cpp warns of a doubled BOS otherwise). Always false for an empty `bosToken`.
 */
export function promptStartsWithBos(prompt: string, bosToken: string): boolean {
  return bosToken !== "" && prompt.startsWith(bosToken);
}

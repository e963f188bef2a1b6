import { type StructuredSpec, structuredFields } from "./structured.ts";

/** Chat (messages, chat template) or raw completion (prompt as given). */
export type Mode = "chat" | "completion";

/** One part of a multimodal user message (OpenAI's content parts; images as `data:` URLs here). */
export type ContentPart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };

/** One chat message the playground sends: text, or (a user message with images) content parts. */
export type ChatMessage = { role: "system" | "user" | "assistant"; content: string | ContentPart[] };

/**
 * The content of a user message: the text alone when no image is attached (the plain form every server
 * takes), else content parts: the text (when not blank) then one `image_url` part per image, in order.
 * @param images - `data:` URLs (or any URLs the server may fetch).
 */
export function userContent(text: string, images: readonly string[]): string | ContentPart[] {
  if (images.length === 0) return text;
  return [
    ...(text.trim() === "" ? [] : [{ type: "text" as const, text }]),
    ...images.map((url) => ({ type: "image_url" as const, image_url: { url } })),
  ];
}

/** The playground's settings; an absent number means "server default" (the field is not sent). */
export type Settings = {
  mode: Mode;
  model: string;
  systemPrompt: string;
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  maxTokens?: number;
  seed?: number;
  stop: string[];
  structured: StructuredSpec;
  logprobs: boolean;
};

/** A request ready to send: endpoint path (relative to the UI) and JSON body. */
export type ApiRequest = { path: "v1/chat/completions" | "v1/completions"; body: Record<string, unknown> };

/**
 * Builds the streamed request the playground sends: chat (system prompt + conversation) or completion
 * (`prompt`), sampling fields that are set, structured output, logprobs (chat: `logprobs` +
 * `top_logprobs: 5`; completions: `logprobs: 5`) and `stream_options.include_usage`.
 * @throws SettingsError for an invalid structured-output spec.
 */
export function buildRequest(
  settings: Settings,
  input: { messages: ChatMessage[] } | { prompt: string },
): ApiRequest {
  const sampling: Record<string, unknown> = {};
  const set = (name: string, value: unknown) => {
    if (value !== undefined) sampling[name] = value;
  };
  set("max_tokens", settings.maxTokens);
  set("temperature", settings.temperature);
  set("top_p", settings.topP);
  set("top_k", settings.topK);
  set("min_p", settings.minP);
  set("seed", settings.seed);
  if (settings.stop.length > 0) sampling.stop = settings.stop;
  const structured = structuredFields(settings.structured);
  const stream = { stream: true, stream_options: { include_usage: true } };
  if ("messages" in input) {
    const system = settings.systemPrompt.trim();
    const messages: ChatMessage[] = [
      ...(system ? [{ role: "system" as const, content: system }] : []),
      ...input.messages,
    ];
    return {
      path: "v1/chat/completions",
      body: {
        model: settings.model,
        messages,
        ...sampling,
        ...(settings.logprobs ? { logprobs: true, top_logprobs: 5 } : {}),
        ...structured,
        ...stream,
      },
    };
  }
  return {
    path: "v1/completions",
    body: {
      model: settings.model,
      prompt: input.prompt,
      ...sampling,
      ...(settings.logprobs ? { logprobs: 5 } : {}),
      ...structured,
      ...stream,
    },
  };
}

/** Parses the stop box: one stop string per line, with `\n` and `\t` escapes. */
export function parseStopLines(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) =>
      line.replace(/\\([nt\\])/g, (_match, c: string) => (c === "n" ? "\n" : c === "t" ? "\t" : "\\")),
    );
}

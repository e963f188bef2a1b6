/**
 * OpenAI chat messages: the normaliser that turns validated messages (their schema is
 * `protocol/messages.ts`) into the objects chat templates read (as vLLM's `parse_chat_messages`
 * prepares its `conversation`).
 */
import { badRequest } from "../errors.ts";
import type { ChatMessage, ContentPart } from "../protocol/messages.ts";

/**
 * A tool call as templates read it: like OpenAI's, but `function.arguments` is the parsed JSON object
 * when the string held one (Llama 3.x, Qwen and most tool templates apply `| tojson` to it, as
 * transformers expects; vLLM does the same parse), else the original string.
 */
export type TemplateToolCall = {
  id: string;
  type: "function";
  function: { name: string; arguments: Record<string, unknown> | string };
};

/**
 * A message as chat templates read it: `content` always a string; `developer` became `system` and the
 * legacy `function` role became `tool`; keys are present only when they have a value.
 */
export type TemplateMessage = {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  tool_calls?: TemplateToolCall[];
  tool_call_id?: string;
  /** The assistant's earlier reasoning (set together with `reasoning`, as vLLM does, for templates reading either). */
  reasoning_content?: string;
  reasoning?: string;
};

const MEDIA_WORDS: Record<string, string> = {
  image_url: "images",
  input_audio: "audio",
  video_url: "video",
  file: "files",
};

/** An image part of a message, found while normalising: its URL and where it was (for 400s). */
export type MessageImage = {
  /** `image_url.url`: a `data:` or `http(s)` URL. */
  url: string;
  /** `image_url.detail` (`auto`, `low`, `high`): accepted; the projector decides the resolution. */
  detail?: string;
  /** `messages[i].content[j]`. */
  param: string;
};

/**
 * How a model that takes images wants them in the prompt: each image part becomes `marker` in the
 * message's text, at its place, and is collected in `images`, in order (as llama-server puts mtmd's
 * marker where each image goes).
 */
export type MediaPrompt = { readonly marker: string; readonly images: MessageImage[] };

/**
 * The text of a message's content: a string as is, parts' texts joined with `"\n"` (as vLLM joins text
 * parts), `null`/absent as `""`. With `media`, a user message's `image_url` parts become its marker.
 * Throws 400 naming `messages[i].content[j]` for another media part (or any image part when the model
 * takes none, or outside a user message), a malformed image part, a `refusal` part outside an
 * assistant message, and, with `media`, text holding the image marker.
 */
function contentText(
  value: string | ContentPart[] | null | undefined,
  index: number,
  role: string,
  media: MediaPrompt | undefined,
): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return withoutMarker(value, media, `messages[${index}].content`);
  const texts: string[] = [];
  value.forEach((part, j) => {
    const param = `messages[${index}].content[${j}]`;
    if (part.type === "text") texts.push(withoutMarker(part.text, media, param));
    else if (part.type === "refusal" && role === "assistant") texts.push(part.refusal);
    else if (part.type === "refusal") {
      throw badRequest(`A refusal part is only allowed in an assistant message (${param}).`, param);
    } else if (part.type === "image_url" && media && role === "user") {
      texts.push(media.marker);
      media.images.push(imagePart(part, param));
    } else if (part.type === "image_url" && media) {
      throw badRequest(
        `Images are only accepted in user messages: ${param} is in a '${role}' message.`,
        param,
      );
    } else {
      const what = MEDIA_WORDS[part.type] ?? part.type;
      throw badRequest(`The model does not accept ${what}: ${param} is a '${part.type}' part.`, param);
    }
  });
  return texts.join("\n");
}

/**
 * `text`, refused when it holds the projector's image marker (`<__media__>`): the marker would take an
 * image's place in the prompt (as llama-server, which has no escape for it either).
 * @throws ApiError 400 naming `param`.
 */
function withoutMarker(text: string, media: MediaPrompt | undefined, param: string): string {
  if (media && text.includes(media.marker)) {
    throw badRequest(
      `${param} contains the text '${media.marker}', this model's image marker; remove it (images are sent as image_url parts).`,
      param,
    );
  }
  return text;
}

/** The URL and detail of an `image_url` part. @throws ApiError 400 naming `param` when it has no URL string. */
function imagePart(part: ContentPart, param: string): MessageImage {
  const image = (part as { image_url?: unknown }).image_url;
  const url = typeof image === "string" ? image : (image as { url?: unknown } | undefined)?.url;
  if (typeof url !== "string" || url.length === 0) {
    throw badRequest(
      `${param}: an image_url part needs image_url.url, a data: or http(s) URL.`,
      `${param}.image_url.url`,
    );
  }
  const detail = (image as { detail?: unknown } | undefined)?.detail;
  if (detail !== undefined && detail !== null && !["auto", "low", "high"].includes(String(detail))) {
    throw badRequest(`${param}: image_url.detail must be auto, low or high.`, `${param}.image_url.detail`);
  }
  return { url, param, ...(typeof detail === "string" ? { detail } : {}) };
}

/** Parses a tool call's `arguments` JSON string to an object where it holds one. */
function templateArguments(text: string): Record<string, unknown> | string {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
  } catch {
    // Not JSON: the template gets the string as the client sent it.
  }
  return text;
}

/**
 * Turns validated request messages into template-ready {@link TemplateMessage}s, following vLLM's
 * `_parse_chat_message_content` + `_postprocess_messages`: `developer` → `system`; content strings kept,
 * text parts joined with `"\n"`, null content → `""`; `name`, `tool_call_id` and assistant `tool_calls`
 * carried over with `arguments` parsed to an object where valid JSON; assistant `reasoning_content` /
 * `reasoning` passed as both keys; a `tool` message without `name` gets the name of the earlier assistant
 * call its `tool_call_id` answers (templates such as Kimi K2's and Command R's print it). Legacy forms: the `function` role becomes a `tool` message keeping
 * `name`; an assistant `function_call` becomes a one-element `tool_calls` with id `call_<message index>`.
 * Throws 400 (`param: "messages"`) for an empty list and the errors of content parts (see above).
 */
export function normalizeMessages(messages: readonly ChatMessage[], media?: MediaPrompt): TemplateMessage[] {
  if (messages.length === 0) throw badRequest("`messages` must contain at least one message.", "messages");
  const out = messages.map((message, index) => normalizeMessage(message, index, media));
  const callNames = new Map<string, string>();
  for (const message of out) {
    for (const call of message.tool_calls ?? []) callNames.set(call.id, call.function.name);
    const name = message.tool_call_id === undefined ? undefined : callNames.get(message.tool_call_id);
    if (message.role === "tool" && message.name === undefined && name !== undefined) message.name = name;
  }
  return out;
}

/** One message of {@link normalizeMessages}; `index` is its position, for error params and legacy ids. */
function normalizeMessage(
  message: ChatMessage,
  index: number,
  media: MediaPrompt | undefined,
): TemplateMessage {
  switch (message.role) {
    case "system":
    case "developer":
    case "user": {
      const role = message.role === "user" ? "user" : "system";
      const out: TemplateMessage = {
        role,
        content: contentText(message.content, index, message.role, media),
      };
      if (message.name !== undefined) out.name = message.name;
      return out;
    }
    case "assistant": {
      const out: TemplateMessage = {
        role: "assistant",
        content: contentText(message.content, index, "assistant", media),
      };
      if (message.name !== undefined) out.name = message.name;
      const calls = message.tool_calls ?? [];
      const legacy = message.function_call;
      if (calls.length > 0) {
        out.tool_calls = calls.map((call) => ({
          id: call.id,
          type: "function",
          function: { name: call.function.name, arguments: templateArguments(call.function.arguments) },
        }));
      } else if (legacy) {
        out.tool_calls = [
          {
            id: `call_${index}`,
            type: "function",
            function: { name: legacy.name, arguments: templateArguments(legacy.arguments) },
          },
        ];
      }
      const reasoning = message.reasoning_content ?? message.reasoning;
      if (reasoning !== null && reasoning !== undefined) {
        out.reasoning_content = reasoning;
        out.reasoning = reasoning;
      }
      return out;
    }
    case "tool": {
      const out: TemplateMessage = {
        role: "tool",
        content: contentText(message.content, index, "tool", media),
        tool_call_id: message.tool_call_id,
      };
      if (message.name !== undefined) out.name = message.name;
      return out;
    }
    case "function":
      return { role: "tool", content: message.content ?? "", name: message.name };
  }
}

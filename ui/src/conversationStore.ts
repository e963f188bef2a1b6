import type { ChatMessage, ContentPart } from "./request.ts";

/** localStorage key of the playground's conversation (kept across a reload until Clear). */
export const CONVERSATION_KEY = "lmserve.playground.conversation";

type KeyValueStore = Pick<Storage, "getItem" | "setItem" | "removeItem">;

/** This page's localStorage, or null where it is unavailable (blocked by the browser's settings). */
function defaultStore(): KeyValueStore | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null;
  }
}

/**
 * Keeps the conversation for the next visit; an empty one removes the key (Clear). Returns false when
 * it could not be stored (quota exceeded, e.g. large attached images; storage unavailable).
 */
export function saveConversation(
  messages: readonly ChatMessage[],
  store: KeyValueStore | null = defaultStore(),
): boolean {
  if (!store) return false;
  try {
    if (messages.length === 0) store.removeItem(CONVERSATION_KEY);
    else store.setItem(CONVERSATION_KEY, JSON.stringify(messages));
    return true;
  } catch {
    store.removeItem(CONVERSATION_KEY);
    return false;
  }
}

/** The kept conversation; messages of another shape (an edited or older entry) are dropped. */
export function loadConversation(store: KeyValueStore | null = defaultStore()): ChatMessage[] {
  try {
    const parsed: unknown = JSON.parse(store?.getItem(CONVERSATION_KEY) ?? "[]");
    return Array.isArray(parsed) ? parsed.filter(isChatMessage) : [];
  } catch {
    return [];
  }
}

function isChatMessage(value: unknown): value is ChatMessage {
  if (typeof value !== "object" || value === null) return false;
  const { role, content } = value as Record<string, unknown>;
  if (role !== "user" && role !== "assistant" && role !== "system") return false;
  return typeof content === "string" || (Array.isArray(content) && content.every(isContentPart));
}

function isContentPart(value: unknown): value is ContentPart {
  const part = value as Record<string, unknown> | null;
  if (part?.type === "text") return typeof part.text === "string";
  const image = part?.image_url as Record<string, unknown> | undefined;
  return part?.type === "image_url" && typeof image?.url === "string";
}

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CONVERSATION_KEY, loadConversation, saveConversation } from "../../../ui/src/conversationStore.ts";
import type { ChatMessage } from "../../../ui/src/request.ts";

function memoryStore(quota = Number.POSITIVE_INFINITY) {
  const map = new Map<string, string>();
  return {
    map,
    getItem: (key: string) => map.get(key) ?? null,
    setItem: (key: string, value: string) => {
      if (value.length > quota) throw new DOMException("full", "QuotaExceededError");
      map.set(key, value);
    },
    removeItem: (key: string) => void map.delete(key),
  };
}

describe("conversation store", () => {
  const messages: ChatMessage[] = [
    {
      role: "user",
      content: [
        { type: "text", text: "what is this?" },
        { type: "image_url", image_url: { url: "data:image/png;base64,AA==" } },
      ],
    },
    { role: "assistant", content: "A **cat**." },
  ];

  it("keeps the conversation across a reload, and Clear (empty) removes it", () => {
    const store = memoryStore();
    assert.equal(saveConversation(messages, store), true);
    assert.deepEqual(loadConversation(store), messages);
    assert.equal(saveConversation([], store), true);
    assert.equal(store.map.has(CONVERSATION_KEY), false);
    assert.deepEqual(loadConversation(store), []);
  });

  it("drops malformed entries and survives bad JSON, a full or missing store", () => {
    const store = memoryStore();
    store.map.set(
      CONVERSATION_KEY,
      JSON.stringify([{ role: "tool", content: "x" }, { role: "user" }, ...messages]),
    );
    assert.deepEqual(loadConversation(store), messages);
    store.map.set(CONVERSATION_KEY, "{not json");
    assert.deepEqual(loadConversation(store), []);
    const small = memoryStore(10);
    assert.equal(saveConversation(messages, small), false);
    assert.equal(small.map.size, 0);
    assert.equal(saveConversation(messages, null), false);
    assert.deepEqual(loadConversation(null), []);
  });
});

/** The image marker as literal text in a conversation is refused (issue 31): it would take an image's place. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { normalizeMessages } from "../../../src/chat/messages.ts";
import { ApiError } from "../../../src/errors.ts";
import type { ChatMessage } from "../../../src/protocol/messages.ts";

const MARKER = "<__media__>";

/** The 400's `param` for `messages` on a model that takes images. */
function refusedParam(messages: ChatMessage[]): string | null {
  try {
    normalizeMessages(messages, { marker: MARKER, images: [] });
  } catch (error) {
    assert.ok(error instanceof ApiError && error.status === 400, String(error));
    assert.match(error.message, /image marker/);
    return error.param;
  }
  return null;
}

describe("the image marker in text", () => {
  test("is refused in string content and in text parts, naming where", () => {
    assert.equal(refusedParam([{ role: "user", content: `look ${MARKER} here` }]), "messages[0].content");
    const parts = [
      { type: "text", text: "fine" },
      { type: "text", text: MARKER },
    ] as ChatMessage["content"];
    assert.equal(
      refusedParam([
        { role: "system", content: "hi" },
        { role: "user", content: parts },
      ] as ChatMessage[]),
      "messages[1].content[1]",
    );
  });

  test("passes on a model without images, and beside real image parts", () => {
    assert.doesNotThrow(() => normalizeMessages([{ role: "user", content: MARKER }] as ChatMessage[]));
    const media = { marker: MARKER, images: [] };
    normalizeMessages(
      [
        {
          role: "user",
          content: [
            { type: "text", text: "what is this?" },
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
          ],
        },
      ] as ChatMessage[],
      media,
    );
    assert.equal(media.images.length, 1);
  });
});

/**
 * The playground's image input: which models offer it, which files it attaches, and the content parts
 * of a user message with images.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { takesImages } from "../../../ui/src/api.ts";
import { isAttachableImage } from "../../../ui/src/imageAttachment.ts";
import { buildRequest, type Settings, userContent } from "../../../ui/src/request.ts";

const PNG_URL = "data:image/png;base64,iVBORw0KGgo=";
const GIF_URL = "data:image/gif;base64,R0lGODlh";

describe("image input in the playground", () => {
  it("is offered only for models whose /v1/models entry says capabilities.vision is true", () => {
    assert.equal(takesImages({ id: "v", capabilities: { vision: true } }), true);
    assert.equal(takesImages({ id: "t", capabilities: { vision: false } }), false);
    assert.equal(takesImages({ id: "t", capabilities: {} }), false);
    assert.equal(takesImages({ id: "t" }), false);
    assert.equal(takesImages(undefined), false);
  });

  it("attaches PNG, JPEG, GIF and BMP files only", () => {
    for (const type of ["image/png", "image/jpeg", "image/gif", "image/bmp", "image/x-ms-bmp", "IMAGE/PNG"]) {
      assert.equal(isAttachableImage(type), true, type);
    }
    for (const type of ["image/webp", "image/svg+xml", "image/avif", "text/plain", ""]) {
      assert.equal(isAttachableImage(type), false, type);
    }
  });

  it("keeps a message without images plain text", () => {
    assert.equal(userContent("Hello", []), "Hello");
  });

  it("sends the text then one image_url part per image, in order; a blank text is left out", () => {
    assert.deepEqual(userContent("What is this?", [PNG_URL, GIF_URL]), [
      { type: "text", text: "What is this?" },
      { type: "image_url", image_url: { url: PNG_URL } },
      { type: "image_url", image_url: { url: GIF_URL } },
    ]);
    assert.deepEqual(userContent("  ", [PNG_URL]), [{ type: "image_url", image_url: { url: PNG_URL } }]);
  });

  it("puts the parts into the chat request after the system prompt and earlier turns", () => {
    const settings: Settings = {
      mode: "chat",
      model: "vlm",
      systemPrompt: "Describe images.",
      stop: [],
      structured: { kind: "none", text: "" },
      logprobs: false,
    };
    const request = buildRequest(settings, {
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello!" },
        { role: "user", content: userContent("And this?", [PNG_URL]) },
      ],
    });
    assert.equal(request.path, "v1/chat/completions");
    assert.deepEqual(request.body.messages, [
      { role: "system", content: "Describe images." },
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello!" },
      {
        role: "user",
        content: [
          { type: "text", text: "And this?" },
          { type: "image_url", image_url: { url: PNG_URL } },
        ],
      },
    ]);
  });
});

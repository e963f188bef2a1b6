/**
 * A chat prompt with images (NIM VLM `image_url` content parts): the images are loaded (`imageSource.ts`),
 * then the rendered prompt, holding the projector's marker where each image goes, is tokenized together
 * with them by the model's projector (llama.cpp's mtmd). Each image takes its token count of prompt
 * positions, held in `promptTokens` as a placeholder id derived from the image's hash.
 */
import type { MessageImage } from "../../chat/messages.ts";
import type { MediaSpan, PromptMedia } from "../../engine/types.ts";
import { badRequest } from "../../errors.ts";
import type { EngineHost } from "../engine.ts";
import { type ImageSourceOptions, loadImage } from "./imageSource.ts";
import { imageDimensions, MAX_IMAGE_PIXELS } from "./imageType.ts";

/** The image limits of the server (`--max-image-bytes`, `--allow-private-image-urls`). */
export type ImageLimits = Pick<ImageSourceOptions, "maxBytes" | "allowPrivate"> & { timeoutMs?: number };

/** A tokenized prompt and its images for the engine. */
export type ImagePrompt = { promptTokens: number[]; media: PromptMedia };

/**
 * Loads the images and tokenizes `prompt` with them.
 * @param addBos prepend BOS (the template did not write it).
 * @throws ApiError 400 naming `messages[i].content[j]` for an image that cannot be fetched, is not an
 *   image, is too large, or does not decode; 400 when the markers in the rendered prompt and the images
 *   do not pair up (the template dropped an image, or the text holds the marker itself).
 */
export async function tokenizeWithImages(
  host: EngineHost,
  prompt: string,
  addBos: boolean,
  images: readonly MessageImage[],
  limits: ImageLimits,
): Promise<ImagePrompt> {
  const projector = host.projector;
  if (!projector) throw new Error("tokenizeWithImages needs a model with a projector");
  const loaded = await Promise.all(
    images.map((image) =>
      loadImage(image.url, {
        maxBytes: limits.maxBytes,
        allowPrivate: limits.allowPrivate,
        ...(limits.timeoutMs !== undefined ? { timeoutMs: limits.timeoutMs } : {}),
        param: image.param,
      }),
    ),
  );
  // Before decoding, the formats whose header checks itself (a GIF's logical screen does not: a corrupt
  // GIF would read as a huge one, so GIFs are left to the decoder).
  for (const [index, image] of images.entries()) {
    if (loaded[index]!.mime !== "image/gif") refuseTooLarge(loaded[index]!.bytes, image.param);
  }
  const marker = host.imageMarker ?? "";
  const markers = prompt.split(marker).length - 1;
  if (markers !== images.length) {
    throw badRequest(
      `The rendered prompt holds ${markers} image markers (${marker}) for ${images.length} images: the chat template must keep every image part, and text must not contain the marker itself.`,
      "messages",
    );
  }
  let tokenized: ReturnType<typeof projector.tokenize>;
  try {
    tokenized = projector.tokenize(
      prompt,
      loaded.map((image) => image.bytes),
    );
  } catch (error) {
    const index = (error as { imageIndex?: number }).imageIndex;
    const image = index === undefined ? undefined : images[index];
    if (image) {
      throw badRequest(
        `${image.param}: the image could not be decoded (corrupt or an unsupported format).`,
        image.param,
      );
    }
    throw badRequest(`The images could not be read: ${(error as Error).message}.`, "messages");
  }
  // BOS as plain tokenization adds it (ModelHost.withBos), then the chunks after it.
  const promptTokens = host.withBos([], addBos);
  const spans: MediaSpan[] = [];
  tokenized.chunks.forEach((chunk, index) => {
    if (chunk.type === "text") {
      for (const token of chunk.tokens) promptTokens.push(token);
      return;
    }
    spans.push({ start: promptTokens.length, length: chunk.nTokens, nPos: chunk.nPos, chunk: index });
    const placeholder = placeholderId(chunk.id);
    for (let position = 0; position < chunk.nTokens; position++) promptTokens.push(placeholder);
  });
  return { promptTokens, media: { prompt: tokenized.prompt, spans } };
}

/** A negative id from an image's SHA-256 (hex): equal images share it, different ones (almost) never. */
function placeholderId(hash: string): number {
  return -1 - Number.parseInt(hash.slice(0, 12) || "0", 16);
}

/**
 * Refuses an image whose header declares more than {@link MAX_IMAGE_PIXELS} pixels, before any decoding.
 * @throws ApiError 400 naming the content part (`param`), with the dimensions and the limit.
 */
export function refuseTooLarge(bytes: Uint8Array, param: string): void {
  const size = imageDimensions(bytes);
  if (size !== undefined && size.width * size.height > MAX_IMAGE_PIXELS) {
    throw badRequest(
      `${param}: the image is too large (${size.width}x${size.height} pixels; at most ${MAX_IMAGE_PIXELS} pixels).`,
      param,
    );
  }
}

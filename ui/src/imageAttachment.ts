import { h } from "./dom.ts";

/**
 * The image types the playground attaches: what the server decodes (llama.cpp's stb_image: PNG, JPEG,
 * GIF, BMP), with BMP's older `image/x-ms-bmp` spelling that some systems report.
 */
export const ATTACHABLE_IMAGE_TYPES: readonly string[] = [
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/bmp",
  "image/x-ms-bmp",
];

/** Whether a file of MIME type `type` (a `File.type`) can be attached. */
export function isAttachableImage(type: string): boolean {
  return ATTACHABLE_IMAGE_TYPES.includes(type.toLowerCase());
}

/** The composer's "Attach image" button, its hidden file picker and the thumbnails of the attached images. */
export type ImageAttachment = {
  /** The button and the thumbnails; hidden while images are not available. */
  element: HTMLElement;
  /** The attached images as `data:` URLs, in the order they were attached. */
  images(): string[];
  /** Removes every attached image. */
  clear(): void;
  /** Attaches `urls` again (after a failed send took them), each named "attached image". */
  restore(urls: readonly string[]): void;
  /** Shows the button for a model that takes images; hiding it also drops the attached images. */
  setAvailable(available: boolean): void;
};

/**
 * Builds the attachment control. `onChange` runs after an image is added or removed; `onError` gets a
 * sentence for a file that cannot be attached (another type, or unreadable).
 */
export function createImageAttachment(
  onChange: () => void,
  onError: (message: string) => void,
): ImageAttachment {
  const attached: { url: string; figure: HTMLElement }[] = [];
  const picker = h("input", {
    type: "file",
    name: "image",
    "aria-label": "Image file",
    accept: ATTACHABLE_IMAGE_TYPES.join(","),
    multiple: true,
    hidden: true,
  });
  const button = h("button", { type: "button", onclick: () => picker.click() }, "Attach image");
  const thumbnails = h("div", { class: "attachments", "aria-label": "Attached images" });
  const element = h("div", { class: "attach", hidden: true }, button, thumbnails, picker);

  picker.addEventListener("change", () => {
    const files = Array.from(picker.files ?? []);
    picker.value = ""; // picking the same file again fires change again
    for (const file of files) {
      if (!isAttachableImage(file.type)) {
        onError(`${file.name} is not a PNG, JPEG, GIF or BMP image.`);
        continue;
      }
      const reader = new FileReader();
      reader.addEventListener("load", () => add(String(reader.result), file.name));
      reader.addEventListener("error", () => onError(`${file.name} could not be read.`));
      reader.readAsDataURL(file);
    }
  });

  function add(url: string, name: string): void {
    const remove = h("button", { type: "button", class: "remove", "aria-label": `Remove ${name}` }, "×");
    const figure = h("figure", { class: "thumbnail" }, h("img", { src: url, alt: name }), remove);
    const entry = { url, figure };
    remove.addEventListener("click", () => {
      attached.splice(attached.indexOf(entry), 1);
      figure.remove();
      onChange();
    });
    attached.push(entry);
    thumbnails.append(figure);
    onChange();
  }

  function clear(): void {
    attached.length = 0;
    thumbnails.replaceChildren();
  }

  return {
    element,
    images: () => attached.map((entry) => entry.url),
    clear,
    restore(urls) {
      for (const url of urls) add(url, "attached image");
    },
    setAvailable(available) {
      element.hidden = !available;
      if (!available && attached.length > 0) {
        clear();
        onChange();
      }
    },
  };
}

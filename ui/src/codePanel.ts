import { apiKey } from "./apiKey.ts";
import { codeSnippet, SNIPPET_KINDS, type SnippetKind } from "./codeSnippets.ts";
import { field, h } from "./dom.ts";
import type { ApiRequest } from "./request.ts";

/** The "copy as code" panel: the request the playground would send now, as curl / OpenAI SDK / AI SDK code. */
export type CodePanel = { element: HTMLElement; refresh(): void };

/** Builds the panel; `current` returns the request to show (or an error message explaining why not). */
export function createCodePanel(current: () => ApiRequest | string): CodePanel {
  const kind = h(
    "select",
    { name: "code-kind" },
    ...Object.entries(SNIPPET_KINDS).map(([value, label]) => h("option", { value }, label)),
  );
  const code = h("code", {});
  const status = h("span", { class: "hint", role: "status" });
  const copy = h("button", { type: "button" }, "Copy as curl");
  const element = h(
    "details",
    { class: "code-panel" },
    h("summary", {}, "Code for this request"),
    h("div", { class: "row" }, field("Language", kind), copy, status),
    h("pre", {}, code),
  );
  const refresh = () => {
    copy.textContent = `Copy as ${SNIPPET_KINDS[kind.value as SnippetKind]}`;
    const request = current();
    code.textContent =
      typeof request === "string"
        ? request
        : codeSnippet(kind.value as SnippetKind, request, {
            origin: location.origin,
            withKey: apiKey() !== null,
          });
    status.textContent = "";
  };
  kind.addEventListener("change", refresh);
  element.addEventListener("toggle", refresh);
  copy.addEventListener("click", async () => {
    refresh();
    const text = code.textContent ?? "";
    try {
      await navigator.clipboard.writeText(text);
      status.textContent = "Copied.";
    } catch {
      // Without clipboard access (plain http on another host), select the code for Ctrl+C.
      element.open = true;
      getSelection()?.selectAllChildren(code);
      status.textContent = "Selected: press Ctrl+C to copy.";
    }
  });
  return { element, refresh };
}

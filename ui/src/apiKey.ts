import { h } from "./dom.ts";

/** sessionStorage key of the API key: kept for this tab only, never in localStorage or a cookie. */
const STORAGE_KEY = "lmserve.apiKey";

/** The API key entered in this tab, if any. */
export function apiKey(): string | null {
  return sessionStorage.getItem(STORAGE_KEY);
}

/** Stores (or, with `null`, forgets) the API key for this tab. */
export function setApiKey(key: string | null): void {
  if (key === null || key === "") sessionStorage.removeItem(STORAGE_KEY);
  else sessionStorage.setItem(STORAGE_KEY, key);
}

let pending: Promise<string | null> | undefined;

/**
 * Asks for the API key in a modal dialog (the server answered 401). Resolves with the key entered, or
 * `null` when the user cancels. Concurrent callers share one dialog.
 */
export function askForApiKey(message: string): Promise<string | null> {
  pending ??= new Promise<string | null>((resolve) => {
    const input = h("input", {
      type: "password",
      name: "api-key",
      autocomplete: "off",
      required: true,
      "aria-describedby": "api-key-reason",
    });
    const dialog = h(
      "dialog",
      { class: "key-dialog", "aria-labelledby": "api-key-title" },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "api-key-title" }, "API key required"),
        h("p", { id: "api-key-reason" }, message),
        h("label", { class: "field" }, h("span", { class: "caption" }, "API key"), input),
        h("p", { class: "hint" }, "Kept in this browser tab only (sessionStorage)."),
        h(
          "div",
          { class: "row" },
          h("button", { type: "submit", value: "save", class: "primary" }, "Use key"),
          h("button", { type: "submit", value: "cancel", formnovalidate: true }, "Cancel"),
        ),
      ),
    );
    dialog.addEventListener("close", () => {
      const key = dialog.returnValue === "save" ? input.value.trim() : "";
      dialog.remove();
      pending = undefined;
      if (key) setApiKey(key);
      resolve(key || null);
    });
    document.body.append(dialog);
    dialog.showModal();
    input.focus();
  });
  return pending;
}

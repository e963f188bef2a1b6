import { ApiRequestError, listModels, type ModelInfo, takesImages } from "./api.ts";
import { createCodePanel } from "./codePanel.ts";
import { loadConversation, saveConversation } from "./conversationStore.ts";
import { h, replaceChildren } from "./dom.ts";
import { createImageAttachment } from "./imageAttachment.ts";
import { installTokenTooltip, logprobLegend } from "./logprobs.ts";
import { replyView } from "./replyView.ts";
import { type ApiRequest, buildRequest, type ChatMessage, userContent } from "./request.ts";
import { runStream } from "./runStream.ts";
import { createSettingsForm } from "./settingsForm.ts";
import { checkStructured, SettingsError } from "./structured.ts";

/** The playground page: settings, conversation or completion output, composer, code panel. */
export type Playground = { element: HTMLElement; loadModels(): Promise<void> };

/** Builds the playground. */
export function createPlayground(): Playground {
  const conversation: ChatMessage[] = [];
  let models: ModelInfo[] = [];
  let controller: AbortController | null = null;

  const settings = createSettingsForm(() => {
    applyMode();
    codePanel.refresh();
  });
  const transcript = h("div", { class: "transcript", "aria-label": "Conversation" }, emptyHint());
  const output = h("div", { class: "transcript", "aria-label": "Completion output", hidden: true });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const input = h("textarea", { name: "input", rows: 4, placeholder: "Say something…" });
  const inputCaption = h("span", { class: "caption" }, "Message");
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const stop = h("button", { type: "button", disabled: true, onclick: () => controller?.abort() }, "Stop");
  const clear = h("button", { type: "button", onclick: () => clearAll() }, "Clear");
  const status = h("span", { class: "hint", role: "status" });
  const legend = logprobLegend();
  const attachment = createImageAttachment(
    () => codePanel.refresh(),
    (message) => showError(new SettingsError(message)),
  );
  const composer = h(
    "form",
    { class: "composer", "aria-label": "Composer" },
    h("label", { class: "field" }, inputCaption, input),
    attachment.element,
    h("div", { class: "row" }, send, stop, clear, status),
  );
  const codePanel = createCodePanel(currentRequest);
  const element = h(
    "section",
    { class: "playground", "aria-labelledby": "playground-title" },
    h("h2", { id: "playground-title", class: "visually-hidden" }, "Playground"),
    h("aside", {}, settings.element),
    h("div", { class: "work" }, transcript, output, legend, alert, composer, codePanel.element),
  );
  installTokenTooltip(element);

  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    void generate();
  });
  input.addEventListener("keydown", (event) => {
    const chat = settings.mode() === "chat";
    if (
      event.key === "Enter" &&
      !event.isComposing &&
      (chat ? !event.shiftKey : event.ctrlKey || event.metaKey)
    ) {
      event.preventDefault();
      if (!controller) composer.requestSubmit();
    }
  });
  input.addEventListener("input", () => codePanel.refresh());

  function applyMode(): void {
    const chat = settings.mode() === "chat";
    transcript.hidden = !chat;
    output.hidden = chat;
    inputCaption.textContent = chat ? "Message" : "Prompt";
    input.placeholder = chat
      ? "Say something… (Enter sends, Shift+Enter for a new line)"
      : "Once upon a time (Ctrl+Enter generates)";
    send.textContent = chat ? "Send" : "Generate";
    attachment.setAvailable(chat && takesImages(models.find((info) => info.id === settings.modelId())));
    legend.hidden = !settings.element.querySelector<HTMLInputElement>('input[name="logprobs"]')?.checked;
  }

  /** The request Send would make now, or why there is none. */
  function currentRequest(): ApiRequest | string {
    try {
      const current = settings.read();
      const images = attachment.images();
      return current.mode === "chat"
        ? buildRequest(current, {
            messages: [
              ...conversation,
              ...(input.value.trim() || images.length > 0
                ? [{ role: "user" as const, content: userContent(input.value, images) }]
                : []),
            ],
          })
        : buildRequest(current, { prompt: input.value });
    } catch (error) {
      return `# ${(error as Error).message}`;
    }
  }

  async function generate(): Promise<void> {
    if (controller) return;
    showError(null);
    const text = input.value;
    const images = settings.mode() === "chat" ? attachment.images() : [];
    const current = (() => {
      try {
        const read = settings.read();
        if (!read.model) throw new SettingsError("Pick a model (none is served, or the list did not load).");
        if (read.mode === "chat" && text.trim() === "" && images.length === 0) {
          throw new SettingsError("Type a message first.");
        }
        return read;
      } catch (error) {
        showError(error);
        return null;
      }
    })();
    if (!current) return;
    const chat = current.mode === "chat";
    const userMessage: ChatMessage = { role: "user", content: userContent(text, images) };
    let request: ApiRequest;
    try {
      request = chat
        ? buildRequest(current, { messages: [...conversation, userMessage] })
        : buildRequest(current, { prompt: text });
    } catch (error) {
      showError(error);
      return;
    }

    const previousOutput = [...output.childNodes];
    const userView = chat ? replyView("user", text, images) : null;
    const reply = replyView(chat ? "assistant" : "completion");
    if (chat) {
      transcript.querySelector(".empty")?.remove();
      transcript.append(userView!.element, reply.element);
      input.value = "";
      attachment.clear();
    } else {
      reply.element.querySelector(".body")?.append(h("span", { class: "prompt" }, text));
      replaceChildren(output, reply.element);
    }
    controller = new AbortController();
    setBusy(true);
    try {
      const result = await runStream(request, controller.signal, (delta, tokens) => {
        reply.append(delta, current.logprobs ? tokens : []);
        reply.element.scrollIntoView({ block: "end" });
      });
      reply.finish(result, result.stopped ? null : checkStructured(current.structured, result.text));
      status.textContent = result.stopped ? "Stopped." : "Done.";
      if (chat) {
        conversation.push(userMessage, { role: "assistant", content: result.text });
        if (!saveConversation(conversation)) status.textContent += " (Too large to keep across a reload.)";
      }
    } catch (error) {
      userView?.element.remove();
      reply.element.remove();
      if (chat) {
        input.value = text;
        attachment.restore(images);
        if (conversation.length === 0) transcript.replaceChildren(emptyHint());
      } else {
        output.replaceChildren(...previousOutput);
      }
      showError(error);
      status.textContent = "";
    } finally {
      controller = null;
      setBusy(false);
      codePanel.refresh();
    }
  }

  function setBusy(busy: boolean): void {
    send.disabled = busy;
    clear.disabled = busy;
    stop.disabled = !busy;
    if (busy) status.textContent = "Generating…";
  }

  function clearAll(): void {
    conversation.length = 0;
    saveConversation(conversation);
    attachment.clear();
    transcript.replaceChildren(emptyHint());
    output.replaceChildren();
    status.textContent = "";
    showError(null);
    codePanel.refresh();
  }

  function showError(error: unknown): void {
    alert.hidden = error === null;
    if (error === null) alert.replaceChildren();
    else replaceChildren(alert, ...errorContent(error));
  }

  /** The conversation kept from before a reload (localStorage), shown again. */
  function restoreConversation(): void {
    const kept = loadConversation();
    if (kept.length === 0) return;
    conversation.push(...kept);
    transcript.replaceChildren(
      ...kept.map((message) => {
        const parts = typeof message.content === "string" ? [] : message.content;
        const text =
          typeof message.content === "string"
            ? message.content
            : parts.map((part) => (part.type === "text" ? part.text : "")).join("");
        const images = parts.flatMap((part) => (part.type === "image_url" ? [part.image_url.url] : []));
        return replyView(message.role, text, images).element;
      }),
    );
  }

  restoreConversation();
  applyMode();
  return {
    element,
    loadModels: async () => {
      try {
        models = await listModels();
        settings.setModels(models);
        applyMode();
        codePanel.refresh();
      } catch (error) {
        showError(error);
      }
    },
  };
}

function emptyHint(): HTMLElement {
  return h(
    "p",
    { class: "empty" },
    "Pick a model, type a message and press Send. Replies stream in with their timing and token counts.",
  );
}

/** A readable explanation of a failed request. */
function errorContent(error: unknown): (HTMLElement | string)[] {
  if (error instanceof SettingsError) return [h("strong", {}, "Check the settings. "), error.message];
  if (error instanceof ApiRequestError) {
    const unsupported = /not (yet )?supported|not yet honoured|not implemented/i.test(error.message);
    const title =
      error.status === 0
        ? "Network error."
        : unsupported
          ? `Not supported by this server yet (HTTP ${error.status}).`
          : `The server refused the request (HTTP ${error.status}).`;
    return [
      h("strong", {}, title),
      h("p", {}, error.message),
      error.param ? h("p", { class: "hint" }, "Field: ", h("code", {}, error.param)) : "",
      unsupported ? h("p", { class: "hint" }, "Turn that option off and send again.") : "",
      error.status === 401 ? h("p", { class: "hint" }, "Reload the page to enter the API key again.") : "",
    ];
  }
  const message = error instanceof Error ? error.message : String(error);
  return [h("strong", {}, "Request failed. "), message];
}

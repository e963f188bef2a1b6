import type { ModelInfo } from "./api.ts";
import { field, h } from "./dom.ts";
import { type Mode, parseStopLines, type Settings } from "./request.ts";
import { SettingsError, STRUCTURED_EXAMPLES, type StructuredKind } from "./structured.ts";

/** The playground's settings panel: model, mode, system prompt, sampling, structured output, logprobs. */
export type SettingsForm = {
  element: HTMLElement;
  /**
   * The current settings.
   * @throws SettingsError when a number field holds something that is not a number.
   */
  read(): Settings;
  mode(): Mode;
  /** The id of the selected model ("" while none is). */
  modelId(): string;
  /** Fills the model list (keeps the selection when the model is still served). */
  setModels(models: ModelInfo[]): void;
};

type NumberSpec = {
  name: keyof Settings;
  label: string;
  step: string;
  min?: string;
  max?: string;
  value?: string;
  hint: string;
};

const NUMBER_FIELDS: NumberSpec[] = [
  {
    name: "temperature",
    label: "Temperature",
    step: "0.05",
    min: "0",
    max: "2",
    value: "0.8",
    hint: "0 = greedy",
  },
  { name: "topP", label: "Top p", step: "0.05", min: "0", max: "1", hint: "empty = 1" },
  { name: "topK", label: "Top k", step: "1", min: "-1", hint: "empty or -1 = off" },
  { name: "minP", label: "Min p", step: "0.01", min: "0", max: "1", hint: "empty = 0" },
  {
    name: "maxTokens",
    label: "Max tokens",
    step: "1",
    min: "1",
    value: "256",
    hint: "empty = server default",
  },
  { name: "seed", label: "Seed", step: "1", hint: "empty = random" },
];

/** Builds the settings panel; `onChange` runs after any edit. */
export function createSettingsForm(onChange: () => void): SettingsForm {
  const model = h("select", { name: "model", required: true }, h("option", { value: "" }, "loading…"));
  const modeInputs = (["chat", "completion"] as const).map((mode) =>
    h("input", { type: "radio", name: "mode", value: mode, checked: mode === "chat" }),
  );
  const system = h("textarea", { name: "system", rows: 3, placeholder: "You are a helpful assistant." });
  const systemField = field("System prompt", system);
  const numbers = new Map<keyof Settings, HTMLInputElement>();
  for (const spec of NUMBER_FIELDS) {
    numbers.set(
      spec.name,
      h("input", {
        type: "number",
        name: spec.name,
        step: spec.step,
        min: spec.min,
        max: spec.max,
        value: spec.value,
        inputmode: "decimal",
      }),
    );
  }
  const stop = h("textarea", { name: "stop", rows: 2, placeholder: "one per line; \\n for a newline" });
  const structuredKind = h(
    "select",
    { name: "structured-kind" },
    h("option", { value: "none" }, "None"),
    h("option", { value: "json_schema" }, "JSON schema"),
    h("option", { value: "regex" }, "Regex"),
    h("option", { value: "choice" }, "Choices"),
  );
  const structuredText = h("textarea", {
    name: "structured-spec",
    rows: 8,
    spellcheck: false,
    class: "mono",
  });
  const structuredField = field("Schema", structuredText);
  const logprobs = h("input", { type: "checkbox", name: "logprobs" });

  const update = () => {
    const kind = structuredKind.value as StructuredKind;
    structuredField.hidden = kind === "none";
    const caption = structuredField.querySelector(".caption");
    if (caption)
      caption.textContent = {
        none: "",
        json_schema: "JSON schema",
        regex: "Regex (whole reply)",
        choice: "Choices (one per line)",
      }[kind];
    if (kind !== "none" && structuredText.value.trim() === "")
      structuredText.value = STRUCTURED_EXAMPLES[kind];
    systemField.hidden = mode() === "completion";
  };
  structuredKind.addEventListener("change", () => {
    structuredText.value = "";
    update();
  });

  const mode = (): Mode => (modeInputs.find((input) => input.checked)?.value as Mode | undefined) ?? "chat";
  const numberField = (spec: NumberSpec) => field(spec.label, numbers.get(spec.name)!, spec.hint);

  const element = h(
    "form",
    { class: "settings", "aria-label": "Playground settings", onsubmit: (event) => event.preventDefault() },
    field("Model", model),
    h(
      "fieldset",
      { class: "mode" },
      h("legend", {}, "Mode"),
      ...modeInputs.map((input) =>
        h("label", { class: "inline" }, input, input.value === "chat" ? "Chat" : "Completion"),
      ),
    ),
    systemField,
    h(
      "fieldset",
      {},
      h("legend", {}, "Sampling"),
      h("div", { class: "grid2" }, ...NUMBER_FIELDS.map(numberField)),
      field("Stop sequences", stop),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Structured output"),
      field("Constrain the reply to", structuredKind),
      structuredField,
    ),
    h("label", { class: "inline" }, logprobs, "Show logprobs"),
  );
  element.addEventListener("input", onChange);
  element.addEventListener("change", () => {
    update();
    onChange();
  });
  update();

  const readNumber = (name: keyof Settings, label: string): number | undefined => {
    const text = numbers.get(name)?.value.trim() ?? "";
    if (text === "") return undefined;
    const value = Number(text);
    if (!Number.isFinite(value)) throw new SettingsError(`${label} must be a number.`);
    return value;
  };
  const label = (name: keyof Settings) => NUMBER_FIELDS.find((spec) => spec.name === name)?.label ?? name;
  const num = (name: keyof Settings) => readNumber(name, label(name));

  return {
    element,
    mode,
    modelId: () => model.value,
    read: () => {
      const settings: Settings = {
        mode: mode(),
        model: model.value,
        systemPrompt: system.value,
        stop: parseStopLines(stop.value),
        structured: { kind: structuredKind.value as StructuredKind, text: structuredText.value },
        logprobs: logprobs.checked,
      };
      const values = {
        temperature: num("temperature"),
        topP: num("topP"),
        topK: num("topK"),
        minP: num("minP"),
        maxTokens: num("maxTokens"),
        seed: num("seed"),
      };
      for (const [name, value] of Object.entries(values))
        if (value !== undefined) Object.assign(settings, { [name]: value });
      return settings;
    },
    setModels: (models) => {
      const selected = model.value;
      model.replaceChildren(
        ...(models.length === 0
          ? [h("option", { value: "" }, "no models")]
          : models.map((info) => h("option", { value: info.id }, modelLabel(info)))),
      );
      if (models.some((info) => info.id === selected)) model.value = selected;
      // First visit: a loaded model rather than the list's first (which may have failed to load).
      else {
        const loaded = models.find((info) => info.status === undefined || info.status.value === "loaded");
        if (loaded) model.value = loaded.id;
      }
    },
  };
}

/**
 * A model's entry in the model picker: its id, and its state when it is not loaded (an unloaded model
 * loads on its first request, with `--models-autoload`).
 */
function modelLabel(info: ModelInfo): string {
  const state = info.status?.value;
  if (state === undefined || state === "loaded") return info.id;
  return state === "unloaded" ? `${info.id} (unloaded: loads on first use)` : `${info.id} (${state})`;
}

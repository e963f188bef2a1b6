import type { ModelInfo } from "./api.ts";
import { h } from "./dom.ts";

/**
 * One model's residency as the dashboard shows it, from its `GET /v1/models` entry (`status`:
 * llama-server's router `value`, and lmserve's `memory_bytes`, `in_flight`, `expires_at`, `reason`).
 * Every field is display text; `–` where the server says nothing.
 */
export type ResidencyRow = {
  id: string;
  /** `loaded`, `loading`, `unloaded`, `failed` (with the reason), or `–` for a server without residency. */
  state: string;
  /** The bytes a loaded model holds (weights + KV cache + projector), e.g. `1.2 GiB`. */
  memory: string;
  /** Requests holding the model now. */
  inFlight: string;
  /** When an idle model unloads: `never`, `in 4 min 10 s`, `now`, or `–` while not loaded. */
  expires: string;
  /** The base model of a LoRA adapter, else undefined. */
  parent: string | undefined;
};

/** Byte sizes in binary units, as the startup log writes them: `512 B`, `3.4 MiB`, `1.20 GiB`. */
export function formatBytes(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes) || bytes < 0) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

/**
 * When a model unloads, relative to `nowMs` (milliseconds since the epoch): `expiresAt` is the ISO time
 * of `status.expires_at`, `null` for a model kept loaded, undefined when not loaded.
 */
export function formatExpiry(expiresAt: string | null | undefined, nowMs: number): string {
  if (expiresAt === undefined) return "–";
  if (expiresAt === null) return "never";
  const at = Date.parse(expiresAt);
  if (!Number.isFinite(at)) return "–";
  const seconds = Math.round((at - nowMs) / 1000);
  if (seconds <= 0) return "now";
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const rest = seconds % 60;
  if (hours > 0) return `in ${hours} h ${minutes} min`;
  return minutes > 0 ? `in ${minutes} min ${rest} s` : `in ${rest} s`;
}

/** The dashboard's rows for the models of `GET /v1/models`, in the server's order. */
export function residencyRows(models: ModelInfo[], nowMs: number): ResidencyRow[] {
  return models.map((model) => {
    const status = model.status;
    const state =
      status === undefined
        ? "–"
        : status.value === "failed" && status.reason
          ? `failed: ${status.reason}`
          : status.value;
    return {
      id: model.id,
      state,
      memory: formatBytes(status?.memory_bytes),
      inFlight: status?.in_flight === undefined ? "–" : String(status.in_flight),
      expires: formatExpiry(status?.expires_at, nowMs),
      parent: model.parent ?? undefined,
    };
  });
}

/** The dashboard's "Models" table: which models are loaded, their memory and when they expire. */
export function residencyTable(rows: ResidencyRow[]): HTMLElement {
  return h(
    "section",
    { class: "model-residency", "aria-labelledby": "residency-title" },
    h("h3", { id: "residency-title" }, "Models"),
    h(
      "table",
      {},
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["Model", "State", "Memory", "In flight", "Unloads"].map((label) => h("th", {}, label)),
        ),
      ),
      h(
        "tbody",
        {},
        ...rows.map((row) =>
          h(
            "tr",
            { "data-model-row": row.id },
            h(
              "td",
              { class: "model-id" },
              row.id,
              ...(row.parent ? [h("span", { class: "hint" }, ` adapter of ${row.parent}`)] : []),
            ),
            h("td", { "data-field": "state", "data-state": row.state.split(":")[0] ?? "" }, row.state),
            h("td", { "data-field": "memory" }, row.memory),
            h("td", { "data-field": "in-flight" }, row.inFlight),
            h("td", { "data-field": "expires" }, row.expires),
          ),
        ),
      ),
    ),
  );
}

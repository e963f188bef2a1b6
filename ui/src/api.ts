import { apiKey, askForApiKey, setApiKey } from "./apiKey.ts";

/** An error answer of the server (its OpenAI-style body), or a network failure (status 0). */
export class ApiRequestError extends Error {
  readonly status: number;
  /** The request field the error is about, when the server named one. */
  readonly param: string | null;
  readonly code: string | null;

  constructor(status: number, message: string, param: string | null = null, code: string | null = null) {
    super(message);
    this.name = "ApiRequestError";
    this.status = status;
    this.param = param;
    this.code = code;
  }
}

/** Reads an OpenAI-style error body (`{error: {message, param, code}}`) into an {@link ApiRequestError}. */
export function errorFromBody(status: number, body: unknown): ApiRequestError {
  const outer = (body ?? {}) as { error?: unknown; message?: unknown };
  const inner = (typeof outer.error === "object" && outer.error !== null ? outer.error : outer) as {
    message?: unknown;
    param?: unknown;
    code?: unknown;
  };
  const message =
    typeof inner.message === "string"
      ? inner.message
      : typeof outer.error === "string"
        ? outer.error
        : `HTTP ${status}`;
  return new ApiRequestError(
    status,
    message,
    typeof inner.param === "string" ? inner.param : null,
    typeof inner.code === "string" ? inner.code : null,
  );
}

/**
 * `fetch` against this server with the API key of this tab. On a 401 it asks for the key and retries
 * (until the user cancels). Other error statuses are returned as they are; network failures throw.
 */
export async function apiFetch(path: string, init: RequestInit = {}): Promise<Response> {
  for (;;) {
    const headers = new Headers(init.headers);
    const key = apiKey();
    if (key) headers.set("authorization", `Bearer ${key}`);
    const response = await fetch(path, { ...init, headers });
    if (response.status !== 401) return response;
    const error = errorFromBody(401, await response.json().catch(() => null));
    if (key) setApiKey(null);
    const entered = await askForApiKey(
      key ? `The server refused the key: ${error.message}` : "This server needs an API key (--api-key).",
    );
    if (entered === null) throw error;
  }
}

/** POSTs JSON; throws an {@link ApiRequestError} for an error status. */
export async function postJson(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  const response = await apiFetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
  if (!response.ok) throw errorFromBody(response.status, await response.json().catch(() => null));
  return response;
}

/**
 * One entry of `GET /v1/models`; `capabilities.vision` marks a model served with a projector
 * (`--mmproj`); `status` is its residency (absent on servers without one); `parent` the base model of
 * a LoRA adapter.
 */
export type ModelInfo = {
  id: string;
  max_model_len?: number;
  capabilities?: { vision?: boolean };
  parent?: string | null;
  status?: {
    value: string;
    reason?: string;
    memory_bytes?: number;
    in_flight?: number;
    expires_at?: string | null;
  };
};

/** Whether `model` takes images (`image_url` content parts): its entry says `capabilities.vision: true`. */
export function takesImages(model: ModelInfo | undefined): boolean {
  return model?.capabilities?.vision === true;
}

/** The served models (`GET /v1/models`). */
export async function listModels(): Promise<ModelInfo[]> {
  const response = await apiFetch("v1/models");
  if (!response.ok) throw errorFromBody(response.status, await response.json().catch(() => null));
  const list = (await response.json()) as { data?: ModelInfo[] };
  return list.data ?? [];
}

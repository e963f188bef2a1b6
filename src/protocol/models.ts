/**
 * GET /v1/models and /v1/models/{id}: OpenAI's model object, plus vLLM's `max_model_len`, and the
 * residency `status` of a model served at run time (llama-server's router, Ollama's `expires_at`).
 */

import { z } from "zod";

/** `POST /models/load` and `POST /models/unload` (llama-server's router): the model's served name. */
export const ModelRequestSchema = z.object({ model: z.string().min(1) });

/** The body of `POST /models/load` / `POST /models/unload`. */
export type ModelRequest = z.infer<typeof ModelRequestSchema>;

/** Where a servable model stands: `unloading` while its last requests finish before it is freed. */
export type ModelState = "loaded" | "loading" | "unloading" | "unloaded" | "failed";

/** A model's residency (llama-server's router `status`, with lmserve's fields). */
export type ModelStatus = {
  value: ModelState;
  /** Why its last load failed (`failed` only). */
  reason?: string;
  /** Bytes it holds (weights + KV cache + projector, measured at load); loaded models loaded at run time. */
  memory_bytes?: number;
  /** Requests holding it now (loaded models). */
  in_flight?: number;
  /**
   * When it unloads if no request comes (ISO 8601, Ollama's `expires_at`); null: not scheduled (in use,
   * or kept loaded). Loaded models only.
   */
  expires_at?: string | null;
};

/** OpenAI's model object with vLLM's extra fields. */
export type ModelObject = {
  id: string;
  object: "model";
  /** Unix seconds the model was loaded; 0 while not loaded. */
  created: number;
  owned_by: string;
  root: string;
  parent: string | null;
  /** The context length (vLLM's); absent while the model is not loaded. */
  max_model_len?: number;
  /**
   * What the model serves and takes: `vision` when it has a projector (`--mmproj`); its `task`
   * (`--task`, else read from the GGUF); `pooling`, how its prompts' hidden states are pooled for
   * `/v1/embeddings` and rerank (`--pooling`, else the GGUF's `pooling_type`, else mean). lmserve's
   * extension; absent while the model is not loaded.
   */
  capabilities?: {
    vision: boolean;
    task: "generate" | "embed" | "rerank";
    pooling: "mean" | "cls" | "last" | "rank";
  };
  /** Its GGUF file (models served from `--models-dir`, the download cache, or loaded at run time). */
  path?: string;
  /** Its residency. */
  status?: ModelStatus;
};

/** The model list (`object: "list"`). */
export type ModelList = { object: "list"; data: ModelObject[] };

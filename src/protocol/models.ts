/** GET /v1/models and /v1/models/{id}: OpenAI's model object, plus vLLM's `max_model_len`. */

/** OpenAI's model object with vLLM's extra fields. */
export type ModelObject = {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
  root: string;
  parent: string | null;
  max_model_len: number;
  /** What the model takes besides text: `vision` when it has a projector (`--mmproj`). lmserve's extension. */
  capabilities: { vision: boolean; task: "generate" | "embed" | "rerank" };
};

/** The model list (`object: "list"`). */
export type ModelList = { object: "list"; data: ModelObject[] };

/**
 * vLLM's run-time LoRA routes: `POST /v1/load_lora_adapter` and `POST /v1/unload_lora_adapter` (vLLM
 * `entrypoints/openai/protocol.py`: LoadLoRAAdapterRequest, UnloadLoRAAdapterRequest). Field names as
 * vLLM's; an empty or missing name or path is vLLM's 400, checked by the route, not here.
 */
import { z } from "zod";

/** The body of `POST /v1/load_lora_adapter`. */
export const LoadLoraAdapterRequestSchema = z.object({
  lora_name: z.string().nullish(),
  /** The adapter GGUF on the server's file system. */
  lora_path: z.string().nullish(),
  /** vLLM's: replace an adapter of the same name in place. Accepted; lmserve refuses a loaded name (400). */
  load_inplace: z.boolean().nullish(),
  // lmserve's extension: the model to load it onto. Defaults to the first served model.
  base_model_name: z.string().nullish(),
});

/** The body of `POST /v1/load_lora_adapter`. */
export type LoadLoraAdapterRequest = z.infer<typeof LoadLoraAdapterRequestSchema>;

/** The body of `POST /v1/unload_lora_adapter` (vLLM's `lora_int_id` is accepted and ignored). */
export const UnloadLoraAdapterRequestSchema = z.object({
  lora_name: z.string().nullish(),
  lora_int_id: z.number().int().nullish(),
});

/** The body of `POST /v1/unload_lora_adapter`. */
export type UnloadLoraAdapterRequest = z.infer<typeof UnloadLoraAdapterRequestSchema>;

import type { NativeLora } from "./native.ts";

/**
 * A LoRA adapter loaded for one model (llama.cpp's `llama_adapter_lora_init`), served under its own name
 * (vLLM's `--lora-modules name=path`, llama-server's `--lora`): a request whose `model` is `name` runs on
 * the base model with the adapter applied at `scale`.
 */
export type LoraAdapter = {
  /** Process-unique id: distinguishes an adapter from a later one loaded under the same name (cache domains). */
  readonly id: number;
  /** The served name (`model` of requests, `id` in `/v1/models`). */
  readonly name: string;
  /** The adapter's GGUF file, as given. */
  readonly path: string;
  /** The user scale (llama.cpp's `--lora-scaled`); the effective factor is scale * alpha / rank. Defaults to 1. */
  readonly scale: number;
  /** The native adapter. */
  readonly native: NativeLora;
};

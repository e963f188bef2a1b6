/** The KV cache types and flash-attention modes of a context (llama-server's `-ctk` / `-ctv` / `-fa`). */
/**
 * The KV cache types a context takes, as llama-server's `--cache-type-k` / `--cache-type-v`
 * (llama.cpp's common/arg.cpp `kv_cache_types`); the block types (q*, iq4_nl) need the model's head size
 * to be a multiple of 32, and a block-type V cache needs flash attention.
 */
export const KV_CACHE_TYPES = [
  "f32",
  "f16",
  "bf16",
  "q8_0",
  "q4_0",
  "q4_1",
  "iq4_nl",
  "q5_0",
  "q5_1",
] as const;

/** One of {@link KV_CACHE_TYPES}. */
export type KvCacheType = (typeof KV_CACHE_TYPES)[number];

/** Flash attention: `auto` lets llama.cpp use it where the device supports it (llama-server's `--flash-attn`). */
export type FlashAttn = "auto" | "on" | "off";

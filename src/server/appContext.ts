import type { ImageLimits } from "../serving/images/chatImages.ts";
import type { ModelRegistry } from "../serving/ModelRegistry.ts";
import type { SeedSource } from "../serving/request/generationParams.ts";
import type { PrefixCacheScope } from "./cacheDomain.ts";
import type { ServerMetrics } from "./metrics.ts";

/** What the HTTP layer needs from the rest of the server. */
export type AppContext = {
  /** The served models by name. */
  registry: ModelRegistry;
  /** The seed policy (`--seed`, `--batch-invariant-seeds`). */
  seeds: SeedSource;
  /** `--max-tokens-cap`: also the most a request that omits `max_tokens` generates. */
  maxTokensCap?: number | undefined;
  /**
   * The most a chat or Responses request that omits `max_tokens` / `max_output_tokens` generates when no
   * `--max-tokens-cap` is set (an explicit value is not bounded by it). Undefined: until the context ends.
   */
  defaultMaxTokens?: number | undefined;
  /** Image limits (`--max-image-bytes`, `--allow-private-image-urls`). Defaults to 20 MB, public URLs only. */
  imageLimits?: ImageLimits;
  /** Prometheus metrics served at GET /metrics, and their sampled history at GET /metrics/history (absent: neither route). */
  metrics?: ServerMetrics;
  /** `--prefix-cache-scope`: the isolation domain of requests without a `cache_salt`. Defaults to `key`. */
  prefixCacheScope?: PrefixCacheScope;
  /** True once every model is loaded (readiness). */
  isReady(): boolean;
};

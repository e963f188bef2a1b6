/**
 * Prefix-cache isolation (vLLM's `cache_salt`, RFC vllm-project/vllm#16016, the fix of CVE-2025-46570):
 * a request's time to first token and its `cached_tokens` tell whether another request recently sent
 * the same prompt prefix, so cached cells are reused only within one isolation domain.
 */
import { createHash } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { authenticatedKey } from "./auth.ts";

/**
 * The default isolation domain of requests without a `cache_salt` (`--prefix-cache-scope`): `key`
 * (one domain per API key; without keys, one shared domain) or `global` (one shared domain, as
 * llama-server and vLLM without salts). Defaults to `key`.
 */
export type PrefixCacheScope = "key" | "global";

/**
 * The isolation domain of a request, an opaque string the scheduler compares: the request's
 * `cache_salt` when it gives one (requests with the same salt share their cache whatever their key,
 * as vLLM's salted block hashes); else, with `scope` `key`, the API key it authenticated with
 * (`auth.ts`); else "" (the shared domain: `global`, or authentication off). Salts and keys are
 * hashed (SHA-256), so no secret is kept with the slots, and tagged so a salt never equals a key.
 */
export function cacheDomain(
  request: FastifyRequest,
  cacheSalt: string | null | undefined,
  scope: PrefixCacheScope = "key",
): string {
  if (cacheSalt !== undefined && cacheSalt !== null) return `salt:${digest(cacheSalt)}`;
  if (scope === "global") return "";
  const key = authenticatedKey(request);
  return key === undefined ? "" : `key:${digest(key)}`;
}

function digest(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

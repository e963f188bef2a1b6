/**
 * Request fields that other OpenAI-compatible servers give a meaning to and that this server cannot
 * honour. They are declared (as `unknown`) so that they reach the serving layer instead of being
 * dropped as unknown fields; `serving/request/peerFields.ts` refuses each one with a 400 unless it holds its
 * no-op value. Sources: OpenAI's deprecated function calling and audio output, llama-server's
 * samplers and `n_predict`, vLLM's sampling extensions.
 */
import { z } from "zod";

/** The names of the refused peer fields, in the order of the README's field table. */
export const PEER_FIELD_NAMES = [
  // --- OpenAI (deprecated function calling, audio output) ---
  "functions",
  "function_call",
  "modalities",
  "audio",
  // --- llama-server ---
  "n_predict",
  "typical_p",
  "mirostat",
  "dry_multiplier",
  "xtc_probability",
  // --- vLLM ---
  "allowed_token_ids",
  "bad_words",
  "logits_processors",
  "use_beam_search",
  "truncate_prompt_tokens",
  "skip_special_tokens",
] as const;

/** One refused peer field's name. */
export type PeerFieldName = (typeof PEER_FIELD_NAMES)[number];

/** The peer fields as schema entries of any type (checked by `serving/request/peerFields.ts`). */
export const PeerFieldsSchema = Object.fromEntries(
  PEER_FIELD_NAMES.map((name) => [name, z.unknown().optional()]),
) as Record<PeerFieldName, z.ZodOptional<z.ZodUnknown>>;

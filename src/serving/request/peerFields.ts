/**
 * Refuses the request fields other servers define and this server cannot honour
 * (`protocol/peerFields.ts`), so that no request is silently served differently from what it asked.
 * A field holding its no-op value (e.g. `typical_p: 1`, `skip_special_tokens: true`) passes.
 */
import { badRequest } from "../../errors.ts";
import { PEER_FIELD_NAMES, type PeerFieldName } from "../../protocol/peerFields.ts";

type PeerField = {
  /** Who defines it. */
  source: string;
  /** True when the value changes nothing (absent and null always pass). */
  noop: (value: unknown) => boolean;
  /** What to send instead (the end of the 400's message). */
  instead: string;
};

const never = () => false;
const equals = (expected: unknown) => (value: unknown) => value === expected;
const emptyList = (value: unknown) => Array.isArray(value) && value.length === 0;

/** Each refused field: its source, its no-op value and the alternative. */
export const PEER_FIELDS: Readonly<Record<PeerFieldName, PeerField>> = {
  functions: { source: "OpenAI (deprecated)", noop: emptyList, instead: "send them as `tools`" },
  function_call: { source: "OpenAI (deprecated)", noop: never, instead: "use `tool_choice`" },
  modalities: {
    source: "OpenAI",
    noop: (value) => Array.isArray(value) && value.every((item) => item === "text"),
    instead: 'this server generates text only (`["text"]` is accepted)',
  },
  audio: { source: "OpenAI", noop: never, instead: "this server generates text only" },
  n_predict: { source: "llama-server", noop: never, instead: "use `max_tokens`" },
  typical_p: { source: "llama-server", noop: equals(1), instead: "use `top_p` or `min_p` (1 is accepted)" },
  mirostat: { source: "llama-server", noop: equals(0), instead: "use `temperature`/`top_p` (0 is accepted)" },
  dry_multiplier: {
    source: "llama-server",
    noop: equals(0),
    instead: "use `repetition_penalty` (0 is accepted)",
  },
  xtc_probability: { source: "llama-server", noop: equals(0), instead: "0 is accepted" },
  allowed_token_ids: {
    source: "vLLM",
    noop: never,
    instead: "use `logit_bias` or `guided_choice`/`guided_regex`",
  },
  bad_words: { source: "vLLM", noop: emptyList, instead: "use `logit_bias`" },
  logits_processors: { source: "vLLM", noop: emptyList, instead: "no custom logits processors run here" },
  use_beam_search: { source: "vLLM", noop: equals(false), instead: "use `best_of` on /v1/completions" },
  truncate_prompt_tokens: { source: "vLLM", noop: never, instead: "shorten the prompt" },
  skip_special_tokens: {
    source: "vLLM",
    noop: equals(true),
    instead: "special tokens are always skipped in the output text (true is accepted)",
  },
};

/**
 * Refuses every peer field that holds something other than its no-op value.
 * @throws ApiError 400 `unsupported_field` naming the field, its source and what to send instead.
 */
export function refusePeerFields(body: Readonly<Partial<Record<PeerFieldName, unknown>>>): void {
  for (const name of PEER_FIELD_NAMES) {
    const value = body[name];
    if (value === undefined || value === null) continue;
    const field = PEER_FIELDS[name];
    if (field.noop(value)) continue;
    throw badRequest(
      `The field '${name}' (${field.source}) is not supported by this server: ${field.instead}.`,
      name,
      "unsupported_field",
    );
  }
}

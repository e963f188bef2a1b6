/**
 * The step planner: which tokens of which sequences go into the next `llama_decode` batch, as a pure
 * function of the running set and the step's token budget (vLLM's `--max-num-batched-tokens` with
 * chunked prefill). The Scheduler turns its result into KV bookkeeping; nothing here touches a slot.
 */
import { type NativeStepInput, OutputKind } from "./native.ts";
import type { Pooling } from "./types.ts";

/**
 * Tokens one engine step evaluates at most when `--max-num-batched-tokens` is not given (decodes plus
 * prompt chunks; see docs/ARCHITECTURE.md, "The step budget"): 2048 on the CPU and on a GPU, vLLM's
 * default for online serving and llama-server's `n_batch`. On the CPU a smaller budget keeps streams
 * steadier while long prompts arrive (a 2,048-token step of a 0.5B model is ~8 s on 2 threads, 256
 * tokens ~1 s), but on `bench:peer`'s serve workload (1,024-token prompts, all queued at once) 2048 gave
 * the better TPOT, TTFT and total throughput at concurrency 4 and 8 (TPOT 100 / 231 ms against 160–170 /
 * 328–351 ms at 256): fewer steps mix a prompt chunk into the decodes, so fewer streams decode while
 * other prompts are prefilled.
 */
export const DEFAULT_MAX_NUM_BATCHED_TOKENS = { cpu: 2048, gpu: 2048 } as const;

/** Prompt tokens per step for a sequence whose every prompt row is an output (`prompt_logprobs`, mean-pooled embeddings). */
export const SCORED_CHUNK_TOKENS = 64;

/** A decoding sequence: its pending tokens (the sampled one, or a jump-forward run) go in, its last row is sampled. */
export type DecodeCandidate<Key> = {
  kind: "decode";
  /** Handed back in the plan's outputs and takes. */
  key: Key;
  /** The llama.cpp sequence id. */
  seq: number;
  /** The position of the sequence's next KV cell. */
  position: number;
  /** Tokens waiting to be evaluated, in order (at least one for the sequence to run). */
  pending: readonly number[];
  /** Top logprobs of the sampled token; -1 for none. */
  topN: number;
};

/** A prefilling sequence: the next chunk of its prompt goes in. */
export type PrefillCandidate<Key> = {
  kind: "prefill";
  key: Key;
  seq: number;
  /** The position of the sequence's next KV cell. */
  position: number;
  /** The whole prompt. */
  prompt: readonly number[];
  /** Prompt tokens already in the KV cache (reused or evaluated). */
  from: number;
  /** Where the next image of the prompt at or after `from` starts (images are evaluated on their own); absent: none. */
  imageStart?: number;
  /** `prompt_logprobs`: each prompt row is scored against the next prompt token with this many top entries; null: not. */
  promptTopN: number | null;
  /** An embedding request's pooling: its rows' hidden states are outputs and nothing is sampled; absent: generation. */
  embed?: Pooling;
  /** Top logprobs of the token sampled after the prompt; -1 for none. */
  topN: number;
};

/** One sequence of the running set, as the planner sees it. */
export type StepCandidate<Key> = DecodeCandidate<Key> | PrefillCandidate<Key>;

/** What one output row of a planned step is for. */
export type PlannedOutput<Key> =
  | { kind: "sample"; key: Key }
  | { kind: "prompt"; key: Key; topN: number }
  | { kind: "embed"; key: Key; position: number };

/** How many tokens a candidate put into the step (decode: pending tokens taken; prefill: prompt tokens from `from`). */
export type PlannedTake<Key> = { key: Key; kind: "decode" | "prefill"; tokens: number };

/** A planned step: the native batch, what each output row is for, and what each candidate put in. */
export type StepPlan<Key> = {
  input: NativeStepInput;
  outputs: PlannedOutput<Key>[];
  /** One entry per candidate that put at least one token in, in batch order. */
  takes: PlannedTake<Key>[];
};

/**
 * Plans one step over `candidates` (decoding ones in any order; prefilling ones in arrival order, the
 * order they are served in) within `budget` tokens:
 *
 * 1. Decodes first, by sequence id: every decoding sequence puts in its first pending token, always (a
 *    decode never waits for a prompt). A longer pending run (jump-forward) takes more while the budget
 *    lasts, leaving one token for the prompts when any waits.
 * 2. Then prompt chunks, oldest first (first come, first served, as vLLM's scheduler): each prefilling
 *    sequence takes what is left of the budget, at most {@link SCORED_CHUNK_TOKENS} when its every row
 *    is an output, ending before its next image; the rest goes to the next prompt.
 *
 * Guarantees: with `budget` > the number of decoding sequences (the Scheduler has `budget` >= slots, and
 * a slot that prefills does not decode), the batch holds at most `budget` tokens and the oldest
 * prefilling sequence whose next token is not an image puts in at least one token, so neither decodes nor
 * prompts starve. With a smaller budget, decodes still all run and the oldest prompt still gets one
 * token (the batch then exceeds the budget).
 *
 * A sequence's last row is sampled when its pending tokens are all in, or its prompt ends in this step
 * (not for embeddings); with prompt logprobs every prompt row but the last is also scored against the
 * next prompt token; with an embedding, its pooled rows (mean: all, cls: the first, last: the last) are
 * outputs.
 */
export function planStep<Key>(candidates: readonly StepCandidate<Key>[], budget: number): StepPlan<Key> {
  const tokens: number[] = [];
  const positions: number[] = [];
  const seqs: number[] = [];
  const outputRows: number[] = [];
  const kinds: number[] = [];
  const targets: number[] = [];
  const topN: number[] = [];
  const outputs: PlannedOutput<Key>[] = [];
  const takes: PlannedTake<Key>[] = [];
  const output = (kind: OutputKind, target: number, top: number, entry: PlannedOutput<Key>) => {
    outputRows.push(tokens.length - 1);
    kinds.push(kind);
    targets.push(target);
    topN.push(top);
    outputs.push(entry);
  };
  const decoding = candidates
    .filter((candidate): candidate is DecodeCandidate<Key> => candidate.kind === "decode")
    .filter((candidate) => candidate.pending.length > 0)
    .sort((a, b) => a.seq - b.seq);
  const prefilling = candidates.filter(
    (candidate): candidate is PrefillCandidate<Key> =>
      candidate.kind === "prefill" && chunkEnd(candidate, Number.POSITIVE_INFINITY) > candidate.from,
  );
  // Every decode's first token is in before any extra one: a long jump-forward run cannot crowd out a decode.
  let left = budget - decoding.length;
  const reserve = prefilling.length > 0 ? 1 : 0;
  for (const candidate of decoding) {
    const extra = Math.max(0, Math.min(candidate.pending.length - 1, left - reserve));
    left -= extra;
    const take = 1 + extra;
    for (let index = 0; index < take; index++) {
      tokens.push(candidate.pending[index] as number);
      positions.push(candidate.position + index);
      seqs.push(candidate.seq);
    }
    takes.push({ key: candidate.key, kind: "decode", tokens: take });
    if (take === candidate.pending.length)
      output(OutputKind.Sample, -1, candidate.topN, { kind: "sample", key: candidate.key });
  }
  // The oldest prompt moves on even when the decodes took the whole budget.
  left = Math.max(left, reserve);
  for (const candidate of prefilling) {
    if (left <= 0) break;
    const { prompt, from, embed, promptTopN } = candidate;
    const scored = promptTopN !== null || embed === "mean";
    const to = chunkEnd(candidate, Math.min(left, scored ? SCORED_CHUNK_TOKENS : left));
    for (let index = from; index < to; index++) {
      tokens.push(prompt[index] as number);
      positions.push(candidate.position + (index - from));
      seqs.push(candidate.seq);
      if (embed && (embed === "mean" || (embed === "cls" ? index === 0 : index === prompt.length - 1))) {
        output(OutputKind.Embedding, -1, -1, { kind: "embed", key: candidate.key, position: index });
      }
      if (promptTopN !== null && index + 1 < prompt.length) {
        output(OutputKind.PromptLogprob, prompt[index + 1] as number, promptTopN, {
          kind: "prompt",
          key: candidate.key,
          topN: promptTopN,
        });
      }
    }
    left -= to - from;
    takes.push({ key: candidate.key, kind: "prefill", tokens: to - from });
    if (to === prompt.length && !embed)
      output(OutputKind.Sample, -1, candidate.topN, { kind: "sample", key: candidate.key });
  }
  return {
    input: {
      tokens: Int32Array.from(tokens),
      positions: Int32Array.from(positions),
      seqs: Int32Array.from(seqs),
      outputRows: Int32Array.from(outputRows),
      kinds: Int32Array.from(kinds),
      targets: Int32Array.from(targets),
      topN: Int32Array.from(topN),
    },
    outputs,
    takes,
  };
}

/** The end of a prefill chunk of at most `tokens` tokens: the prompt's end, or its next image's start, if sooner. */
function chunkEnd(candidate: PrefillCandidate<unknown>, tokens: number): number {
  return Math.min(
    candidate.prompt.length,
    candidate.from + tokens,
    candidate.imageStart ?? Number.POSITIVE_INFINITY,
  );
}

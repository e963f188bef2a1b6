// Per-sequence sampling over one row of raw logits, in vLLM's order of transforms, with guided decoding
// as a token mask (constraint.h). Pure C++: no Node-API here, so the unit-test entry point and the step
// worker share it.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lmserve {

class Constraint;

/** mulberry32 (32-bit state), bit for bit the same as src/engine/sampling/Mulberry32.ts. */
class Mulberry32 {
 public:
  explicit Mulberry32(uint32_t seed) : state_(seed) {}
  /** The next number in [0, 1). */
  double next();

 private:
  uint32_t state_;
};

/** A sequence's sampling parameters, already validated and defaulted by the TypeScript side. */
struct SamplingParams {
  /** 0 = greedy. */
  double temperature = 1.0;
  /** 0 = off. */
  int32_t topK = 0;
  /** 1 = off. */
  double topP = 1.0;
  /** 0 = off. */
  double minP = 0.0;
  /** 1 = off; prompt and completion tokens (vLLM). */
  double repetitionPenalty = 1.0;
  /** 0 = off; completion tokens (OpenAI). */
  double frequencyPenalty = 0.0;
  /** 0 = off; completion tokens (OpenAI). */
  double presencePenalty = 0.0;
  uint32_t seed = 0;
  /** `banEarly` holds until this many tokens have been generated (vLLM `min_tokens`). */
  int32_t minTokens = 0;
};

/** The raw log-softmax facts of one token of a row, and the row's top-N (most likely first). */
struct RowLogprobs {
  float logprob = 0;
  int32_t rank = 0;
  std::vector<int32_t> topIds;
  std::vector<float> topLogprobs;
};

/**
 * Log-softmax of a raw logits row (temperature 1, no truncation): `token`'s logprob and 1-based rank
 * (1 + the number of tokens with a strictly larger logit) and the `topN` most likely tokens, ties by
 * lower id. O(n_vocab) with an N-entry heap; never sorts the vocabulary.
 */
RowLogprobs rawLogprobs(const float* logits, int32_t nVocab, int32_t token, int32_t topN);

/**
 * One sequence's sampler: bans and logit bias, penalties, the guided-decoding token mask, temperature,
 * top-k, top-p, min-p and a draw from its own {@link Mulberry32}. Holds the completion's token counts
 * for the penalties; owns the sequence's {@link Constraint}.
 */
class SequenceSampler {
 public:
  /**
   * @param bias `logit_bias` pairs (token id, value added to the logit).
   * @param banAlways ids never sampled (EOS with `ignore_eos`).
   * @param banEarly ids not sampled before `minTokens` tokens (EOS and stop ids under `min_tokens`).
   * @param promptTokens the prompt, for `repetition_penalty` (vLLM applies it to prompt and completion).
   * @param constraint the guided-decoding grammar, or null.
   */
  SequenceSampler(int32_t nVocab, const SamplingParams& params, std::vector<std::pair<int32_t, float>> bias,
                  std::vector<int32_t> banAlways, std::vector<int32_t> banEarly,
                  const std::vector<int32_t>& promptTokens, std::unique_ptr<Constraint> constraint);
  ~SequenceSampler();
  SequenceSampler(const SequenceSampler&) = delete;
  SequenceSampler& operator=(const SequenceSampler&) = delete;

  /**
   * Samples the next token from a raw logits row and accepts it (counts, grammar). Under a grammar the
   * disallowed tokens are set to -inf before temperature and truncation (exact semantics: the mask, then
   * top-k/top-p/min-p choose among allowed tokens only, as vLLM with XGrammar; penalties and bias only
   * move allowed tokens, so their order with the mask does not matter). With `masked`, it also receives
   * the raw row with the grammar's disallowed tokens at -inf (the distribution logprobs are reported from
   * under a constraint); without a grammar it is left empty.
   *
   * Under a grammar, returns -1 (accepting nothing) where no allowed token can be drawn or the grammar
   * is too costly (Constraint::tooCostly): the caller ends the sequence with an error. A lazy grammar
   * (LazyStart) masks nothing until its trigger appears (see sampleAwaiting).
   */
  int32_t sample(const float* logits, std::vector<float>* masked = nullptr);

  /** Whether the sequence samples under a grammar. */
  bool constrained() const { return constraint_ != nullptr; }

  /**
   * Jump-forward: the tokens the grammar forces next (see Constraint::forcedTokens), at most
   * `maxTokens`, accepted and counted as generated. Empty without a grammar.
   */
  std::vector<int32_t> forced(size_t maxTokens);

  /**
   * Accepts a token that was not sampled here (an injected one): counts it and advances the grammar.
   * @returns false, changing nothing, when the grammar does not allow it.
   */
  bool accept(int32_t token);

  /** Tokens generated (sampled or accepted) so far. */
  int32_t generated() const { return generated_; }

 private:
  void transform(const float* logits);
  /**
   * sample() while a lazy grammar awaits its trigger: a free draw, unless it completes a trigger the
   * grammar refuses (then those tokens are set aside and the draw repeated); the grammar starts when the
   * drawn token completes a trigger it takes.
   */
  int32_t sampleAwaiting(const float* logits, std::vector<float>* masked);
  int32_t draw();
  /** Counts a token of the completion (for the penalties and `min_tokens`). */
  void count(int32_t token);
  /** Sets to -inf, in `row`, every token the grammar does not allow now. */
  void applyMask(float* row);
  /**
   * Without a cached mask, when the draw needs only the `k` best allowed tokens (greedy: 1; top-k: k),
   * checks the best tokens of `work_` one at a time and leaves only the allowed ones finite. Exact: the
   * draw then sees the same top-k set as under the full mask. @returns false when the best max(64, 2k)
   * tokens hold fewer than `k` allowed ones and too few to expect `k` among 8 times as many, or those
   * do not either (the caller then applies the full mask).
   */
  bool maskLazily();

  int32_t nVocab_;
  SamplingParams params_;
  std::vector<std::pair<int32_t, float>> bias_;
  std::vector<int32_t> banAlways_;
  std::vector<int32_t> banEarly_;
  /** Distinct prompt token ids. */
  std::vector<int32_t> promptSet_;
  std::unordered_map<int32_t, int32_t> outputCounts_;
  std::unique_ptr<Constraint> constraint_;
  Mulberry32 rng_;
  int32_t generated_ = 0;
  /** The row after bias, bans, penalties and the grammar's mask: the work buffer. */
  std::vector<float> work_;
  std::vector<int32_t> order_;
  std::vector<double> weights_;
  /** applyMask's scratch: the allowed tokens' values. */
  std::vector<std::pair<int32_t, float>> kept_;
};

}  // namespace lmserve

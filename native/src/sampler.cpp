#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "constraint.h"

namespace lmserve {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/** Candidate order: higher logit first, then lower id (deterministic on ties). */
struct Better {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

/**
 * The `k` best finite entries of `logits` by {@link Better}, best first. O(n log k) with a k-entry heap
 * (the heap's front is the worst kept entry).
 */
void selectTop(const float* logits, int32_t n, int32_t k, std::vector<int32_t>& out) {
  out.clear();
  if (k <= 0) return;
  Better better{logits};
  for (int32_t id = 0; id < n; id++) {
    if (!std::isfinite(logits[id])) continue;
    if (static_cast<int32_t>(out.size()) < k) {
      out.push_back(id);
      std::push_heap(out.begin(), out.end(), better);
    } else if (better(id, out.front())) {
      std::pop_heap(out.begin(), out.end(), better);
      out.back() = id;
      std::push_heap(out.begin(), out.end(), better);
    }
  }
  std::sort_heap(out.begin(), out.end(), better);
}

/** Sets every entry of `row` (n long) to -inf except the `kept` (id, value) pairs. */
void keepOnly(float* row, int32_t n, const std::vector<std::pair<int32_t, float>>& kept) {
  std::fill(row, row + n, kNegInf);
  for (const auto& [id, value] : kept) row[id] = value;
}

}  // namespace

double Mulberry32::next() {
  state_ += 0x6d2b79f5u;
  uint32_t t = state_;
  t = (t ^ (t >> 15)) * (t | 1u);
  t ^= t + (t ^ (t >> 7)) * (t | 61u);
  return static_cast<double>(t ^ (t >> 14)) / 4294967296.0;
}

RowLogprobs rawLogprobs(const float* logits, int32_t nVocab, int32_t token, int32_t topN) {
  // Pass 1: the maximum and its (lowest) id. Pass 2: the sum of exp(logit - max), in single precision per
  // block of 1024 (expf is about twice as fast as exp) added up in double, and the count above the token.
  float max = kNegInf;
  int32_t best = 0;
  for (int32_t id = 0; id < nVocab; id++) {
    if (logits[id] > max) {
      max = logits[id];
      best = id;
    }
  }
  const float target = token >= 0 && token < nVocab ? logits[token] : kNegInf;
  double sum = 0;
  int32_t above = 0;
  for (int32_t from = 0; from < nVocab; from += 1024) {
    const int32_t to = std::min(nVocab, from + 1024);
    float block = 0;
    for (int32_t id = from; id < to; id++) {
      const float logit = logits[id];
      block += logit > kNegInf ? std::exp(logit - max) : 0.0f;
      above += logit > target ? 1 : 0;
    }
    sum += block;
  }
  const double lse = static_cast<double>(max) + std::log(sum);
  RowLogprobs result;
  result.logprob = static_cast<float>(static_cast<double>(target) - lse);
  result.rank = above + 1;
  if (topN == 1 && std::isfinite(max)) {
    result.topIds.push_back(best);
    result.topLogprobs.push_back(static_cast<float>(static_cast<double>(max) - lse));
  } else if (topN > 1) {
    std::vector<int32_t> top;
    selectTop(logits, nVocab, topN, top);
    for (int32_t id : top) {
      result.topIds.push_back(id);
      result.topLogprobs.push_back(static_cast<float>(static_cast<double>(logits[id]) - lse));
    }
  }
  return result;
}

SequenceSampler::SequenceSampler(int32_t nVocab, const SamplingParams& params,
                                 std::vector<std::pair<int32_t, float>> bias, std::vector<int32_t> banAlways,
                                 std::vector<int32_t> banEarly, const std::vector<int32_t>& promptTokens,
                                 std::unique_ptr<Constraint> constraint)
    : nVocab_(nVocab),
      params_(params),
      bias_(std::move(bias)),
      banAlways_(std::move(banAlways)),
      banEarly_(std::move(banEarly)),
      promptSet_(promptTokens),
      constraint_(std::move(constraint)),
      rng_(params.seed),
      work_(static_cast<size_t>(nVocab)) {
  std::sort(promptSet_.begin(), promptSet_.end());
  promptSet_.erase(std::unique(promptSet_.begin(), promptSet_.end()), promptSet_.end());
}

SequenceSampler::~SequenceSampler() = default;

void SequenceSampler::transform(const float* logits) {
  std::copy(logits, logits + nVocab_, work_.begin());
  // As vLLM v1: logits processors (bans, logit_bias) first, then the penalties.
  for (const auto& [id, value] : bias_) {
    if (id >= 0 && id < nVocab_) work_[id] += value;
  }
  for (int32_t id : banAlways_) {
    if (id >= 0 && id < nVocab_) work_[id] = kNegInf;
  }
  if (generated_ < params_.minTokens) {
    for (int32_t id : banEarly_) {
      if (id >= 0 && id < nVocab_) work_[id] = kNegInf;
    }
  }
  if (params_.repetitionPenalty != 1.0) {
    const auto penalize = [&](int32_t id) {
      if (id < 0 || id >= nVocab_ || !std::isfinite(work_[id])) return;
      const double logit = work_[id];
      work_[id] = static_cast<float>(logit > 0 ? logit / params_.repetitionPenalty
                                               : logit * params_.repetitionPenalty);
    };
    for (int32_t id : promptSet_) penalize(id);
    for (const auto& [id, count] : outputCounts_) {
      if (!std::binary_search(promptSet_.begin(), promptSet_.end(), id)) penalize(id);
    }
  }
  if (params_.frequencyPenalty != 0.0 || params_.presencePenalty != 0.0) {
    for (const auto& [id, count] : outputCounts_) {
      if (id < 0 || id >= nVocab_ || !std::isfinite(work_[id])) continue;
      work_[id] = static_cast<float>(work_[id] - (params_.frequencyPenalty * count + params_.presencePenalty));
    }
  }
}

int32_t SequenceSampler::draw() {
  const float* logits = work_.data();
  if (params_.temperature <= 0.0) {
    int32_t best = -1;
    for (int32_t id = 0; id < nVocab_; id++) {
      if (std::isfinite(logits[id]) && (best < 0 || logits[id] > logits[best])) best = id;
    }
    return best;
  }
  const double temperature = params_.temperature;
  // Candidates: sorted (best first) when top-k or top-p needs an order, else every finite id in id order.
  bool sorted = false;
  if (params_.topK > 0 && params_.topK < nVocab_) {
    selectTop(logits, nVocab_, params_.topK, order_);
    sorted = true;
  } else {
    order_.clear();
    for (int32_t id = 0; id < nVocab_; id++) {
      if (std::isfinite(logits[id])) order_.push_back(id);
    }
  }
  if (order_.empty()) return -1;
  float top = kNegInf;
  for (int32_t id : order_) top = std::max(top, logits[id]);
  double total = 0;
  weights_.resize(order_.size());
  for (size_t i = 0; i < order_.size(); i++) {
    weights_[i] = std::exp((static_cast<double>(logits[order_[i]]) - top) / temperature);
    total += weights_[i];
  }
  if (params_.topP < 1.0) {
    if (!sorted) {
      // Sort only as much of the head as the nucleus needs: grow the sorted prefix until it holds the mass.
      const double needed = params_.topP * total;
      std::vector<int32_t> head;
      for (int32_t k = 256;; k *= 8) {
        selectTop(logits, nVocab_, k, head);
        double mass = 0;
        for (int32_t id : head) mass += std::exp((static_cast<double>(logits[id]) - top) / temperature);
        if (mass >= needed || static_cast<size_t>(k) >= order_.size()) break;
      }
      order_.swap(head);
      weights_.resize(order_.size());
      for (size_t i = 0; i < order_.size(); i++) {
        weights_[i] = std::exp((static_cast<double>(logits[order_[i]]) - top) / temperature);
      }
      sorted = true;
    }
    double mass = 0;
    size_t keep = 0;
    while (keep < order_.size() && mass < params_.topP * total) mass += weights_[keep++];
    keep = std::max<size_t>(keep, 1);
    order_.resize(keep);
    weights_.resize(keep);
    total = 0;
    for (double weight : weights_) total += weight;
  }
  if (params_.minP > 0.0) {
    double max = 0;
    for (double weight : weights_) max = std::max(max, weight);
    const double threshold = max * params_.minP;
    size_t kept = 0;
    total = 0;
    for (size_t i = 0; i < order_.size(); i++) {
      if (weights_[i] < threshold) continue;
      order_[kept] = order_[i];
      weights_[kept] = weights_[i];
      total += weights_[i];
      kept++;
    }
    order_.resize(kept);
    weights_.resize(kept);
  }
  double r = rng_.next() * total;
  for (size_t i = 0; i < order_.size(); i++) {
    r -= weights_[i];
    if (r < 0) return order_[i];
  }
  return order_.back();
}

void SequenceSampler::applyMask(float* row) {
  const TokenMask& mask = constraint_->mask();
  size_t allowed = 0;
  for (uint64_t bits : mask) allowed += static_cast<size_t>(__builtin_popcountll(bits));
  if (allowed * 16 < static_cast<size_t>(nVocab_)) {
    // Few allowed tokens (a structural position): keep their values, fill the rest at memory speed.
    std::vector<std::pair<int32_t, float>>& keep = kept_;
    keep.clear();
    for (size_t word = 0; word < mask.size(); word++) {
      for (uint64_t bits = mask[word]; bits != 0; bits &= bits - 1) {
        const int32_t id = static_cast<int32_t>(word * 64) + __builtin_ctzll(bits);
        if (id < nVocab_) keep.emplace_back(id, row[id]);
      }
    }
    keepOnly(row, nVocab_, keep);
    return;
  }
  for (size_t word = 0; word < mask.size(); word++) {
    const uint64_t bits = mask[word];
    if (bits == ~uint64_t{0}) continue;
    const int32_t from = static_cast<int32_t>(word * 64);
    const int32_t to = std::min(nVocab_, from + 64);
    for (int32_t id = from; id < to; id++) {
      if (((bits >> (id - from)) & 1u) == 0) row[id] = kNegInf;
    }
  }
}

bool SequenceSampler::maskLazily() {
  const int32_t k = params_.temperature <= 0.0 ? 1 : params_.topK;
  if (k <= 0 || k > 128) return false;
  // A look at the best 64 (or 2k) tokens; a second, 8 times longer look only when the first found enough
  // allowed ones to expect k in it (a narrow state's mask is cheaper than a long look).
  std::vector<int32_t>& best = order_;
  std::vector<std::pair<int32_t, float>>& allowed = kept_;
  int32_t budget = std::max(64, 2 * k);
  for (int look = 0; look < 2; look++, budget *= 8) {
    selectTop(work_.data(), nVocab_, budget, best);
    allowed.clear();
    for (int32_t id : best) {
      if (constraint_->allows(id)) allowed.emplace_back(id, work_[id]);
      if (static_cast<int32_t>(allowed.size()) >= k) break;
    }
    // Enough allowed tokens, or every finite token was checked: the top-k of the masked row is known.
    if (static_cast<int32_t>(allowed.size()) >= k || static_cast<int32_t>(best.size()) < budget) {
      keepOnly(work_.data(), nVocab_, allowed);
      return true;
    }
    if (static_cast<int32_t>(allowed.size()) * 8 < k) break;
  }
  return false;
}

int32_t SequenceSampler::sampleAwaiting(const float* logits, std::vector<float>* masked) {
  // Free text: no mask, the raw distribution for logprobs.
  if (masked != nullptr) masked->assign(logits, logits + nVocab_);
  int32_t token = draw();
  if (token < 0) return -1;
  if (constraint_->offer(token, true) == Constraint::Offer::kRefused) {
    // The draw completes a trigger the grammar refuses to go on from (`<tool_call>` followed by text no
    // call starts with): as a grammar's mask would, every such token is set aside, then a new draw (as
    // llama.cpp's common_sampler_sample resamples under the grammar when a token it drew is refused).
    // Exact for greedy and untruncated sampling; the common draw, no trigger, costs one scan of the token.
    for (int32_t id = 0; id < nVocab_; id++) {
      if (std::isfinite(work_[id]) && constraint_->mayTrigger(id) &&
          constraint_->offer(id, false) == Constraint::Offer::kRefused) {
        work_[id] = kNegInf;
      }
    }
    token = draw();
    if (token < 0 || constraint_->offer(token, true) == Constraint::Offer::kRefused) return -1;
  }
  count(token);
  return token;
}

int32_t SequenceSampler::sample(const float* logits, std::vector<float>* masked) {
  transform(logits);
  if (constraint_ != nullptr && constraint_->awaiting()) return sampleAwaiting(logits, masked);
  if (constraint_ != nullptr) {
    // The mask comes first (vLLM's structured-output bitmask is applied before the sampler's
    // transforms): truncation then only ever chooses among tokens the grammar allows. A state whose
    // mask is not cached and a draw that needs only the best k allowed tokens (no logprobs) check
    // those tokens one by one instead of computing the mask.
    if (masked != nullptr || constraint_->cachedMask() != nullptr || constraint_->forcesNext() || !maskLazily()) {
      applyMask(work_.data());
    }
    if (masked != nullptr) {
      masked->assign(logits, logits + nVocab_);
      applyMask(masked->data());
    }
  } else if (masked != nullptr) {
    masked->clear();
  }
  int32_t token = draw();
  if (constraint_ != nullptr && (token < 0 || constraint_->tooCostly())) {
    // Under a grammar, never a token it does not allow: the grammar allows nothing here (or every token
    // it allows is banned), or its masks cost more than the bound. -1 ends the sequence with an error.
    return -1;
  }
  if (token < 0) {
    // Everything was masked or banned: the raw argmax (the serving layer refuses the requests that get here).
    token = 0;
    for (int32_t id = 1; id < nVocab_; id++) {
      if (logits[id] > logits[token]) token = id;
    }
  }
  if (constraint_ != nullptr && !constraint_->accept(token)) return -1;
  count(token);
  return token;
}

void SequenceSampler::count(int32_t token) {
  outputCounts_[token]++;
  generated_++;
}

bool SequenceSampler::accept(int32_t token) {
  if (token < 0 || token >= nVocab_) return false;
  if (constraint_ != nullptr && !constraint_->accept(token)) return false;
  count(token);
  return true;
}

std::vector<int32_t> SequenceSampler::forced(size_t maxTokens) {
  if (constraint_ == nullptr) return {};
  std::vector<int32_t> tokens = constraint_->forcedTokens(maxTokens);
  for (int32_t token : tokens) count(token);
  return tokens;
}

}  // namespace lmserve

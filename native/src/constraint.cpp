#include "constraint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "grammarWalk.h"
#include "parallel.h"
#include "llama.h"

namespace lmserve {

namespace {

/** Appends a trivially copyable value's bytes to `out`. */
template <typename T>
void appendBytes(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

/** Appends code point `chr` to `out` as UTF-8. */
void appendUtf8(std::string& out, uint32_t chr) {
  if (chr < 0x80) {
    out.push_back(static_cast<char>(chr));
  } else if (chr < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (chr >> 6)));
    out.push_back(static_cast<char>(0x80 | (chr & 0x3f)));
  } else if (chr < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (chr >> 12)));
    out.push_back(static_cast<char>(0x80 | ((chr >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (chr & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (chr >> 18)));
    out.push_back(static_cast<char>(0x80 | ((chr >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((chr >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (chr & 0x3f)));
  }
}

/**
 * Decodes `piece` from a fresh UTF-8 state into `out` (code points, then a 0), as llama.cpp's grammar
 * does (`decode_utf8` in llama-grammar.cpp): an invalid lead byte leaves only the 0 and n_remain -1; a
 * trailing incomplete sequence is returned as the partial state.
 */
llama_partial_utf8 decodeUtf8(const std::string& piece, std::vector<uint32_t>& out) {
  static const int kLength[] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
  const size_t start = out.size();
  const char* pos = piece.c_str();
  uint32_t value = 0;
  int remain = 0;
  while (*pos != 0) {
    const uint8_t first = static_cast<uint8_t>(*pos);
    remain = kLength[first >> 4] - 1;
    if (remain < 0) {
      out.resize(start);
      out.push_back(0);
      return {0, remain};
    }
    value = first & ((1u << (7 - remain)) - 1);
    ++pos;
    while (*pos != 0 && remain > 0) {
      value = (value << 6) + (static_cast<uint8_t>(*pos) & 0x3f);
      ++pos;
      --remain;
    }
    if (remain == 0) out.push_back(value);
  }
  out.push_back(0);
  return {value, remain};
}

/**
 * The range [low, high] the next byte must be in after a UTF-8 lead byte `lead` (RFC 3629's table: E0 needs
 * A0-BF, ED 80-9F, F0 90-BF, F4 80-8F, the others 80-BF); {1, 0} (empty) for a byte that cannot lead.
 */
std::pair<uint8_t, uint8_t> secondByteRange(uint8_t lead) {
  if (lead >= 0xc2 && lead <= 0xdf) return {0x80, 0xbf};
  if (lead == 0xe0) return {0xa0, 0xbf};
  if (lead == 0xed) return {0x80, 0x9f};
  if (lead >= 0xe1 && lead <= 0xef) return {0x80, 0xbf};
  if (lead == 0xf0) return {0x90, 0xbf};
  if (lead >= 0xf1 && lead <= 0xf3) return {0x80, 0xbf};
  if (lead == 0xf4) return {0x80, 0x8f};
  return {1, 0};
}

/** Bytes a sequence led by `lead` has after it (0 for ASCII and for bytes that cannot lead). */
int sequenceTail(uint8_t lead) { return lead >= 0xf0 ? 3 : lead >= 0xe0 ? 2 : lead >= 0xc0 ? 1 : 0; }

/** Whether `bytes` from `from` on are well-formed UTF-8 from a fresh state (a last sequence may be cut). */
bool wellFormedFrom(const std::string& bytes, size_t from) {
  size_t i = from;
  while (i < bytes.size()) {
    const uint8_t lead = static_cast<uint8_t>(bytes[i]);
    if (lead < 0x80) {
      i++;
      continue;
    }
    const auto [low, high] = secondByteRange(lead);
    if (low > high) return false;
    const int tail = sequenceTail(lead);
    for (int k = 1; k <= tail && i + static_cast<size_t>(k) < bytes.size(); k++) {
      const uint8_t next = static_cast<uint8_t>(bytes[i + static_cast<size_t>(k)]);
      if (k == 1 ? (next < low || next > high) : (next < 0x80 || next > 0xbf)) return false;
    }
    i += 1 + static_cast<size_t>(tail);
  }
  return true;
}

}  // namespace

bool TokenTable::wellFormedAfter(int32_t token, const llama_partial_utf8& partial) const {
  const size_t id = static_cast<size_t>(token);
  if (eog_[id] != 0 || pieces_[id].empty()) return true;
  const int remain = partial.n_remain;
  if (remain <= 0) return remain == 0 && (wellFormedFrom_[id] & 1) != 0;
  // Inside a sequence: its next `remain` bytes must be continuations (the first within the range its lead
  // allows, read back from the decoder's value: a lead alone leaves its low bits, and a 4-byte sequence's
  // value after two bytes is at least 0x10, as only F0 90.. starts it), then the rest well-formed.
  uint8_t low = 0x80;
  uint8_t high = 0xbf;
  if (remain == 2 && partial.value < 0x10) {
    const auto range = secondByteRange(static_cast<uint8_t>(0xe0 | partial.value));
    low = range.first;
    high = range.second;
  } else if (remain == 3) {
    const auto range = secondByteRange(static_cast<uint8_t>(0xf0 | partial.value));
    low = range.first;
    high = range.second;
  }
  const std::string& piece = pieces_[id];
  const uint8_t first = static_cast<uint8_t>(piece[0]);
  if (first < low || first > high) return false;
  const size_t need = static_cast<size_t>(remain);
  if (piece.size() <= need) return leadingContinuations_[id] >= piece.size();
  return leadingContinuations_[id] >= need && (wellFormedFrom_[id] >> need & 1) != 0;
}

TokenTable::TokenTable(const llama_vocab* vocab) : vocab_(vocab), nVocab_(llama_vocab_n_tokens(vocab)) {
  const size_t n = static_cast<size_t>(nVocab_);
  eog_.assign(n, 0);
  pieces_.resize(n);
  std::vector<std::pair<size_t, llama_partial_utf8>> spans(n, {std::numeric_limits<size_t>::max(), {0, 0}});
  std::vector<char> buffer(256);
  for (int32_t id = 0; id < nVocab_; id++) {
    // As llama.cpp's grammar: the piece with special tokens rendered (its cached token_to_piece).
    int32_t length = llama_token_to_piece(vocab, id, buffer.data(), static_cast<int32_t>(buffer.size()), 0, true);
    if (length < 0) {
      buffer.resize(static_cast<size_t>(-length));
      length = llama_token_to_piece(vocab, id, buffer.data(), static_cast<int32_t>(buffer.size()), 0, true);
    }
    std::string& piece = pieces_[static_cast<size_t>(id)];
    piece.assign(buffer.data(), static_cast<size_t>(std::max(length, 0)));
    uint8_t wellFormed = 0;
    for (size_t from = 0; from < 4; from++) {
      if (from > piece.size() || wellFormedFrom(piece, from)) wellFormed |= static_cast<uint8_t>(1u << from);
    }
    wellFormedFrom_.push_back(wellFormed);
    uint8_t continuations = 0;
    while (continuations < piece.size() && continuations < 4 &&
           (static_cast<uint8_t>(piece[continuations]) & 0xc0) == 0x80) {
      continuations++;
    }
    leadingContinuations_.push_back(continuations);
    if (llama_vocab_is_eog(vocab, id)) {
      eog_[static_cast<size_t>(id)] = 1;
      continue;
    }
    if (piece.empty() || piece[0] == 0) continue;
    const size_t start = codePoints_.size();
    const llama_partial_utf8 partial = decodeUtf8(piece, codePoints_);
    spans[static_cast<size_t>(id)] = {start, partial};
  }
  // Normal tokens first, so that they win over byte tokens of the same text.
  for (const bool normal : {true, false}) {
    for (int32_t id = 0; id < nVocab_; id++) {
      const llama_token_attr attr = llama_vocab_get_attr(vocab, id);
      if (eog_[static_cast<size_t>(id)] != 0 || (attr & LLAMA_TOKEN_ATTR_CONTROL) != 0) continue;
      if (((attr & LLAMA_TOKEN_ATTR_NORMAL) != 0) != normal) continue;
      const std::string& piece = pieces_[static_cast<size_t>(id)];
      if (piece.empty()) continue;
      byPiece_.emplace(piece, id);
      longestPiece_ = std::max(longestPiece_, piece.size());
    }
  }
  // Pointers into codePoints_ only once it no longer grows; into candidates_ once it is complete.
  for (int32_t id = 0; id < nVocab_; id++) {
    const auto& [start, partial] = spans[static_cast<size_t>(id)];
    if (start == std::numeric_limits<size_t>::max()) continue;
    candidates_.push_back({static_cast<size_t>(id), codePoints_.data() + start, partial, id});
  }
  byId_.assign(n, nullptr);
  for (const llama_grammar_candidate& candidate : candidates_) {
    byId_[candidate.index] = &candidate;
    (candidate.code_points[0] != 0 ? byFirst_ : noFirst_).push_back(candidate);
    if (candidate.partial_utf8.n_remain != 0) {
      partialTails_.push_back(candidate);
    } else {
      sortedPieces_.emplace_back(pieces_[candidate.index], candidate.id);
    }
    size_t length = 0;
    while (candidate.code_points[length] != 0) length++;
    if (byLength_.size() <= length) byLength_.resize(length + 1);
    byLength_[length].push_back(candidate);
  }
  std::sort(sortedPieces_.begin(), sortedPieces_.end());
  std::stable_sort(byFirst_.begin(), byFirst_.end(),
                   [](const llama_grammar_candidate& a, const llama_grammar_candidate& b) {
                     return a.code_points[0] < b.code_points[0];
                   });
  for (const llama_grammar_candidate& candidate : byFirst_) firsts_.push_back(candidate.code_points[0]);
}

const std::vector<const llama_grammar_candidate*>& TokenTable::byCodePoints() const {
  std::call_once(byCodePointsOnce_, [this]() {
    byCodePoints_.reserve(candidates_.size());
    for (const llama_grammar_candidate& candidate : candidates_) byCodePoints_.push_back(&candidate);
    std::stable_sort(byCodePoints_.begin(), byCodePoints_.end(),
                     [](const llama_grammar_candidate* a, const llama_grammar_candidate* b) {
                       const uint32_t* x = a->code_points;
                       const uint32_t* y = b->code_points;
                       while (*x != 0 && *x == *y) x++, y++;
                       return *x < *y;
                     });
  });
  return byCodePoints_;
}

void TokenTable::candidatesFor(const llama_grammar_element* top, llama_grammar_candidates& out) const {
  out.clear();
  if (top->type != LLAMA_GRETYPE_CHAR && top->type != LLAMA_GRETYPE_CHAR_NOT && top->type != LLAMA_GRETYPE_CHAR_ANY) {
    out = candidates_;
    return;
  }
  // The character class as llama.cpp's llama_grammar_match_char reads it: chars and ranges joined by
  // CHAR_ALT, negated for CHAR_NOT.
  constexpr uint32_t kMax = 0x10ffff;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  const llama_grammar_element* pos = top;
  do {
    if (pos[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
      ranges.emplace_back(pos->value, pos[1].value);
      pos += 2;
    } else if (pos->type == LLAMA_GRETYPE_CHAR_ANY) {
      ranges.emplace_back(0, kMax);
      pos += 1;
    } else {
      ranges.emplace_back(pos->value, pos->value);
      pos += 1;
    }
  } while (pos->type == LLAMA_GRETYPE_CHAR_ALT);
  std::sort(ranges.begin(), ranges.end());
  if (top->type == LLAMA_GRETYPE_CHAR_NOT) {
    std::vector<std::pair<uint32_t, uint32_t>> complement;
    uint32_t next = 1;  // code point 0 never starts a candidate of byFirst_
    for (const auto& [lo, hi] : ranges) {
      if (lo > next) complement.emplace_back(next, lo - 1);
      next = std::max(next, hi + 1);
    }
    if (next <= kMax) complement.emplace_back(next, kMax);
    ranges.swap(complement);
  }
  size_t covered = 0;
  for (const auto& [lo, hi] : ranges) {
    if (hi < lo) continue;
    // Overlapping ranges (e.g. [a-zc]) would repeat candidates: start past what is already taken.
    const size_t from = std::max(covered, static_cast<size_t>(std::lower_bound(firsts_.begin(), firsts_.end(), lo) - firsts_.begin()));
    const size_t to = static_cast<size_t>(std::upper_bound(firsts_.begin(), firsts_.end(), hi) - firsts_.begin());
    if (to > from) out.insert(out.end(), byFirst_.begin() + static_cast<std::ptrdiff_t>(from), byFirst_.begin() + static_cast<std::ptrdiff_t>(to));
    covered = std::max(covered, to);
  }
  out.insert(out.end(), noFirst_.begin(), noFirst_.end());
}

std::vector<int32_t> TokenTable::longestMatch(const std::string& text) const {
  std::vector<int32_t> tokens;
  size_t at = 0;
  while (at < text.size()) {
    size_t length = std::min(longestPiece_, text.size() - at);
    for (; length > 0; length--) {
      auto found = byPiece_.find(text.substr(at, length));
      if (found != byPiece_.end()) {
        tokens.push_back(found->second);
        break;
      }
    }
    if (length == 0) return {};
    at += length;
  }
  return tokens;
}

uint64_t MaskCache::grammarId(const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = grammarIds_.find(text);
  if (found != grammarIds_.end()) return found->second;
  if (grammarIds_.size() >= 4096) {
    grammarIds_.clear();
    order_.clear();
    index_.clear();
    bytes_ = 0;
  }
  const uint64_t id = nextGrammarId_++;
  grammarIds_.emplace(text, id);
  return id;
}

std::shared_ptr<const TokenMask> MaskCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  if (found == index_.end()) {
    misses_++;
    return nullptr;
  }
  hits_++;
  order_.splice(order_.begin(), order_, found->second);
  return found->second->second;
}

void MaskCache::store(const std::string& key, std::shared_ptr<const TokenMask> mask) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index_.count(key) != 0) return;
  const size_t size = mask->size() * sizeof(uint64_t) + key.size();
  order_.emplace_front(key, std::move(mask));
  index_.emplace(key, order_.begin());
  bytes_ += size;
  while (bytes_ > budget_ && order_.size() > 1) {
    const Entry& last = order_.back();
    bytes_ -= last.second->size() * sizeof(uint64_t) + last.first.size();
    index_.erase(last.first);
    order_.pop_back();
  }
}

Constraint::Constraint(std::shared_ptr<const TokenTable> table, std::shared_ptr<MaskCache> cache,
                       const std::string& gbnf, const std::string& root)
    : table_(std::move(table)), cache_(std::move(cache)) {
  try {
    grammar_ = llama_grammar_init_impl(table_->vocab(), gbnf.c_str(), root.c_str(), false, nullptr, 0, nullptr, 0);
  } catch (const std::exception& error) {
    throw std::runtime_error(error.what());
  }
  if (grammar_ == nullptr) throw std::runtime_error("failed to parse grammar");
  grammarKey_.clear();
  appendBytes(grammarKey_, cache_->grammarId(root + '\n' + gbnf));
  const llama_grammar_rules& rules = llama_grammar_get_rules(grammar_);
  for (size_t rule = 0; rule < rules.size(); rule++) {
    if (!rules[rule].empty()) ruleStarts_.emplace_back(rules[rule].data(), static_cast<uint32_t>(rule));
  }
  std::sort(ruleStarts_.begin(), ruleStarts_.end());
}

Constraint::Constraint(std::shared_ptr<const TokenTable> table, std::shared_ptr<MaskCache> cache,
                       const std::string& gbnf, const std::string& root, LazyStart lazy)
    : Constraint(std::move(table), std::move(cache), gbnf, root) {
  if (lazy.triggers.empty()) throw std::runtime_error("a lazy grammar needs at least one trigger");
  for (const std::string& trigger : lazy.triggers) {
    if (trigger.empty()) throw std::runtime_error("a lazy grammar's trigger is empty");
    longestTrigger_ = std::max(longestTrigger_, trigger.size());
    if (triggerEnds_.find(trigger.back()) == std::string::npos) triggerEnds_.push_back(trigger.back());
  }
  phase_ = lazy.blockClose.empty() ? Phase::kAnswer
           : lazy.startsInBlock    ? Phase::kBlock
           : lazy.blockOpen.empty() ? Phase::kAnswer
                                    : Phase::kStart;
  lazy_ = std::make_unique<LazyStart>(std::move(lazy));
}

Constraint::Scan Constraint::scan(const std::string& piece) const {
  Scan out{phase_, tail_ + piece, ""};
  std::string& text = out.tail;
  if (out.phase == Phase::kStart) {
    // The output may open the thinking block: undecided while it is a proper prefix of the open marker.
    const std::string& open = lazy_->blockOpen;
    if (text.size() < open.size() && open.compare(0, text.size(), text) == 0) return out;
    if (text.compare(0, open.size(), open) == 0) {
      out.phase = Phase::kBlock;
      text.erase(0, open.size());
    } else {
      out.phase = Phase::kAnswer;
    }
  }
  if (out.phase == Phase::kBlock) {
    const std::string& close = lazy_->blockClose;
    const size_t at = text.find(close);
    if (at == std::string::npos) {
      if (text.size() >= close.size()) text.erase(0, text.size() - (close.size() - 1));
      return out;
    }
    text.erase(0, at + close.size());
    out.phase = Phase::kAnswer;
  }
  size_t first = std::string::npos;
  for (const std::string& trigger : lazy_->triggers) first = std::min(first, text.find(trigger));
  if (first != std::string::npos) {
    out.phase = Phase::kActive;
    out.started = text.substr(first);
    text.clear();
    return out;
  }
  if (text.size() >= longestTrigger_) text.erase(0, text.size() - (longestTrigger_ - 1));
  return out;
}

bool Constraint::acceptText(const std::string& text) {
  const llama_grammar_stacks saved = grammar_->stacks;
  const llama_partial_utf8 savedPartial = grammar_->partial_utf8;
  bool ok = true;
  try {
    llama_grammar_accept_str(*grammar_, text);
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok || grammar_->stacks.empty() || grammar_->partial_utf8.n_remain < 0) {
    grammar_->stacks = saved;
    grammar_->partial_utf8 = savedPartial;
    return false;
  }
  return true;
}

Constraint::Offer Constraint::offer(int32_t token, bool commit) {
  if (!awaiting() || token < 0 || token >= table_->size() || table_->isEog(token)) return Offer::kFree;
  Scan next = scan(table_->piece(token));
  if (next.phase != Phase::kActive) {
    if (commit) {
      phase_ = next.phase;
      tail_ = std::move(next.tail);
    }
    return Offer::kFree;
  }
  if (!commit) {
    const llama_grammar_stacks saved = grammar_->stacks;
    const llama_partial_utf8 savedPartial = grammar_->partial_utf8;
    const bool ok = acceptText(next.started);
    grammar_->stacks = saved;
    grammar_->partial_utf8 = savedPartial;
    return ok ? Offer::kStarts : Offer::kRefused;
  }
  if (!acceptText(next.started)) return Offer::kRefused;
  phase_ = Phase::kActive;
  tail_.clear();
  current_.reset();
  looked_ = false;
  return Offer::kStarts;
}

bool Constraint::mayTrigger(int32_t token) const {
  return token >= 0 && token < table_->size() && !table_->isEog(token) &&
         table_->piece(token).find_first_of(triggerEnds_) != std::string::npos;
}

Constraint::~Constraint() {
  if (grammar_ != nullptr) llama_grammar_free_impl(grammar_);
}

std::string Constraint::stateKey() const {
  std::string key = grammarKey_;
  appendBytes(key, grammar_->partial_utf8.value);
  appendBytes(key, grammar_->partial_utf8.n_remain);
  for (const llama_grammar_stack& stack : grammar_->stacks) {
    appendBytes(key, static_cast<uint32_t>(stack.size()));
    for (const llama_grammar_element* element : stack) {
      // The rule whose elements hold `element`: the last rule starting at or before it.
      auto it = std::upper_bound(ruleStarts_.begin(), ruleStarts_.end(),
                                 std::make_pair(element, std::numeric_limits<uint32_t>::max()));
      const auto& [start, rule] = *(it - 1);
      appendBytes(key, rule);
      appendBytes(key, static_cast<uint32_t>(element - start));
    }
  }
  return key;
}

namespace {

/**
 * Sets in `mask` the candidates some stack of `stacks` accepts (llama.cpp's
 * llama_grammar_reject_candidates: a token is rejected when every stack rejects it).
 */
void allowAccepted(const llama_grammar_rules& rules, const llama_grammar_stacks& stacks,
                   const llama_grammar_candidates& candidates, TokenMask& mask) {
  if (candidates.empty() || stacks.empty()) return;
  llama_grammar_candidates rejects = llama_grammar_reject_candidates_for_stack(rules, stacks[0], candidates);
  for (size_t i = 1; i < stacks.size() && !rejects.empty(); i++) {
    rejects = llama_grammar_reject_candidates_for_stack(rules, stacks[i], rejects);
  }
  std::vector<int32_t> rejected;
  rejected.reserve(rejects.size());
  for (const llama_grammar_candidate& reject : rejects) rejected.push_back(reject.id);
  std::sort(rejected.begin(), rejected.end());
  for (const llama_grammar_candidate& candidate : candidates) {
    if (!std::binary_search(rejected.begin(), rejected.end(), candidate.id)) {
      mask[static_cast<size_t>(candidate.id) >> 6] |= uint64_t{1} << (candidate.id & 63);
    }
  }
}

}  // namespace

std::shared_ptr<const TokenMask> Constraint::computeForcedMask(const std::string& forced, size_t codePoints,
                                                               const llama_grammar_stacks& after) const {
  auto mask = std::make_shared<TokenMask>((static_cast<size_t>(table_->size()) + 63) / 64, 0);
  const auto& pieces = table_->sortedPieces();
  const auto allow = [&](int32_t id) { (*mask)[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  // Tokens that spell a prefix of the forced text (whole code points, so the grammar is still inside it).
  for (size_t length = 1; length <= forced.size(); length++) {
    const std::string_view prefix(forced.data(), length);
    auto it = std::lower_bound(pieces.begin(), pieces.end(), std::make_pair(prefix, std::numeric_limits<int32_t>::min()));
    for (; it != pieces.end() && it->first == prefix; ++it) allow(it->second);
  }
  // Tokens that start with it: their rest, from the state past it.
  llama_grammar_candidates longer;
  const std::string_view whole(forced);
  for (auto it = std::upper_bound(pieces.begin(), pieces.end(), std::make_pair(whole, std::numeric_limits<int32_t>::max()));
       it != pieces.end() && it->first.substr(0, whole.size()) == whole; ++it) {
    const llama_grammar_candidate* candidate = table_->candidate(it->second);
    longer.push_back({candidate->index, candidate->code_points + codePoints, candidate->partial_utf8, candidate->id});
  }
  const llama_grammar_rules& rules = llama_grammar_get_rules(grammar_);
  allowAccepted(rules, after, longer, *mask);
  // Tokens ending in a partial UTF-8 sequence: llama.cpp's own matching from the current state.
  allowAccepted(rules, grammar_->stacks, table_->partialTails(), *mask);
  return mask;
}

std::shared_ptr<const TokenMask> Constraint::computeMask() {
  if (grammar_->partial_utf8.n_remain == 0) {
    llama_grammar_stacks after;
    size_t codePoints = 0;
    const std::string forced = forcedRun(256, &after, &codePoints);
    if (!forced.empty()) return computeForcedMask(forced, codePoints, after);
  }
  const int32_t n = table_->size();
  auto mask = std::make_shared<TokenMask>((static_cast<size_t>(n) + 63) / 64, 0);
  const llama_grammar_stacks& stacks = grammar_->stacks;
  const auto allow = [&](int32_t id) { (*mask)[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  if (grammar_->partial_utf8.n_remain != 0) {
    // The previous token ended inside a UTF-8 sequence (byte-fallback tokens): the table's decoding from
    // a fresh state does not apply; llama.cpp's own pass decodes from the partial state.
    std::vector<llama_token_data> data(static_cast<size_t>(n));
    for (int32_t id = 0; id < n; id++) data[static_cast<size_t>(id)] = {id, 0.0f, 0.0f};
    llama_token_data_array array{data.data(), data.size(), -1, false};
    llama_grammar_apply_impl(*grammar_, &array);
    for (const llama_token_data& entry : data) {
      if (std::isfinite(entry.logit)) allow(entry.id);
    }
    return mask;
  }
  bool mayEnd = false;
  for (const llama_grammar_stack& stack : stacks) mayEnd = mayEnd || stack.empty();
  if (mergedWalk()) {
    // An ambiguous state: every stack at once, merged after each code point, over the vocabulary as a
    // trie (grammarWalk.h; polynomial where llama.cpp's pass is exponential in the token's length),
    // breadth first, so that past kAmbiguousBudgetMs only longer tokens stay disallowed: a narrower
    // mask, never a wider one.
    const auto& sorted = table_->byCodePoints();
    walkMask(llama_grammar_get_rules(grammar_), stacks, sorted, 0, sorted.size(), 0, *mask,
             std::chrono::steady_clock::now() +
                 std::chrono::microseconds(static_cast<int64_t>(kAmbiguousBudgetMs * 1000)));
  } else if (stacks.size() >= kAmbiguousStacks) {
    // Several stacks: an ambiguous grammar (e.g. `[a-z ]*[a-z ]*[a-z ]*`), where llama.cpp's matcher
    // follows every way of splitting a token among them (exponential in the token's length). Tokens go
    // shortest first, and once the pass has taken kAmbiguousBudgetMs the longer ones stay disallowed: a
    // narrower mask, never a wider one (the output stays valid, spelled with shorter tokens), instead of
    // a step that never ends.
    const llama_grammar_rules& rules = llama_grammar_get_rules(grammar_);
    const auto started = std::chrono::steady_clock::now();
    bool withinBudget = true;
    for (const llama_grammar_candidates& group : table_->byLength()) {
      for (size_t from = 0; from < group.size() && withinBudget; from += 1024) {
        const llama_grammar_candidates part(group.begin() + static_cast<std::ptrdiff_t>(from),
                                            group.begin() + static_cast<std::ptrdiff_t>(std::min(group.size(), from + 1024)));
        allowAccepted(rules, stacks, part, *mask);
        withinBudget = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count() <=
                       kAmbiguousBudgetMs;
      }
      if (!withinBudget) break;
    }
  } else if (!stacks.empty()) {
    // As llama.cpp's llama_grammar_reject_candidates (a token is allowed when some stack accepts it),
    // stack by stack, each over only the candidates whose first character its top accepts (the rest it
    // rejects on that character). A large set is matched in parts on the context's threads (the step's
    // decode is over, its threads idle).
    const llama_grammar_rules& rules = llama_grammar_get_rules(grammar_);
    const size_t threads = static_cast<size_t>(cache_->threads());
    std::vector<uint32_t> rejectedBy(static_cast<size_t>(n), 0);
    uint32_t stackMark = 0;
    llama_grammar_candidates subset;
    for (const llama_grammar_stack& stack : stacks) {
      if (stack.empty()) continue;  // a complete grammar: end-of-generation only (below)
      stackMark++;
      table_->candidatesFor(stack.back(), subset);
      // Tokens an earlier stack already allows need no second look (as llama.cpp passes only the
      // rejects of one stack to the next).
      subset.erase(std::remove_if(subset.begin(), subset.end(),
                                  [&](const llama_grammar_candidate& candidate) {
                                    return maskAllows(*mask, candidate.id);
                                  }),
                   subset.end());
      const size_t parts = subset.size() >= 8192 ? std::max<size_t>(threads, 1) : 1;
      std::vector<llama_grammar_candidates> rejects(parts);
      const auto pass = [&](size_t part) {
        if (parts == 1) {
          rejects[0] = llama_grammar_reject_candidates_for_stack(rules, stack, subset);
          return;
        }
        const size_t from = subset.size() * part / parts;
        const size_t to = subset.size() * (part + 1) / parts;
        const llama_grammar_candidates slice(subset.begin() + static_cast<std::ptrdiff_t>(from),
                                             subset.begin() + static_cast<std::ptrdiff_t>(to));
        rejects[part] = llama_grammar_reject_candidates_for_stack(rules, stack, slice);
      };
      parallelFor(parts, pass);
      for (const llama_grammar_candidates& part : rejects) {
        for (const llama_grammar_candidate& reject : part) rejectedBy[reject.index] = stackMark;
      }
      for (const llama_grammar_candidate& candidate : subset) {
        if (rejectedBy[candidate.index] != stackMark) allow(candidate.id);
      }
    }
  }
  if (mayEnd) {
    for (int32_t id = 0; id < n; id++) {
      if (table_->isEog(id)) allow(id);
    }
  }
  return mask;
}

const TokenMask* Constraint::cachedMask() {
  if (!looked_) {
    current_ = cache_->find(stateKey());
    looked_ = true;
  }
  return current_.get();
}

bool Constraint::allows(int32_t token) {
  if (token < 0 || token >= table_->size()) return false;
  if (awaiting()) return offer(token, false) != Offer::kRefused;
  if (const TokenMask* cached = cachedMask()) return maskAllows(*cached, token);
  if (!table_->wellFormedAfter(token, grammar_->partial_utf8)) return false;
  if (table_->isEog(token)) return canEnd();
  const llama_grammar_candidate* candidate = table_->candidate(token);
  if (candidate == nullptr) return false;
  if (grammar_->partial_utf8.n_remain != 0) return maskAllows(mask(), token);
  const llama_grammar_stacks& stacks = grammar_->stacks;
  if (stacks.empty()) return false;
  if (mergedWalk()) {
    // An ambiguous state: every stack at once, merged after each code point (grammarWalk.h).
    return stacksTake(llama_grammar_get_rules(grammar_), stacks, candidate->code_points, candidate->partial_utf8,
                      nullptr);
  }
  if (stacks.size() >= kAmbiguousStacks && candidate->partial_utf8.n_remain == 0) {
    // An ambiguous state: llama.cpp's acceptance, which merges equal stacks after every character
    // (polynomial), instead of its rejection pass, which follows every split of the token (exponential).
    const llama_grammar_stacks saved = stacks;
    const llama_partial_utf8 savedPartial = grammar_->partial_utf8;
    bool accepted = true;
    try {
      llama_grammar_accept_impl(*grammar_, token);
    } catch (const std::exception&) {
      accepted = false;
    }
    grammar_->stacks = saved;
    grammar_->partial_utf8 = savedPartial;
    return accepted;
  }
  // As llama.cpp's llama_grammar_reject_candidates, for one candidate: rejected when every stack rejects it.
  const llama_grammar_rules& rules = llama_grammar_get_rules(grammar_);
  llama_grammar_candidates rejects = llama_grammar_reject_candidates_for_stack(rules, stacks[0], {*candidate});
  for (size_t i = 1; i < stacks.size() && !rejects.empty(); i++) {
    rejects = llama_grammar_reject_candidates_for_stack(rules, stacks[i], rejects);
  }
  return rejects.empty();
}

const TokenMask& Constraint::mask() {
  if (current_ != nullptr) return *current_;
  const std::string key = stateKey();
  if (!looked_) current_ = cache_->find(key);
  looked_ = true;
  if (current_ == nullptr) {
    const auto started = std::chrono::steady_clock::now();
    current_ = wellFormedOnly(computeMask());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    cache_->recordCompute(ms);
    if (ms > kMaskTimeLimitMs) tooCostly_ = true;
    cache_->store(key, current_);
  }
  return *current_;
}

std::shared_ptr<const TokenMask> Constraint::wellFormedOnly(std::shared_ptr<const TokenMask> mask) const {
  auto out = std::make_shared<TokenMask>(*mask);
  const llama_partial_utf8 partial = grammar_->partial_utf8;
  for (size_t word = 0; word < out->size(); word++) {
    for (uint64_t bits = (*out)[word]; bits != 0; bits &= bits - 1) {
      const int bit = __builtin_ctzll(bits);
      const int32_t token = static_cast<int32_t>(word * 64 + static_cast<size_t>(bit));
      if (!table_->wellFormedAfter(token, partial)) (*out)[word] &= ~(uint64_t{1} << bit);
    }
  }
  return out;
}

bool Constraint::accept(int32_t token) {
  if (awaiting()) return offer(token, true) != Offer::kRefused;
  if (!allows(token)) return false;
  const llama_grammar_candidate* candidate = table_->candidate(token);
  if (candidate != nullptr && grammar_->partial_utf8.n_remain == 0 && mergedWalk()) {
    // An ambiguous state: llama.cpp's acceptance follows each stack through the token on its own (cubic
    // in the stacks here); the merged stacks reach the same set.
    llama_grammar_stacks after;
    if (!stacksTake(llama_grammar_get_rules(grammar_), grammar_->stacks, candidate->code_points,
                    candidate->partial_utf8, &after)) {
      return false;
    }
    grammar_->stacks = std::move(after);
    grammar_->partial_utf8 = candidate->partial_utf8;
    current_.reset();
    looked_ = false;
    return true;
  }
  try {
    llama_grammar_accept_impl(*grammar_, token);
  } catch (const std::exception&) {
    return false;
  }
  current_.reset();
  looked_ = false;
  return true;
}

uint32_t Constraint::forcedChar() const {
  if (awaiting() || grammar_->partial_utf8.n_remain != 0 || grammar_->stacks.empty()) return 0;
  uint32_t next = 0;
  for (const llama_grammar_stack& stack : grammar_->stacks) {
    if (stack.empty()) return 0;
    const llama_grammar_element* element = stack.back();
    if (element->type != LLAMA_GRETYPE_CHAR || element[1].type == LLAMA_GRETYPE_CHAR_ALT ||
        element[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER || element->value == 0 ||
        (next != 0 && element->value != next)) {
      return 0;
    }
    next = element->value;
  }
  return next;
}

bool Constraint::mergedWalk() {
  if (grammar_->stacks.size() < kMergedStacks || grammar_->partial_utf8.n_remain != 0 || grammar_->awaiting_trigger) {
    return false;
  }
  if (tokenElements_ < 0) tokenElements_ = hasTokenElements(llama_grammar_get_rules(grammar_)) ? 1 : 0;
  return tokenElements_ == 0;
}

bool Constraint::forcesNext() const { return forcedChar() != 0; }

bool Constraint::canEnd() {
  if (awaiting()) return true;
  for (const llama_grammar_stack& stack : grammar_->stacks) {
    if (stack.empty()) return true;
  }
  return false;
}

std::string Constraint::forcedText(size_t maxBytes) { return forcedRun(maxBytes, nullptr, nullptr); }

std::string Constraint::forcedRun(size_t maxBytes, llama_grammar_stacks* after, size_t* codePoints) {
  std::string text;
  if (grammar_->partial_utf8.n_remain != 0) return text;
  const llama_grammar_stacks saved = grammar_->stacks;
  while (text.size() < maxBytes) {
    const uint32_t next = forcedChar();
    if (next == 0) break;
    appendUtf8(text, next);
    llama_grammar_accept(grammar_, next);
    if (codePoints != nullptr) ++*codePoints;
  }
  if (after != nullptr) *after = grammar_->stacks;
  grammar_->stacks = saved;
  return text;
}

std::vector<int32_t> Constraint::forcedTokens(size_t maxTokens) {
  std::vector<int32_t> tokens;
  if (maxTokens == 0 || awaiting()) return tokens;
  const std::string text = forcedText(256);
  if (text.empty()) return tokens;
  tokens.resize(text.size() + 8);
  const int32_t count = llama_tokenize(table_->vocab(), text.c_str(), static_cast<int32_t>(text.size()), tokens.data(),
                                       static_cast<int32_t>(tokens.size()), false, false);
  if (count <= 0) return {};
  tokens.resize(static_cast<size_t>(count));
  std::string spelled;
  for (int32_t token : tokens) spelled += table_->piece(token);
  if (spelled != text) tokens = table_->longestMatch(text);
  if (tokens.empty()) return tokens;
  if (tokens.size() > maxTokens) tokens.resize(maxTokens);
  const llama_grammar_stacks savedStacks = grammar_->stacks;
  const llama_partial_utf8 savedPartial = grammar_->partial_utf8;
  for (int32_t token : tokens) {
    if (!accept(token)) {
      grammar_->stacks = savedStacks;
      grammar_->partial_utf8 = savedPartial;
      current_.reset();
      looked_ = false;
      return {};
    }
  }
  return tokens;
}

}  // namespace lmserve

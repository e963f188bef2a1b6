// Guided decoding by token masks: which tokens a grammar allows next, as a bitmask over the vocabulary,
// computed from llama.cpp's grammar engine and cached per grammar state, so that a state seen before (in
// this sequence, or in any earlier request with the same grammar) costs a hash lookup instead of a pass
// over the whole vocabulary. Pure C++ (no Node-API); uses llama.cpp's internal grammar functions of the
// exact build we link (llama-grammar.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llama-grammar.h"

namespace lmserve {

/** One bit per token id, set when the token is allowed. */
using TokenMask = std::vector<uint64_t>;

/** Whether `token` is set in `mask`. */
inline bool maskAllows(const TokenMask& mask, int32_t token) {
  return token >= 0 && (mask[static_cast<size_t>(token) >> 6] >> (static_cast<uint32_t>(token) & 63)) & 1u;
}

/**
 * Every token of a vocabulary decoded once into the form llama.cpp's grammar matcher takes (code points,
 * 0-terminated, and the trailing partial UTF-8 sequence), from a fresh UTF-8 state. Built once per model
 * (about 60 ms and 3 MB for a 152K vocabulary).
 */
class TokenTable {
 public:
  explicit TokenTable(const llama_vocab* vocab);

  int32_t size() const { return nVocab_; }
  const llama_vocab* vocab() const { return vocab_; }
  /** Whether the token ends generation (EOS, EOT, ...): allowed only where the grammar may end. */
  bool isEog(int32_t token) const { return eog_[static_cast<size_t>(token)] != 0; }
  /**
   * The candidates a grammar stack whose top is `top` can accept as far as their first code point goes
   * (the others it rejects on the first character): those whose first code point is in the top's
   * character class, and those with no complete first code point (a partial UTF-8 sequence). Every
   * candidate for a token-level element. Replaces `out`.
   */
  void candidatesFor(const llama_grammar_element* top, llama_grammar_candidates& out) const;
  /**
   * Tokens whose text decodes to whole code points (no partial UTF-8 tail), as (text, id), sorted by
   * text bytes: the tokens that are a prefix of a text, or start with it, are ranges of it.
   */
  const std::vector<std::pair<std::string_view, int32_t>>& sortedPieces() const { return sortedPieces_; }
  /**
   * Every candidate grouped by its number of code points, shortest first (a pass that may have to stop
   * early does the cheap, short tokens first).
   */
  const std::vector<llama_grammar_candidates>& byLength() const { return byLength_; }
  /**
   * Every candidate sorted by its code points (a token before the longer ones it starts; equal code
   * points by id): the tokens that share a prefix are ranges of it. Built on first use (the merged
   * walk of ambiguous grammars, grammarWalk.h).
   */
  const std::vector<const llama_grammar_candidate*>& byCodePoints() const;
  /** Candidates whose text ends in a partial or invalid UTF-8 sequence (not in sortedPieces). */
  const llama_grammar_candidates& partialTails() const { return partialTails_; }
  /** The token's candidate for the grammar matcher, or null for an EOG token or one without text. */
  const llama_grammar_candidate* candidate(int32_t token) const { return byId_[static_cast<size_t>(token)]; }
  /** The token's text as llama.cpp's grammar sees it (special tokens rendered). */
  const std::string& piece(int32_t token) const { return pieces_[static_cast<size_t>(token)]; }
  /**
   * `text` as the longest non-control tokens that spell it, greedily from the left (normal tokens before
   * byte tokens of the same text); empty when some byte has no token.
   */
  std::vector<int32_t> longestMatch(const std::string& text) const;
  /**
   * Whether the token's bytes may follow the UTF-8 state `partial` (llama.cpp's decoder state after the
   * text so far) in well-formed UTF-8 (RFC 3629: no overlong form, no surrogate, nothing above U+10FFFF,
   * continuation bytes where a sequence needs them); a token may end inside a sequence. llama.cpp's
   * decoder takes any such bytes, so a grammar would allow tokens whose text is not valid UTF-8 (which
   * the output then shows as U+FFFD). EOG and empty tokens: true.
   */
  bool wellFormedAfter(int32_t token, const llama_partial_utf8& partial) const;

 private:
  const llama_vocab* vocab_;
  int32_t nVocab_;
  std::vector<uint8_t> eog_;
  std::vector<std::string> pieces_;
  /**
   * Per token, bit k (k = 0..3) set when its bytes from the k-th on are well-formed UTF-8 from a fresh
   * state (possibly ending inside a sequence), and the number of continuation bytes (80-BF) it starts with.
   */
  std::vector<uint8_t> wellFormedFrom_;
  std::vector<uint8_t> leadingContinuations_;
  std::vector<uint32_t> codePoints_;
  /** One candidate per token that has text (not EOG, not empty), by id. */
  llama_grammar_candidates candidates_;
  std::vector<const llama_grammar_candidate*> byId_;
  /** Candidates with a complete first code point, by that code point; the code points, in the same order. */
  llama_grammar_candidates byFirst_;
  std::vector<uint32_t> firsts_;
  /** Candidates without a complete first code point. */
  llama_grammar_candidates noFirst_;
  std::vector<std::pair<std::string_view, int32_t>> sortedPieces_;
  std::vector<llama_grammar_candidates> byLength_;
  llama_grammar_candidates partialTails_;
  mutable std::once_flag byCodePointsOnce_;
  mutable std::vector<const llama_grammar_candidate*> byCodePoints_;
  /** Non-control tokens by their text, and the longest such text in bytes. */
  std::unordered_map<std::string, int32_t> byPiece_;
  size_t longestPiece_ = 0;
};

/**
 * The masks of every grammar a context has seen, keyed by (grammar text, grammar state), in one LRU
 * bounded by bytes. Thread-safe: a step samples its sequences on several threads.
 */
class MaskCache {
 public:
  /**
   * @param budgetBytes the masks' memory bound (each mask is n_vocab / 8 bytes).
   * @param threads threads one mask computation may use (the context's).
   */
  MaskCache(size_t budgetBytes, int32_t threads) : budget_(budgetBytes), threads_(std::max(threads, 1)) {}

  /** Threads one mask computation may use. */
  int32_t threads() const { return threads_; }

  /**
   * A small number naming the grammar `text` in keys: equal texts get equal ids while the cache lives.
   * Past 4,096 grammars every mask is dropped and numbering goes on (old keys can never match again).
   */
  uint64_t grammarId(const std::string& text);

  /** The cached mask for `key`, or null. Marks it most recently used. */
  std::shared_ptr<const TokenMask> find(const std::string& key);
  /** Stores `mask` under `key`, evicting the least recently used masks beyond the budget. */
  void store(const std::string& key, std::shared_ptr<const TokenMask> mask);

  /** The cache's counters since creation, read together. */
  struct Stats {
    /** Lookups that found a mask / found none. */
    uint64_t hits = 0;
    uint64_t misses = 0;
    /** Memory the masks and their keys hold. */
    size_t bytes = 0;
    /** Masks computed (each a pass over the vocabulary), and the milliseconds that took. */
    uint64_t computed = 0;
    double computeMs = 0;
  };
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {hits_, misses_, bytes_, computed_, computeMs_};
  }
  /** Adds the time of one mask computation. */
  void recordCompute(double ms) {
    std::lock_guard<std::mutex> lock(mutex_);
    computeMs_ += ms;
    computed_++;
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const TokenMask>>;
  mutable std::mutex mutex_;
  size_t budget_;
  int32_t threads_;
  size_t bytes_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
  double computeMs_ = 0;
  uint64_t computed_ = 0;
  std::list<Entry> order_;
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::unordered_map<std::string, uint64_t> grammarIds_;
  uint64_t nextGrammarId_ = 1;
};

/**
 * Where a lazy grammar starts (llama.cpp's `grammar_lazy` with trigger words, common/chat.cpp): the
 * output is free text until one of `triggers` appears in it, outside a thinking block; from the first
 * byte of that trigger on, the grammar's root matches the rest of the output (the trigger's own text
 * included). The chat serving uses it for `strict` tools under `tool_choice: "auto"`: the triggers are
 * the openings the family's tool parser reads a call from, the grammar writes the call(s).
 */
struct LazyStart {
  /** The texts that start the grammar (bytes, as the tokens' pieces spell them); not empty. */
  std::vector<std::string> triggers;
  /**
   * A thinking block the triggers are not looked for in (`blockClose` empty: none): the output is inside
   * it from the start when `startsInBlock`, else when it starts with `blockOpen`, until `blockClose`.
   */
  std::string blockOpen;
  std::string blockClose;
  bool startsInBlock = false;
};

/**
 * One sequence's grammar: its llama.cpp grammar state, the allowed-token mask of the current state (from
 * the cache or one pass over the vocabulary), token acceptance, and the text the grammar forces next.
 * Not thread-safe; one per sequence.
 */
class Constraint {
 public:
  /** Stacks from which a state counts as ambiguous (see computeMask). */
  static constexpr size_t kAmbiguousStacks = 3;
  /** Milliseconds an ambiguous state's pass may take before the longer tokens stay disallowed. */
  static constexpr double kAmbiguousBudgetMs = 100;
  /**
   * Stacks from which an ambiguous state is matched with merged stacks (grammarWalk.h). Below it,
   * llama.cpp's pass, which groups tokens by character class, decides more tokens within the budget
   * (on a 152K vocabulary, `[a-z ]*` 4 times: 41,689 tokens in 100 ms against 23,441); above it, the
   * stacks re-create each other and the merged walk wins by far (`("a"|"b"|"")` 10 times, 21 stacks:
   * the whole mask in 12 ms against a cut one in 116 ms).
   */
  static constexpr size_t kMergedStacks = 16;
  /**
   * Milliseconds one mask computation may take (llama.cpp's pass cannot be cut short) before the
   * constraint counts as too costly: the sampler then ends the sequence with an error rather than
   * hold every later step of the other sequences (issue 31).
   */
  static constexpr double kMaskTimeLimitMs = 1000;

  /**
   * Parses `gbnf` from rule `root` against the table's vocabulary.
   * @throws std::runtime_error with llama.cpp's message when the grammar does not parse.
   */
  Constraint(std::shared_ptr<const TokenTable> table, std::shared_ptr<MaskCache> cache, const std::string& gbnf,
             const std::string& root);
  /**
   * A lazy grammar (see LazyStart): constrains nothing until a trigger appears. @throws as above, and
   * std::runtime_error when `lazy` has no trigger or an empty one.
   */
  Constraint(std::shared_ptr<const TokenTable> table, std::shared_ptr<MaskCache> cache, const std::string& gbnf,
             const std::string& root, LazyStart lazy);

  /** What offering a token to a lazy grammar that awaits its trigger does (see offer). */
  enum class Offer {
    /** No trigger is complete with it: free text. */
    kFree,
    /** It completes a trigger and the grammar takes the text from the trigger on: the grammar starts. */
    kStarts,
    /** It completes a trigger but the grammar refuses the text from the trigger on. */
    kRefused,
  };

  /** Whether the grammar is lazy and its trigger has not appeared yet (mask() etc. do not apply then). */
  bool awaiting() const { return lazy_ != nullptr && phase_ != Phase::kActive; }

  /**
   * While awaiting: what `token` would do (an end-of-generation token is always kFree). With `commit`,
   * kFree records its text and kStarts starts the grammar with the text from the trigger on; kRefused
   * changes nothing either way.
   */
  Offer offer(int32_t token, bool commit);

  /**
   * While awaiting: whether `token`'s text could complete a trigger at all (it holds some trigger's last
   * byte); a cheap filter before offer.
   */
  bool mayTrigger(int32_t token) const;
  ~Constraint();
  Constraint(const Constraint&) = delete;
  Constraint& operator=(const Constraint&) = delete;

  /**
   * The tokens allowed in the current state (EOG only where the grammar may end): from the cache, else
   * computed by a pass over the vocabulary and cached.
   */
  const TokenMask& mask();

  /** The current state's mask if the cache has it (no computation), else null. */
  const TokenMask* cachedMask();

  /**
   * Whether `token` is allowed now: the cached mask's bit, else llama.cpp's check of that one token
   * (microseconds; no mask is computed).
   */
  bool allows(int32_t token);

  /** Advances the grammar by `token`. @returns false, changing nothing, when it is not allowed. */
  bool accept(int32_t token);

  /**
   * The text the grammar allows as the only continuation from the current state, up to `maxBytes` bytes
   * (UTF-8): empty where more than one character (or the end) is possible. Does not change the state.
   */
  std::string forcedText(size_t maxBytes);

  /**
   * Jump-forward: {@link forcedText} as tokens, at most `maxTokens` of them, accepted into the grammar:
   * its canonical tokenization (llama_tokenize, no special tokens) when that spells the text exactly,
   * else (a SentencePiece tokenizer that adds a leading space) TokenTable::longestMatch. Empty, changing
   * nothing, where nothing is forced.
   */
  std::vector<int32_t> forcedTokens(size_t maxTokens);

  /**
   * Whether a mask computation took longer than kMaskTimeLimitMs, or left no token allowed where the
   * grammar cannot end: the sequence cannot go on under this grammar within the bounds.
   */
  bool tooCostly() const { return tooCostly_; }

  /** Whether the grammar may end here (some stack is empty); true while a lazy grammar awaits its trigger. */
  bool canEnd();

  /**
   * Whether the grammar forces the next character (every stack expects the same single one), where
   * mask() is cheap (computeForcedMask) even when the state is new.
   */
  bool forcesNext() const;

 private:
  /** The cache key of the current state: grammar, partial UTF-8 and the stacks as (rule, offset) pairs. */
  std::string stateKey() const;
  /** The mask of the current state: computeForcedMask where the grammar forces text, else a pass over the vocabulary. */
  std::shared_ptr<const TokenMask> computeMask();
  /** `mask` without the tokens whose text cannot follow the current UTF-8 state (see TokenTable::wellFormedAfter). */
  std::shared_ptr<const TokenMask> wellFormedOnly(std::shared_ptr<const TokenMask> mask) const;
  /**
   * The mask where the grammar forces `forced` (`codePoints` code points long; `after`: the stacks past
   * it): the tokens that spell a prefix of it, the tokens that start with it and whose rest the grammar
   * takes from `after`, and the tokens with a partial UTF-8 tail that llama.cpp's matcher takes now.
   * Far cheaper than a pass when the forced text starts with a common character (a space).
   */
  std::shared_ptr<const TokenMask> computeForcedMask(const std::string& forced, size_t codePoints,
                                                     const llama_grammar_stacks& after) const;
  /**
   * The character every stack expects next (a single character, no alternatives, no end), or 0 where
   * the next character is not forced.
   */
  uint32_t forcedChar() const;
  /**
   * forcedText, also giving the stacks past it and its length in code points (either may be null).
   * Leaves the state as it was.
   */
  std::string forcedRun(size_t maxBytes, llama_grammar_stacks* after, size_t* codePoints);

  /** Where a lazy grammar's scan of the output stands (kActive: the grammar constrains). */
  enum class Phase { kStart, kBlock, kAnswer, kActive };
  /**
   * The scan of the output past `tail_` + `piece`: the phase after it, the tail to keep, and the text
   * from the first trigger on when one is complete (then the phase is kActive).
   */
  struct Scan {
    Phase phase;
    std::string tail;
    std::string started;
  };
  Scan scan(const std::string& piece) const;
  /** Feeds `text` to the grammar; false, changing nothing, when it does not take it all. */
  bool acceptText(const std::string& text);

  std::shared_ptr<const TokenTable> table_;
  std::shared_ptr<MaskCache> cache_;
  llama_grammar* grammar_ = nullptr;
  /** The lazy start, or null for a grammar that constrains from the first token. */
  std::unique_ptr<LazyStart> lazy_;
  Phase phase_ = Phase::kActive;
  /** The end of the output scanned so far that may still be part of a marker (awaiting only). */
  std::string tail_;
  /** The longest trigger in bytes, and each trigger's last byte. */
  size_t longestTrigger_ = 0;
  std::string triggerEnds_;
  /** The grammar text's cache key prefix. */
  std::string grammarKey_;
  /** Each rule's element range in this grammar instance, by start address (for the state key). */
  std::vector<std::pair<const llama_grammar_element*, uint32_t>> ruleStarts_;
  std::shared_ptr<const TokenMask> current_;
  /** Whether the cache was asked for the current state (current_ is then its answer, possibly null). */
  bool looked_ = false;
  /**
   * Whether the current state is matched with merged stacks (grammarWalk.h): an ambiguous state
   * (kMergedStacks or more stacks) of a grammar without token elements, whole code points so far.
   */
  bool mergedWalk();
  /** Whether the grammar has token elements: -1 until first asked. */
  int8_t tokenElements_ = -1;
  bool tooCostly_ = false;
};

/** Where a sampler's grammar gets its vocabulary table and mask cache (a context's, built on first use). */
struct GrammarHome {
  std::function<std::shared_ptr<const TokenTable>()> table;
  std::shared_ptr<MaskCache> cache;
};

}  // namespace lmserve

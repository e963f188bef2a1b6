// Grammar matching with merged parse stacks, for ambiguous grammars (issue 31): llama.cpp's matcher
// follows every parse stack on its own through a token (llama_grammar_reject_candidates_for_stack and
// llama_grammar_accept_token), which for a grammar such as `("a"|"b"|"")` repeated 300 times (601 stacks,
// each of whose steps re-creates the others) costs seconds per token, exponential in the token's length.
// Here every step takes the set of all stacks at once, deduplicated by hash (the same set llama.cpp's
// llama_grammar_accept reaches, in another order), and the vocabulary is walked as a trie of code points,
// breadth first, so that a token prefix shared by many tokens is matched once. Pure C++ over llama.cpp's
// internal grammar types (llama-grammar.h); grammars with token elements (`<[id]>`) are not handled here.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "llama-grammar.h"

namespace lmserve {

/** Whether any rule holds a token element (`<[id]>`, `!<[id]>`), which the merged walk does not take. */
bool hasTokenElements(const llama_grammar_rules& rules);

/**
 * The stacks after code point `chr` from every stack of `stacks` (as llama.cpp's llama_grammar_accept:
 * each stack whose top character class takes `chr`, advanced to its next terminals), deduplicated, into
 * `out` (replaced). Expansions shared by several stacks are done once. Empty when no stack takes `chr`.
 */
void stepStacks(const llama_grammar_rules& rules, const llama_grammar_stacks& stacks, uint32_t chr,
                llama_grammar_stacks& out);

/**
 * Whether some stack of `stacks` takes a token whose code points (0-terminated) are `codePoints` and
 * whose text ends in the partial UTF-8 sequence `partial` (n_remain 0: none), from a fresh UTF-8 state:
 * llama.cpp's acceptance (a token is allowed when some parse takes all of it). With `after`, also the
 * stacks past its whole code points (set only when it is taken).
 */
bool stacksTake(const llama_grammar_rules& rules, const llama_grammar_stacks& stacks, const uint32_t* codePoints,
                llama_partial_utf8 partial, llama_grammar_stacks* after);

/**
 * Sets in `mask` (one bit per token id) the tokens of `sorted[from, to)` that some stack of `stacks`
 * takes, where `sorted` is every candidate token sorted by code points and the range's tokens share
 * their first `depth` code points (already taken into `stacks`). Breadth first: all tokens of `depth +
 * k` code points are decided before any longer one. Past `deadline`, checked only beyond the first
 * level (the tokens one code point past `depth` and those ending in a partial UTF-8 sequence there are
 * always decided), the longer tokens stay unset: a narrower mask, never a wider one.
 * @returns true when every token of the range was decided (the deadline was not hit).
 */
bool walkMask(const llama_grammar_rules& rules, const llama_grammar_stacks& stacks,
              const std::vector<const llama_grammar_candidate*>& sorted, size_t from, size_t to, size_t depth,
              std::vector<uint64_t>& mask, std::chrono::steady_clock::time_point deadline);

}  // namespace lmserve

#include "grammarWalk.h"

#include <algorithm>
#include <limits>
#include <unordered_set>
#include <utility>

namespace lmserve {

namespace {

/** Whether `pos` ends an alternative (llama.cpp's llama_grammar_is_end_of_sequence). */
bool endsAlternative(const llama_grammar_element* pos) {
  return pos->type == LLAMA_GRETYPE_END || pos->type == LLAMA_GRETYPE_ALT;
}

/** Whether `pos` is a character class (CHAR, CHAR_NOT, CHAR_ANY), the tops a code point can match. */
bool isCharClass(const llama_grammar_element* pos) {
  return pos->type == LLAMA_GRETYPE_CHAR || pos->type == LLAMA_GRETYPE_CHAR_NOT || pos->type == LLAMA_GRETYPE_CHAR_ANY;
}

/**
 * Whether the character class at `pos` takes `chr`, and the element past the class (the semantics of
 * llama.cpp's llama_grammar_match_char: chars and ranges joined by CHAR_ALT, negated for CHAR_NOT).
 */
std::pair<bool, const llama_grammar_element*> classTakes(const llama_grammar_element* pos, uint32_t chr) {
  const bool positive = pos->type != LLAMA_GRETYPE_CHAR_NOT;
  bool found = false;
  do {
    if (pos[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
      found = found || (pos->value <= chr && chr <= pos[1].value);
      pos += 2;
    } else if (pos->type == LLAMA_GRETYPE_CHAR_ANY) {
      found = true;
      pos += 1;
    } else {
      found = found || pos->value == chr;
      pos += 1;
    }
  } while (pos->type == LLAMA_GRETYPE_CHAR_ALT);
  return {found == positive, pos};
}

/**
 * Whether some completion of the partial UTF-8 sequence `partial` can satisfy the class at `pos` (the
 * semantics of llama.cpp's llama_grammar_match_partial_char).
 */
bool classTakesPartial(const llama_grammar_element* pos, llama_partial_utf8 partial) {
  const bool positive = pos->type != LLAMA_GRETYPE_CHAR_NOT;
  if (partial.n_remain < 0 || (partial.n_remain == 1 && partial.value < 2)) return false;
  uint32_t low = partial.value << (partial.n_remain * 6);
  const uint32_t high = low | ((1u << (partial.n_remain * 6)) - 1);
  if (low == 0) {
    if (partial.n_remain == 2) low = 1u << 11;
    if (partial.n_remain == 3) low = 1u << 16;
  }
  do {
    if (pos[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
      if (pos->value <= high && low <= pos[1].value) return positive;
      pos += 2;
    } else if (pos->type == LLAMA_GRETYPE_CHAR_ANY) {
      return true;
    } else {
      if (low <= pos->value && pos->value <= high) return positive;
      pos += 1;
    }
  } while (pos->type == LLAMA_GRETYPE_CHAR_ALT);
  return !positive;
}

/** A stack's hash: its element addresses. */
struct StackHash {
  size_t operator()(const llama_grammar_stack& stack) const {
    size_t hash = stack.size();
    for (const llama_grammar_element* element : stack) {
      hash = (hash ^ reinterpret_cast<uintptr_t>(element)) * 0x100000001b3ull;
    }
    return hash;
  }
};
using StackSet = std::unordered_set<llama_grammar_stack, StackHash>;

/**
 * Expands `start` to the stacks whose top is a terminal (or that are empty), as llama.cpp's
 * llama_grammar_advance_stack, appending each one not in `seen` to `out`; every stack met on the way
 * goes into `seen`, so that the expansions several starts share are done once.
 */
void expandInto(const llama_grammar_rules& rules, llama_grammar_stack start, StackSet& seen,
                llama_grammar_stacks& out) {
  std::vector<llama_grammar_stack> todo;
  todo.push_back(std::move(start));
  while (!todo.empty()) {
    llama_grammar_stack current = std::move(todo.back());
    todo.pop_back();
    if (!seen.insert(current).second) continue;
    if (current.empty() || current.back()->type != LLAMA_GRETYPE_RULE_REF) {
      out.push_back(std::move(current));
      continue;
    }
    const llama_grammar_element* pos = current.back();
    const llama_grammar_element* alternative = rules[pos->value].data();
    while (true) {
      llama_grammar_stack next(current.begin(), current.end() - 1);
      if (!endsAlternative(pos + 1)) next.push_back(pos + 1);
      if (!endsAlternative(alternative)) next.push_back(alternative);
      todo.push_back(std::move(next));
      while (!endsAlternative(alternative)) alternative++;
      if (alternative->type != LLAMA_GRETYPE_ALT) break;
      alternative++;
    }
  }
}

/** Whether some stack's top class takes `chr` (then stepStacks gives at least one stack). */
bool someTopTakes(const llama_grammar_stacks& stacks, uint32_t chr) {
  for (const llama_grammar_stack& stack : stacks) {
    if (!stack.empty() && isCharClass(stack.back()) && classTakes(stack.back(), chr).first) return true;
  }
  return false;
}

/**
 * Whether a token that ends (after the code points `stacks` have taken) in the partial UTF-8 sequence
 * `partial` is taken by some stack (llama.cpp's rejection: an empty stack or a token-element top refuses
 * it; a class top takes it when some completion of the sequence can satisfy it).
 */
bool someTopTakesPartial(const llama_grammar_stacks& stacks, llama_partial_utf8 partial) {
  for (const llama_grammar_stack& stack : stacks) {
    if (!stack.empty() && isCharClass(stack.back()) && classTakesPartial(stack.back(), partial)) return true;
  }
  return false;
}

/**
 * The code points some top of `stacks` takes, as sorted disjoint inclusive ranges: the union of the
 * tops' character classes (a negated class as its complement), so that a node of the walk answers each
 * next code point with a binary search instead of a look at every stack.
 */
std::vector<std::pair<uint32_t, uint32_t>> topRanges(const llama_grammar_stacks& stacks) {
  constexpr uint32_t kMax = 0xffffffffu;
  std::vector<std::pair<uint32_t, uint32_t>> all;
  std::vector<std::pair<uint32_t, uint32_t>> one;
  for (const llama_grammar_stack& stack : stacks) {
    if (stack.empty() || !isCharClass(stack.back())) continue;
    const llama_grammar_element* pos = stack.back();
    const bool negated = pos->type == LLAMA_GRETYPE_CHAR_NOT;
    one.clear();
    do {
      if (pos[1].type == LLAMA_GRETYPE_CHAR_RNG_UPPER) {
        if (pos->value <= pos[1].value) one.emplace_back(pos->value, pos[1].value);
        pos += 2;
      } else if (pos->type == LLAMA_GRETYPE_CHAR_ANY) {
        one.emplace_back(0, kMax);
        pos += 1;
      } else {
        one.emplace_back(pos->value, pos->value);
        pos += 1;
      }
    } while (pos->type == LLAMA_GRETYPE_CHAR_ALT);
    if (!negated) {
      all.insert(all.end(), one.begin(), one.end());
      continue;
    }
    std::sort(one.begin(), one.end());
    uint64_t next = 0;
    for (const auto& [low, high] : one) {
      if (low > next) all.emplace_back(static_cast<uint32_t>(next), low - 1);
      next = std::max<uint64_t>(next, uint64_t{high} + 1);
    }
    if (next <= kMax) all.emplace_back(static_cast<uint32_t>(next), kMax);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& range : all) {
    if (!merged.empty() && uint64_t{range.first} <= uint64_t{merged.back().second} + 1) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

/** Whether `chr` lies in one of the sorted disjoint `ranges`. */
bool inRanges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, uint32_t chr) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(chr, std::numeric_limits<uint32_t>::max()));
  return it != ranges.begin() && (it - 1)->second >= chr;
}

}  // namespace

bool hasTokenElements(const llama_grammar_rules& rules) {
  for (const llama_grammar_rule& rule : rules) {
    for (const llama_grammar_element& element : rule) {
      if (element.type == LLAMA_GRETYPE_TOKEN || element.type == LLAMA_GRETYPE_TOKEN_NOT) return true;
    }
  }
  return false;
}

void stepStacks(const llama_grammar_rules& rules, const llama_grammar_stacks& stacks, uint32_t chr,
                llama_grammar_stacks& out) {
  out.clear();
  StackSet seen;
  for (const llama_grammar_stack& stack : stacks) {
    if (stack.empty() || !isCharClass(stack.back())) continue;
    const auto [takes, past] = classTakes(stack.back(), chr);
    if (!takes) continue;
    llama_grammar_stack next(stack.begin(), stack.end() - 1);
    if (!endsAlternative(past)) next.push_back(past);
    expandInto(rules, std::move(next), seen, out);
  }
}

bool stacksTake(const llama_grammar_rules& rules, const llama_grammar_stacks& stacks, const uint32_t* codePoints,
                llama_partial_utf8 partial, llama_grammar_stacks* after) {
  if (codePoints[0] == 0) {
    if (partial.n_remain == 0 || !someTopTakesPartial(stacks, partial)) return false;
    if (after != nullptr) *after = stacks;
    return true;
  }
  llama_grammar_stacks current = stacks;
  llama_grammar_stacks next;
  for (const uint32_t* chr = codePoints; *chr != 0; chr++) {
    // The last code point of a token without a partial tail needs only a top that takes it.
    if (chr[1] == 0 && partial.n_remain == 0 && after == nullptr) return someTopTakes(current, *chr);
    stepStacks(rules, current, *chr, next);
    if (next.empty()) return false;
    current.swap(next);
  }
  if (partial.n_remain != 0 && !someTopTakesPartial(current, partial)) return false;
  if (after != nullptr) *after = std::move(current);
  return true;
}

bool walkMask(const llama_grammar_rules& rules, const llama_grammar_stacks& stacks,
              const std::vector<const llama_grammar_candidate*>& sorted, size_t from, size_t to, size_t depth,
              std::vector<uint64_t>& mask, std::chrono::steady_clock::time_point deadline) {
  struct Node {
    llama_grammar_stacks stacks;
    size_t from;
    size_t to;
  };
  const auto allow = [&](int32_t id) { mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  std::vector<Node> level;
  level.push_back({stacks, from, to});
  for (size_t at = depth; !level.empty(); at++) {
    std::vector<Node> deeper;
    for (Node& node : level) {
      if (at > depth && std::chrono::steady_clock::now() > deadline) return false;
      const std::vector<std::pair<uint32_t, uint32_t>> takes = topRanges(node.stacks);
      size_t i = node.from;
      // Tokens whose whole code points end here (sorted first): the ones with a partial UTF-8 tail need
      // a top that can take it; the others were decided one level up.
      for (; i < node.to && sorted[i]->code_points[at] == 0; i++) {
        const llama_grammar_candidate& token = *sorted[i];
        if (token.partial_utf8.n_remain != 0 && someTopTakesPartial(node.stacks, token.partial_utf8)) allow(token.id);
      }
      while (i < node.to) {
        const uint32_t chr = sorted[i]->code_points[at];
        size_t end = i;
        while (end < node.to && sorted[end]->code_points[at] == chr) end++;
        if (inRanges(takes, chr)) {
          bool longer = false;
          for (size_t k = i; k < end; k++) {
            const llama_grammar_candidate& token = *sorted[k];
            if (token.code_points[at + 1] == 0 && token.partial_utf8.n_remain == 0) {
              allow(token.id);
            } else {
              longer = true;
            }
          }
          if (longer) {
            Node child{{}, i, end};
            stepStacks(rules, node.stacks, chr, child.stacks);
            if (!child.stacks.empty()) deeper.push_back(std::move(child));
          }
        }
        i = end;
      }
    }
    level.swap(deeper);
  }
  return true;
}

}  // namespace lmserve

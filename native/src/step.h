// One step's plan and results, pure C++ (no Node-API): what the step worker reads out of the JS typed
// arrays of `step(...)` and what it hands back. OutputKind's numbers are the ones src/engine/native.ts's
// OutputKind sends; the two lists change together.
#pragma once

#include <cstdint>
#include <vector>

namespace lmserve {

/** What a step does with one output row (the `kinds` numbers of src/engine/native.ts's NativeStepInput). */
enum class OutputKind : int32_t {
  /** Sample the row's sequence (its sampler draws the next token). */
  Sample = 0,
  /** Score `targets[i]` against the row's raw logits: a prompt logprob. */
  PromptLogprob = 1,
  /** Return the row's final hidden state (an embedding row). */
  Embedding = 2,
};

/** What one step asks for, copied out of the JS typed arrays. */
struct StepPlan {
  std::vector<int32_t> tokens, positions, seqs;
  /** Batch rows whose logits are read, in order. */
  std::vector<int32_t> outputRows;
  /** Per output: what to do with its row. */
  std::vector<OutputKind> kinds;
  /** Per output: the token a PromptLogprob output scores (ignored by the others). */
  std::vector<int32_t> targets;
  /** Per output: top logprobs to report (-1: no logprobs at all). */
  std::vector<int32_t> topN;
};

/** What one step returns per output. */
struct StepResult {
  std::vector<int32_t> tokens, ranks;
  std::vector<float> logprobs;
  int32_t stride = 0;
  std::vector<int32_t> topIds;
  std::vector<float> topLogprobs;
  /** Embeddings of Embedding outputs, `embdStride` floats each (0 when the step has none). */
  int32_t embdStride = 0;
  std::vector<float> embeddings;
  /** Milliseconds in llama_decode and in sampling/scoring the outputs. */
  double decodeMs = 0;
  double sampleMs = 0;
};

}  // namespace lmserve

// A llama.cpp context with one sequence per slot and the work on it, pure C++ (no Node-API): the step
// (one batched llama_decode, then every output row sampled, scored or copied on the context's threads),
// pooled embeddings, image chunks, per-sequence samplers, LoRA adapters and what llama.cpp reported at
// creation. engine.cpp's JS `Context` parses the options, creates the llama_context and runs this class's
// work on worker threads; nothing here touches a JS value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "constraint.h"
#include "llama.h"
#include "mtmd.h"
#include "sampler.h"
#include "step.h"

namespace lmserve {

class Context {
 public:
  /**
   * Takes `ctx`, created from `model` with `params` while llama.cpp's info lines were kept in
   * `creationLog` (read for the KV cache bytes and flash attention); attaches a CPU threadpool of
   * `threads`; `pooled`: a pooled-embeddings context (only runEncode); `maskCacheBytes` bounds the
   * guided-decoding mask cache.
   */
  Context(const llama_model* model, llama_context* ctx, const llama_context_params& params,
          const std::string& creationLog, int32_t threads, bool pooled, size_t maskCacheBytes);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /** The step's work on the worker thread: one llama_decode, then every output row sampled. Returns 0, or non-zero with `error` set. */
  int runStep(const StepPlan& plan, StepResult& result, std::string& error);

  /**
   * The pooled-embedding work of `encode` on the worker thread: one batch of whole sequences (sequence i
   * is `lengths[i]` tokens of `tokens`, positions from 0, sequence id i), one llama_decode (an encoder-only
   * model's runs llama_encode), then llama.cpp's pooled vector of each sequence (for rank pooling, the
   * classifier's `n_cls_out` scores). Returns 0, or non-zero with `error` set.
   */
  int runEncode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& lengths, std::vector<float>& out,
                int32_t& stride, double& ms, std::string& error);

  /** Evaluates one image chunk of `seq` from position `nPast` (encoder, then the embeddings' decode). */
  int evalImage(mtmd_context* projector, const mtmd_input_chunk* chunk, int32_t seq, int32_t nPast,
                int32_t& newNPast);

  /** The number of sequences (slots); sequence ids are 0 .. nSeqMax() - 1. */
  size_t nSeqMax() const { return samplers_.size(); }
  /** The sampler of `seq` (a valid id), or nullptr when it has none. */
  SequenceSampler* sampler(int32_t seq) const { return samplers_[static_cast<size_t>(seq)].get(); }
  /** Gives `seq` (a valid id) a sampler; nullptr releases it. */
  void setSampler(int32_t seq, std::unique_ptr<SequenceSampler> sampler) {
    samplers_[static_cast<size_t>(seq)] = std::move(sampler);
  }
  /** Drops the KV cells of `seq` at positions [from, to) (to < 0: to the end); llama.cpp's answer. */
  bool removeTokens(int32_t seq, int32_t from, int32_t to);
  /** The vocabulary table and mask cache this context's grammars share. */
  const GrammarHome& grammarHome() const { return grammarHome_; }

  /** Sets the LoRA adapters (of this context's model) the following steps run under, each at its scale. */
  void setAdapters(std::vector<llama_adapter_lora*> adapters, std::vector<float> scales);
  const std::vector<llama_adapter_lora*>& adapters() const { return adapters_; }
  const std::vector<float>& adapterScales() const { return adapterScales_; }

  llama_context* get() const { return ctx_; }
  const llama_model* model() const { return model_; }
  const llama_vocab* vocab() const { return vocab_; }
  int32_t nVocab() const { return nVocab_; }
  int32_t nBatch() const { return nBatch_; }
  /** True for a pooled-embeddings context: only runEncode runs on it. */
  bool pooled() const { return pooled_; }
  ggml_type typeK() const { return typeK_; }
  ggml_type typeV() const { return typeV_; }
  /** Whether the context runs flash attention (after llama.cpp resolved "auto"). */
  bool flashAttn() const { return flashAttn_; }
  /** Bytes of the K and V caches, from llama.cpp's report at creation (0 for a model without a KV cache). */
  int64_t kBytes() const { return kBytes_; }
  int64_t vBytes() const { return vBytes_; }

  /** The model's attention head size for K ("key_length") or V ("value_length"): the GGUF's, else n_embd / n_head; 0 when unknown. */
  static int64_t headSize(const llama_model* model, const char* field);

 private:
  /** Samples (OutputKind::Sample), scores (PromptLogprob) or copies the embedding of (Embedding) output `i` of a decoded step into `result`; false with `error` set on failure. */
  bool scoreOutput(const StepPlan& plan, size_t i, StepResult& result, std::vector<float>& masked,
                   std::string& error);

  /**
   * Reads what llama.cpp reported while creating the context: the KV caches' bytes (each
   * "llama_kv_cache: size = … K (type): X MiB, V (type): Y MiB" line, 0.01 MiB resolution; a
   * sliding-window model has two) and whether flash attention is on ("auto" is resolved by a probe that
   * logs "Flash Attention enabled"; a quantized V cache forces it on).
   */
  void readCacheReport(const std::string& text, const llama_context_params& params);

  /**
   * A persistent ggml threadpool for the CPU backend, as llama.cpp's own tools attach one: without it the
   * prebuilt CPU backend (built without OpenMP) starts and joins its threads on every decode, which cost
   * about 10 ms per one-token step here (36 against 52 tok/s for llama-server at concurrency 1).
   */
  void attachThreadpool(int32_t threads);

  llama_context* ctx_ = nullptr;
  const llama_model* model_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
  int32_t nVocab_ = 0;
  int32_t nEmbd_ = 0;
  bool embeddingsOn_ = false;
  bool pooled_ = false;
  int32_t nBatch_ = 0;
  llama_batch batch_{};
  std::vector<std::unique_ptr<SequenceSampler>> samplers_;
  GrammarHome grammarHome_;
  std::shared_ptr<const TokenTable> tokenTable_;
  std::vector<llama_adapter_lora*> adapters_;
  std::vector<float> adapterScales_;
  int32_t threads_ = 1;
  ggml_threadpool_t threadpool_ = nullptr;
  void (*threadpoolFree_)(ggml_threadpool_t) = nullptr;
  ggml_type typeK_ = GGML_TYPE_F16;
  ggml_type typeV_ = GGML_TYPE_F16;
  bool flashAttn_ = false;
  int64_t kBytes_ = 0;
  int64_t vBytes_ = 0;
};

}  // namespace lmserve

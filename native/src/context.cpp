// The pure C++ context of context.h: creation report, threadpool, the step, pooled embeddings, image
// chunks, samplers and adapters over one llama_context.
#include "context.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "ggml-backend.h"
#include "mtmd-helper.h"
#include "parallel.h"

namespace lmserve {

Context::Context(const llama_model* model, llama_context* ctx, const llama_context_params& params,
                 const std::string& creationLog, int32_t threads, bool pooled, size_t maskCacheBytes)
    : ctx_(ctx), model_(model), pooled_(pooled), threads_(threads), typeK_(params.type_k), typeV_(params.type_v) {
  readCacheReport(creationLog, params);
  attachThreadpool(threads);
  vocab_ = llama_model_get_vocab(model);
  nVocab_ = llama_vocab_n_tokens(vocab_);
  nEmbd_ = llama_model_n_embd(model);
  nBatch_ = static_cast<int32_t>(llama_n_batch(ctx_));
  batch_ = llama_batch_init(nBatch_, 0, 1);
  samplers_.resize(params.n_seq_max);
  // Guided decoding: the vocabulary table is built on the first grammar; masks are kept up to the bound.
  grammarHome_.cache = std::make_shared<MaskCache>(maskCacheBytes, threads);
  grammarHome_.table = [this]() {
    if (tokenTable_ == nullptr) tokenTable_ = std::make_shared<const TokenTable>(vocab_);
    return tokenTable_;
  };
}

Context::~Context() {
  samplers_.clear();
  adapters_.clear();
  adapterScales_.clear();
  llama_batch_free(batch_);
  llama_free(ctx_);
  if (threadpool_ != nullptr && threadpoolFree_ != nullptr) threadpoolFree_(threadpool_);
}

bool Context::removeTokens(int32_t seq, int32_t from, int32_t to) {
  return llama_memory_seq_rm(llama_get_memory(ctx_), seq, from, to);
}

void Context::setAdapters(std::vector<llama_adapter_lora*> adapters, std::vector<float> scales) {
  llama_set_adapters_lora(ctx_, adapters.empty() ? nullptr : adapters.data(), adapters.size(),
                          scales.empty() ? nullptr : scales.data());
  adapters_ = std::move(adapters);
  adapterScales_ = std::move(scales);
}

int64_t Context::headSize(const llama_model* model, const char* field) {
  char arch[128] = {0};
  if (llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch)) > 0) {
    char value[64] = {0};
    const std::string key = std::string(arch) + ".attention." + field;
    if (llama_model_meta_val_str(model, key.c_str(), value, sizeof(value)) > 0) {
      const long long parsed = std::atoll(value);
      if (parsed > 0) return parsed;
    }
  }
  const int32_t heads = llama_model_n_head(model);
  return heads > 0 ? llama_model_n_embd(model) / heads : 0;
}

void Context::readCacheReport(const std::string& text, const llama_context_params& params) {
  size_t start = 0;
  bool faProbeEnabled = false;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find("Flash Attention enabled") != std::string::npos) faProbeEnabled = true;
    if (line.find("llama_kv_cache: size =") == std::string::npos) continue;
    const auto mibAfter = [&](const char* marker) -> double {
      const size_t at = line.find(marker);
      if (at == std::string::npos) return 0.0;
      const size_t colon = line.find("):", at);
      return colon == std::string::npos ? 0.0 : std::atof(line.c_str() + colon + 2);
    };
    // The line's "(N cells, L layers" with the model's head sizes gives the exact bytes when every
    // layer has the same KV width (checked against the line's rounded MiB); otherwise the MiB stand.
    const size_t cellsAt = line.find('(');
    const long long cells = cellsAt == std::string::npos ? 0 : std::atoll(line.c_str() + cellsAt + 1);
    const size_t layersAt = line.find("cells,");
    const long long layers = layersAt == std::string::npos ? 0 : std::atoll(line.c_str() + layersAt + 6);
    const auto bytesOf = [&](const char* marker, ggml_type type, const char* field) -> int64_t {
      const double reported = mibAfter(marker) * 1024.0 * 1024.0;
      const int64_t width = headSize(model_, field) * llama_model_n_head_kv(model_);
      const double exact = width > 0 && width % ggml_blck_size(type) == 0
                               ? static_cast<double>(ggml_row_size(type, width)) * static_cast<double>(cells * layers)
                               : -1.0;
      return static_cast<int64_t>(std::llround(std::fabs(exact - reported) <= 0.006 * 1024 * 1024 ? exact : reported));
    };
    kBytes_ += bytesOf(", K (", params.type_k, "key_length");
    vBytes_ += bytesOf(", V (", params.type_v, "value_length");
  }
  flashAttn_ = params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_ENABLED ||
               (params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_AUTO &&
                (faProbeEnabled || ggml_is_quantized(params.type_v)));
}

void Context::attachThreadpool(int32_t threads) {
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (cpu == nullptr) return;
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpu);
  auto* create = reinterpret_cast<ggml_threadpool_t (*)(ggml_threadpool_params*)>(
      ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new"));
  threadpoolFree_ = reinterpret_cast<void (*)(ggml_threadpool_t)>(
      ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free"));
  if (create == nullptr || threadpoolFree_ == nullptr) return;
  ggml_threadpool_params params = ggml_threadpool_params_default(threads);
  threadpool_ = create(&params);
  if (threadpool_ != nullptr) llama_attach_threadpool(ctx_, threadpool_, nullptr);
}

bool Context::scoreOutput(const StepPlan& plan, size_t i, StepResult& result, std::vector<float>& masked,
                          std::string& error) {
  const int32_t row = plan.outputRows[i];
  const float* logits = llama_get_logits_ith(ctx_, row);
  if (logits == nullptr) {
    error = "llama.cpp returned no logits for batch row " + std::to_string(row);
    return false;
  }
  if (plan.kinds[i] == OutputKind::Embedding) {
    const float* embedding = llama_get_embeddings_ith(ctx_, row);
    if (embedding == nullptr) {
      error = "llama.cpp returned no embedding for batch row " + std::to_string(row);
      return false;
    }
    std::copy(embedding, embedding + result.embdStride,
              result.embeddings.begin() + static_cast<std::ptrdiff_t>(i) * result.embdStride);
    return true;
  }
  int32_t token = plan.targets[i];
  const float* scored = logits;
  if (plan.kinds[i] == OutputKind::Sample) {
    const int32_t seq = plan.seqs[static_cast<size_t>(row)];
    SequenceSampler* sampler = samplers_[static_cast<size_t>(seq)].get();
    if (sampler == nullptr) {
      error = "sequence " + std::to_string(seq) + " has no sampler";
      return false;
    }
    const bool maskedLogprobs = plan.topN[i] >= 0 && sampler->constrained();
    token = sampler->sample(logits, maskedLogprobs ? &masked : nullptr);
    if (maskedLogprobs) scored = masked.data();
  }
  result.tokens[i] = token;
  if (plan.topN[i] >= 0 && token >= 0) {
    const size_t stride = static_cast<size_t>(result.stride);
    RowLogprobs lp = rawLogprobs(scored, nVocab_, token, plan.topN[i]);
    result.logprobs[i] = lp.logprob;
    result.ranks[i] = lp.rank;
    for (size_t k = 0; k < lp.topIds.size(); k++) {
      result.topIds[i * stride + k] = lp.topIds[k];
      result.topLogprobs[i * stride + k] = lp.topLogprobs[k];
    }
  }
  return true;
}

int Context::runStep(const StepPlan& plan, StepResult& result, std::string& error) {
  const int32_t n = static_cast<int32_t>(plan.tokens.size());
  batch_.n_tokens = n;
  for (int32_t i = 0; i < n; i++) {
    batch_.token[i] = plan.tokens[i];
    batch_.pos[i] = plan.positions[i];
    batch_.n_seq_id[i] = 1;
    batch_.seq_id[i][0] = plan.seqs[i];
    batch_.logits[i] = 0;
  }
  for (int32_t row : plan.outputRows) batch_.logits[row] = 1;
  // Output rows carry their final hidden states only in steps that have an embedding output.
  const bool wantEmbeddings = std::find(plan.kinds.begin(), plan.kinds.end(), OutputKind::Embedding) != plan.kinds.end();
  if (wantEmbeddings != embeddingsOn_) {
    llama_set_embeddings(ctx_, wantEmbeddings);
    embeddingsOn_ = wantEmbeddings;
  }
  const auto started = std::chrono::steady_clock::now();
  const int32_t status = llama_decode(ctx_, batch_);
  const auto decoded = std::chrono::steady_clock::now();
  result.decodeMs = std::chrono::duration<double, std::milli>(decoded - started).count();
  if (status != 0) {
    error = status == 1 ? "llama_decode found no room in the KV cache for the batch"
                        : "llama_decode failed with status " + std::to_string(status);
    return status;
  }
  const size_t outputs = plan.outputRows.size();
  int32_t stride = 0;
  for (int32_t k : plan.topN) stride = std::max(stride, k);
  result.stride = stride;
  result.tokens.assign(outputs, -1);
  result.ranks.assign(outputs, 0);
  result.logprobs.assign(outputs, 0.0f);
  result.topIds.assign(outputs * static_cast<size_t>(stride), -1);
  result.topLogprobs.assign(outputs * static_cast<size_t>(stride), 0.0f);
  result.embdStride = wantEmbeddings ? nEmbd_ : 0;
  result.embeddings.assign(wantEmbeddings ? outputs * static_cast<size_t>(nEmbd_) : 0, 0.0f);
  // Outputs are independent (one sampler per sequence, at most one sampled row per sequence): with
  // several, the context's threads (idle once the decode is done) share them.
  const size_t workers = std::min<size_t>(outputs, static_cast<size_t>(std::max(threads_, 1)));
  std::vector<std::string> errors(workers);
  const auto work = [&](size_t worker) {
    std::vector<float> masked;
    for (size_t i = worker; i < outputs; i += workers) {
      if (!scoreOutput(plan, i, result, masked, errors[worker])) return;
    }
  };
  parallelFor(workers, work);
  for (const std::string& message : errors) {
    if (!message.empty()) {
      error = message;
      return -101;
    }
  }
  result.sampleMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - decoded).count();
  return 0;
}

int Context::evalImage(mtmd_context* projector, const mtmd_input_chunk* chunk, int32_t seq, int32_t nPast,
                       int32_t& newNPast) {
  llama_pos next = nPast;
  const int32_t status =
      mtmd_helper_eval_chunk_single(projector, ctx_, chunk, nPast, seq, nBatch_, false, &next);
  newNPast = next;
  return status;
}

int Context::runEncode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& lengths,
                       std::vector<float>& out, int32_t& stride, double& ms, std::string& error) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  batch_.n_tokens = n;
  int32_t row = 0;
  for (size_t seq = 0; seq < lengths.size(); seq++) {
    for (int32_t pos = 0; pos < lengths[seq]; pos++, row++) {
      batch_.token[row] = tokens[static_cast<size_t>(row)];
      batch_.pos[row] = pos;
      batch_.n_seq_id[row] = 1;
      batch_.seq_id[row][0] = static_cast<llama_seq_id>(seq);
      batch_.logits[row] = 1;
    }
  }
  const auto started = std::chrono::steady_clock::now();
  const int32_t status = llama_decode(ctx_, batch_);
  ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (status != 0) {
    error = "llama.cpp could not encode the batch (status " + std::to_string(status) + ")";
    return status;
  }
  const llama_model* model = llama_get_model(ctx_);
  stride = llama_pooling_type(ctx_) == LLAMA_POOLING_TYPE_RANK
               ? static_cast<int32_t>(std::max<uint32_t>(llama_model_n_cls_out(model), 1))
               : nEmbd_;
  out.assign(lengths.size() * static_cast<size_t>(stride), 0.0f);
  for (size_t seq = 0; seq < lengths.size(); seq++) {
    const float* pooled = llama_get_embeddings_seq(ctx_, static_cast<llama_seq_id>(seq));
    if (pooled == nullptr) {
      error = "llama.cpp returned no pooled embedding for sequence " + std::to_string(seq);
      return -102;
    }
    std::copy(pooled, pooled + stride, out.begin() + static_cast<std::ptrdiff_t>(seq) * stride);
  }
  // A memoryless encoder keeps nothing between batches; a model with a KV cache would: clear it.
  if (llama_memory_t memory = llama_get_memory(ctx_)) llama_memory_clear(memory, true);
  return 0;
}

}  // namespace lmserve

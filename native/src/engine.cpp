// lmserve's native engine: a narrow Node-API surface over llama.cpp's C API (init, devices, the grammar
// check, models, LoRA adapters, one context per model with a sequence per slot, one batched llama_decode
// per step on a worker thread, pooled embeddings, image chunks). The projector is in projector.cpp, the
// shared helpers in binding.cpp, the model-free test entry points in testEntryPoints.cpp. Only src/engine/
// calls it; see docs/ARCHITECTURE.md.
#include <napi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"
#include "llama-grammar.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "binding.h"
#include "constraint.h"
#include "parallel.h"
#include "projector.h"
#include "sampler.h"
#include "step.h"

namespace lmserve {
namespace {

bool gInitialized = false;

Napi::Object deviceList(Napi::Env env) {
  Napi::Array devices = Napi::Array::New(env);
  uint32_t index = 0;
  for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
    ggml_backend_dev_t device = ggml_backend_dev_get(i);
    size_t free = 0;
    size_t total = 0;
    ggml_backend_dev_memory(device, &free, &total);
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("name", ggml_backend_dev_name(device));
    entry.Set("description", ggml_backend_dev_description(device));
    const auto type = ggml_backend_dev_type(device);
    entry.Set("type", type == GGML_BACKEND_DEVICE_TYPE_CPU   ? "cpu"
                      : type == GGML_BACKEND_DEVICE_TYPE_GPU ? "gpu"
                      : type == GGML_BACKEND_DEVICE_TYPE_IGPU ? "igpu"
                                                               : "accel");
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(device);
    entry.Set("backend", reg != nullptr ? ggml_backend_reg_name(reg) : "");
    entry.Set("memoryFree", static_cast<double>(free));
    entry.Set("memoryTotal", static_cast<double>(total));
    devices.Set(index++, entry);
  }
  return devices;
}

/**
 * init({cpuBinsDir, logLevel}) -> devices. Loads ggml's CPU variants from the prebuilt folder (ggml
 * picks the best one for this processor) and initialises llama.cpp; later calls only set the log level.
 */
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object options = info[0].As<Napi::Object>();
  if (options.Get("logLevel").IsNumber()) gLogLevel = options.Get("logLevel").As<Napi::Number>().Int32Value();
  if (!gInitialized) {
    llama_log_set(logCallback, nullptr);
    mtmd_log_set(logCallback, nullptr);
    mtmd_helper_log_set(logCallback, nullptr);
    std::string cpuBinsDir = options.Get("cpuBinsDir").As<Napi::String>().Utf8Value();
    ggml_backend_load_all_from_path(cpuBinsDir.c_str());
    llama_backend_init();
    gInitialized = true;
  }
  return deviceList(env);
}

/**
 * loadBackend(path) -> null when a GPU backend module (libggml-cuda.so, libggml-vulkan.so) loaded, else
 * ggml's reason (missing runtime libraries, no driver); then its devices are simply absent.
 */
Napi::Value LoadBackend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path = info[0].As<Napi::String>().Utf8Value();
  LogCapture capture;
  if (ggml_backend_load(path.c_str()) != nullptr) return env.Null();
  const std::string reason = lastLines(capture.text, 1);
  return Napi::String::New(env, reason.empty() ? "the backend did not load" : reason);
}

/**
 * llama.cpp's grammar sampler for GBNF `text` from rule `root` (`vocab` may be null: parse only), or
 * nullptr with llama.cpp's message in `reason`.
 */
llama_sampler* initGrammar(const llama_vocab* vocab, const std::string& text, const std::string& root,
                           std::string& reason) {
  LogCapture capture;
  llama_sampler* grammar = nullptr;
  try {
    grammar = llama_sampler_init_grammar(vocab, text.c_str(), root.c_str());
  } catch (const std::exception& error) {
    capture.text += error.what();
  }
  if (grammar == nullptr) reason = capture.text.empty() ? "failed to parse grammar" : capture.text;
  return grammar;
}

/** validateGrammar(text, root) -> null when llama.cpp's grammar parser takes it, else its message. */
Napi::Value ValidateGrammar(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string reason;
  llama_sampler* grammar =
      initGrammar(nullptr, info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value(), reason);
  if (grammar == nullptr) return Napi::String::New(env, reason);
  llama_sampler_free(grammar);
  return env.Null();
}

// ---------------------------------------------------------------------------------------------------
// Model

class Model : public Napi::ObjectWrap<Model> {
 public:
  static Napi::FunctionReference constructor;

  static void Define(Napi::Env env, Napi::Object exports) {
    Napi::Function fn = DefineClass(env, "Model",
                                    {
                                        InstanceMethod("info", &Model::Info),
                                        InstanceMethod("tokenize", &Model::Tokenize),
                                        InstanceMethod("detokenize", &Model::Detokenize),
                                        InstanceMethod("isEog", &Model::IsEog),
                                        InstanceMethod("dispose", &Model::Dispose),
                                    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    exports.Set("Model", fn);
  }

  explicit Model(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Model>(info) {
    model_ = static_cast<llama_model*>(info[0].As<Napi::External<llama_model>>().Data());
    vocab_ = llama_model_get_vocab(model_);
  }

  ~Model() override { free(); }

  llama_model* get() const { return model_; }
  const llama_vocab* vocab() const { return vocab_; }
  /** False once the model is freed (llama.cpp then frees the model's LoRA adapters with it). */
  std::shared_ptr<bool> alive() const { return alive_; }

 private:
  void free() {
    *alive_ = false;
    if (model_ != nullptr) llama_model_free(model_);
    model_ = nullptr;
  }

  void check(Napi::Env env) const {
    if (model_ == nullptr) throw Napi::Error::New(env, "the model has been disposed");
  }

  Napi::Value Info(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("nVocab", llama_vocab_n_tokens(vocab_));
    out.Set("nCtxTrain", llama_model_n_ctx_train(model_));
    out.Set("nEmbd", llama_model_n_embd(model_));
    out.Set("nLayer", llama_model_n_layer(model_));
    out.Set("nClsOut", static_cast<double>(llama_model_n_cls_out(model_)));
    out.Set("size", static_cast<double>(llama_model_size(model_)));
    char desc[256];
    llama_model_desc(model_, desc, sizeof desc);
    out.Set("description", desc);
    out.Set("bos", llama_vocab_bos(vocab_));
    out.Set("eos", llama_vocab_eos(vocab_));
    out.Set("eot", llama_vocab_eot(vocab_));
    out.Set("addBos", llama_vocab_get_add_bos(vocab_));
    out.Set("addEos", llama_vocab_get_add_eos(vocab_));
    out.Set("addSep", llama_vocab_get_add_sep(vocab_));
    out.Set("sep", llama_vocab_sep(vocab_));
    out.Set("fimPre", llama_vocab_fim_pre(vocab_));
    out.Set("fimSuf", llama_vocab_fim_suf(vocab_));
    out.Set("fimMid", llama_vocab_fim_mid(vocab_));
    const char* tmpl = llama_model_chat_template(model_, nullptr);
    out.Set("chatTemplate", tmpl != nullptr ? Napi::Value(Napi::String::New(env, tmpl)) : env.Null());
    return out;
  }

  /** tokenize(text, addSpecial, parseSpecial) -> Int32Array */
  Napi::Value Tokenize(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    std::string text = info[0].As<Napi::String>().Utf8Value();
    const bool addSpecial = info[1].ToBoolean();
    const bool parseSpecial = info[2].ToBoolean();
    std::vector<llama_token> tokens(text.size() + 8);
    int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                               static_cast<int32_t>(tokens.size()), addSpecial, parseSpecial);
    if (n < 0) {
      if (n == INT32_MIN) throw Napi::RangeError::New(env, "the text is too long to tokenize");
      tokens.resize(static_cast<size_t>(-n));
      n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                         static_cast<int32_t>(tokens.size()), addSpecial, parseSpecial);
    }
    auto out = Napi::Int32Array::New(env, static_cast<size_t>(std::max(n, 0)));
    std::copy(tokens.begin(), tokens.begin() + std::max(n, 0), out.Data());
    return out;
  }

  std::string bytesOf(const std::vector<llama_token>& tokens, bool renderSpecial = false) const {
    std::string text(tokens.size() * 8 + 16, '\0');
    int32_t n = llama_detokenize(vocab_, tokens.data(), static_cast<int32_t>(tokens.size()), text.data(),
                                 static_cast<int32_t>(text.size()), false, renderSpecial);
    if (n < 0) {
      text.resize(static_cast<size_t>(-n));
      n = llama_detokenize(vocab_, tokens.data(), static_cast<int32_t>(tokens.size()), text.data(),
                           static_cast<int32_t>(text.size()), false, renderSpecial);
    }
    text.resize(static_cast<size_t>(std::max(n, 0)));
    return text;
  }

  /**
   * detokenize(tokens, lastTokens, renderSpecial) -> string: the text `tokens` add after `lastTokens`
   * (context for tokenizers whose pieces depend on what precedes them); special tokens are rendered only
   * with `renderSpecial`.
   */
  Napi::Value Detokenize(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    std::vector<llama_token> tokens = toIntVector(info[0]);
    std::vector<llama_token> last = info.Length() > 1 ? toIntVector(info[1]) : std::vector<llama_token>{};
    for (llama_token token : last) {
      if (token < 0 || token >= llama_vocab_n_tokens(vocab_)) throw Napi::RangeError::New(env, "token id out of range");
    }
    for (llama_token token : tokens) {
      if (token < 0 || token >= llama_vocab_n_tokens(vocab_)) throw Napi::RangeError::New(env, "token id out of range");
    }
    const bool renderSpecial = info.Length() > 2 && info[2].ToBoolean();
    if (last.empty()) return Napi::String::New(env, bytesOf(tokens, renderSpecial));
    std::string before = bytesOf(last);
    std::vector<llama_token> all = last;
    all.insert(all.end(), tokens.begin(), tokens.end());
    std::string after = bytesOf(all);
    if (after.compare(0, before.size(), before) == 0) return Napi::String::New(env, after.substr(before.size()));
    return Napi::String::New(env, bytesOf(tokens));
  }

  Napi::Value IsEog(const Napi::CallbackInfo& info) {
    check(info.Env());
    return Napi::Boolean::New(info.Env(), llama_vocab_is_eog(vocab_, info[0].As<Napi::Number>().Int32Value()));
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    free();
    return info.Env().Undefined();
  }

  llama_model* model_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

Napi::FunctionReference Model::constructor;

}  // namespace

llama_model* modelOf(const Napi::Object& model) { return Model::Unwrap(model)->get(); }

namespace {

// ---------------------------------------------------------------------------------------------------
// LoRA adapters (llama.cpp's llama_adapter_lora): loaded per model, applied per context

/**
 * A LoRA adapter bound to its model. llama.cpp frees a model's adapters with the model, so the adapter
 * is freed here only while the model lives; it may not be freed while a context has it set (`holders`).
 */
class Lora : public Napi::ObjectWrap<Lora> {
 public:
  static Napi::FunctionReference constructor;

  static void Define(Napi::Env env, Napi::Object exports) {
    Napi::Function fn = DefineClass(env, "Lora",
                                    {
                                        InstanceMethod("info", &Lora::Info),
                                        InstanceMethod("dispose", &Lora::Dispose),
                                    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    exports.Set("Lora", fn);
  }

  explicit Lora(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Lora>(info) {
    adapter_ = static_cast<llama_adapter_lora*>(info[0].As<Napi::External<llama_adapter_lora>>().Data());
    Model* model = Model::Unwrap(info[1].As<Napi::Object>());
    model_ = model->get();
    alive_ = model->alive();
    modelRef_ = Napi::Persistent(info[1].As<Napi::Object>());
  }
  ~Lora() override { free(); }

  llama_adapter_lora* get() const { return adapter_; }
  const llama_model* model() const { return model_; }
  /** Contexts that have this adapter set. */
  int holders = 0;

 private:
  void free() {
    if (adapter_ != nullptr && alive_ && *alive_) llama_adapter_lora_free(adapter_);
    adapter_ = nullptr;
    if (!modelRef_.IsEmpty()) modelRef_.Reset();
  }

  /** info() -> {meta: {key: value}}: the adapter's GGUF scalar metadata as text. */
  Napi::Value Info(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (adapter_ == nullptr) throw Napi::Error::New(env, "the adapter has been disposed");
    Napi::Object meta = Napi::Object::New(env);
    const int32_t count = llama_adapter_meta_count(adapter_);
    std::vector<char> key(256), value(4096);
    for (int32_t i = 0; i < count; i++) {
      if (llama_adapter_meta_key_by_index(adapter_, i, key.data(), key.size()) < 0) continue;
      if (llama_adapter_meta_val_str_by_index(adapter_, i, value.data(), value.size()) < 0) continue;
      meta.Set(key.data(), value.data());
    }
    Napi::Object out = Napi::Object::New(env);
    out.Set("meta", meta);
    return out;
  }

  /** dispose(): frees the adapter. @throws Error while a context has it set. */
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    if (holders > 0) throw Napi::Error::New(info.Env(), "the adapter is set on a context");
    free();
    return info.Env().Undefined();
  }

  llama_adapter_lora* adapter_ = nullptr;
  const llama_model* model_ = nullptr;
  std::shared_ptr<bool> alive_;
  Napi::ObjectReference modelRef_;
};

Napi::FunctionReference Lora::constructor;

/** loadLora(path, model) -> Promise<Lora>; rejects with llama.cpp's reason (wrong base, bad file). */
Napi::Value LoadLora(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path = info[0].As<Napi::String>().Utf8Value();
  Napi::Object model = info[1].As<Napi::Object>();
  llama_model* base = Model::Unwrap(model)->get();
  if (base == nullptr) throw Napi::Error::New(env, "the model has been disposed");
  auto keep = std::make_shared<Napi::ObjectReference>(Napi::Persistent(model));
  auto load = [path, base]() -> llama_adapter_lora* { return llama_adapter_lora_init(base, path.c_str()); };
  auto wrap = [keep](Napi::Env env, llama_adapter_lora* adapter) -> Napi::Value {
    return Lora::constructor.New({Napi::External<llama_adapter_lora>::New(env, adapter), keep->Value()});
  };
  return (new LoadWorker<llama_adapter_lora>(env, load, wrap, "llama.cpp could not load the LoRA adapter", 1))->start();
}

/** loadModel(path, {nGpuLayers, devices: string[], cpuOnly}) -> Promise<Model> */
Napi::Value LoadModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path = info[0].As<Napi::String>().Utf8Value();
  Napi::Object options = info[1].As<Napi::Object>();
  std::vector<std::string> names;
  Napi::Value list = options.Get("devices");
  if (list.IsArray()) {
    auto array = list.As<Napi::Array>();
    for (uint32_t i = 0; i < array.Length(); i++) names.push_back(array.Get(i).As<Napi::String>().Utf8Value());
  }
  const int32_t nGpuLayers = static_cast<int32_t>(numberOr(options, "nGpuLayers", 0));
  const bool cpuOnly = options.Get("cpuOnly").ToBoolean();
  auto load = [path, names, nGpuLayers, cpuOnly]() -> llama_model* {
    llama_model_params params = llama_model_default_params();
    params.n_gpu_layers = nGpuLayers;
    std::vector<ggml_backend_dev_t> devices;
    if (cpuOnly || !names.empty()) {
      // Only the named GPUs (none: the CPU alone).
      for (const std::string& name : names) {
        ggml_backend_dev_t device = ggml_backend_dev_by_name(name.c_str());
        if (device != nullptr) devices.push_back(device);
      }
      devices.push_back(nullptr);
      params.devices = devices.data();
    }
    return llama_model_load_from_file(path.c_str(), params);
  };
  auto wrap = [](Napi::Env env, llama_model* model) -> Napi::Value {
    return Model::constructor.New({Napi::External<llama_model>::New(env, model)});
  };
  return (new LoadWorker<llama_model>(env, load, wrap, "llama.cpp could not load the model", 1))->start();
}

// ---------------------------------------------------------------------------------------------------
// Context and the step

/** The KV cache types a context takes: llama-server's `-ctk` / `-ctv` list (common/arg.cpp's kv_cache_types). */
const ggml_type kKvCacheTypes[] = {GGML_TYPE_F32,  GGML_TYPE_F16,    GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                                   GGML_TYPE_Q4_1, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1};

/**
 * Context option `pooling` (llama.cpp's pooling type: 1 mean, 2 cls, 3 last, 4 rank; absent or -1: none)
 * makes a pooled-embeddings context for encoder-only models (BERT family) and rerankers: llama.cpp
 * computes the embeddings and pools them per sequence, as llama-server's `--embeddings` / `--rerank`.
 * Returns whether it did.
 */
bool applyPooledOption(const Napi::Object& options, llama_context_params& params) {
  const int32_t pooling = static_cast<int32_t>(numberOr(options, "pooling", -1));
  if (pooling < LLAMA_POOLING_TYPE_MEAN || pooling > LLAMA_POOLING_TYPE_RANK) return false;
  params.embeddings = true;
  params.pooling_type = static_cast<enum llama_pooling_type>(pooling);
  return true;
}

class Context : public Napi::ObjectWrap<Context> {
 public:
  static void Define(Napi::Env env, Napi::Object exports) {
    Napi::Function fn = DefineClass(env, "Context",
                                    {
                                        InstanceMethod("info", &Context::Info),
                                        InstanceMethod("configure", &Context::Configure),
                                        InstanceMethod("release", &Context::Release),
                                        InstanceMethod("accept", &Context::Accept),
                                        InstanceMethod("forced", &Context::Forced),
                                        InstanceMethod("maskStats", &Context::MaskStats),
                                        InstanceMethod("grammarMask", &Context::GrammarMask),
                                        InstanceMethod("sampleRows", &Context::SampleRows),
                                        InstanceMethod("removeTokens", &Context::RemoveTokens),
                                        InstanceMethod("step", &Context::Step),
                                        InstanceMethod("evalImage", &Context::EvalImage),
                                        InstanceMethod("encode", &Context::Encode),
                                        InstanceMethod("setAdapters", &Context::SetAdapters),
                                        InstanceMethod("dispose", &Context::Dispose),
                                    });
    exports.Set("Context", fn);
  }

  /**
   * new Context(model, {nCtx, nSeqMax, nBatch, nUbatch, threads, kvUnified, offloadKqv, maskCacheBytes,
   * cacheTypeK, cacheTypeV, flashAttn}). Cache types are ggml type names (see kKvCacheTypes, default f16);
   * flashAttn is "auto" (the default), "on" or "off".
   */
  explicit Context(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Context>(info) {
    Napi::Env env = info.Env();
    Model* model = Model::Unwrap(info[0].As<Napi::Object>());
    modelRef_ = Napi::Persistent(info[0].As<Napi::Object>());
    Napi::Object options = info[1].As<Napi::Object>();
    llama_context_params params = llama_context_default_params();
    model_ = model->get();
    applyCacheOptions(env, model_, options, params);
    params.n_ctx = static_cast<uint32_t>(numberOr(options, "nCtx", 0));
    params.n_seq_max = static_cast<uint32_t>(numberOr(options, "nSeqMax", 1));
    params.n_batch = static_cast<uint32_t>(numberOr(options, "nBatch", 512));
    params.n_ubatch = static_cast<uint32_t>(numberOr(options, "nUbatch", 512));
    const int32_t threads = static_cast<int32_t>(numberOr(options, "threads", 4));
    params.n_threads = threads;
    params.n_threads_batch = threads;
    threads_ = threads;
    params.kv_unified = options.Get("kvUnified").ToBoolean();
    // Steps with embedding outputs switch llama.cpp's embeddings on (see runStep); the pooling is ours.
    params.embeddings = false;
    params.pooling_type = LLAMA_POOLING_TYPE_NONE;
    pooled_ = applyPooledOption(options, params);
    params.offload_kqv = options.Get("offloadKqv").IsBoolean() ? options.Get("offloadKqv").ToBoolean().Value() : true;
    params.no_perf = true;
    LogCapture capture;
    capture.keepInfo();
    ctx_ = llama_init_from_model(model->get(), params);
    if (ctx_ == nullptr) {
      const std::string reason = lastLines(capture.text, 1);
      throw Napi::Error::New(env, "llama.cpp could not create the context: " +
                                      (reason.empty() ? std::string("no reason given") : reason));
    }
    readCacheReport(capture.info, params);
    if (gLogLevel.load() <= GGML_LOG_LEVEL_INFO) std::fputs(capture.info.c_str(), stderr);
    attachThreadpool(threads);
    vocab_ = model->vocab();
    nVocab_ = llama_vocab_n_tokens(vocab_);
    nEmbd_ = llama_model_n_embd(model->get());
    nBatch_ = static_cast<int32_t>(llama_n_batch(ctx_));
    batch_ = llama_batch_init(nBatch_, 0, 1);
    samplers_.resize(params.n_seq_max);
    // Guided decoding: the vocabulary table is built on the first grammar; masks are kept up to the bound.
    const double maskBytes = numberOr(options, "maskCacheBytes", 64.0 * 1024 * 1024);
    grammarHome_.cache = std::make_shared<MaskCache>(static_cast<size_t>(std::max(maskBytes, 0.0)), threads);
    grammarHome_.table = [this]() {
      if (tokenTable_ == nullptr) tokenTable_ = std::make_shared<const TokenTable>(vocab_);
      return tokenTable_;
    };
  }

  ~Context() override { free(); }

  /** Samples (OutputKind::Sample), scores (PromptLogprob) or copies the embedding of (Embedding) output `i` of a decoded step into `result`; false with `error` set on failure. */
  bool scoreOutput(const StepPlan& plan, size_t i, StepResult& result, std::vector<float>& masked,
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

  /** The step's work on the worker thread: one llama_decode, then every output row sampled. */
  int runStep(const StepPlan& plan, StepResult& result, std::string& error) {
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

  void setBusy(bool busy) { busy_ = busy; }

  /**
   * The pooled-embedding work of `encode` on the worker thread: one batch of whole sequences (sequence i
   * is `lengths[i]` tokens of `tokens`, positions from 0, sequence id i), one llama_decode (an encoder-only
   * model's runs llama_encode), then llama.cpp's pooled vector of each sequence (for rank pooling, the
   * classifier's `n_cls_out` scores). Returns 0, or non-zero with `error` set.
   */
  int runEncode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& lengths, std::vector<float>& out,
                int32_t& stride, double& ms, std::string& error);

 private:
  /**
   * Sets the KV cache types and flash attention from the options, refusing (one-line errors) what
   * llama.cpp would refuse or not survive: an unknown type; a quantized V cache with flash attention off
   * (as llama.cpp: quantized V needs it, and "auto" turns it on); a quantized type whose block does not
   * divide the attention head size (llama.cpp checks this only with flash attention; without it the
   * attention's per-head views of such a cache would be malformed).
   */
  void applyCacheOptions(Napi::Env env, const llama_model* model, const Napi::Object& options,
                         llama_context_params& params) {
    const auto typeOf = [&](const char* key, const char* flag) {
      Napi::Value value = options.Get(key);
      if (!value.IsString()) return GGML_TYPE_F16;
      const std::string name = value.As<Napi::String>().Utf8Value();
      for (ggml_type type : kKvCacheTypes) {
        if (name == ggml_type_name(type)) return type;
      }
      std::string known;
      for (ggml_type type : kKvCacheTypes) known += (known.empty() ? "" : ", ") + std::string(ggml_type_name(type));
      throw Napi::Error::New(env, std::string(flag) + " '" + name + "' is not a KV cache type; allowed: " + known);
    };
    params.type_k = typeOf("cacheTypeK", "--cache-type-k");
    params.type_v = typeOf("cacheTypeV", "--cache-type-v");
    Napi::Value fa = options.Get("flashAttn");
    const std::string flash = fa.IsString() ? fa.As<Napi::String>().Utf8Value() : "auto";
    if (flash == "on") {
      params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    } else if (flash == "off") {
      params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    } else if (flash == "auto") {
      params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    } else {
      throw Napi::Error::New(env, "--flash-attn '" + flash + "' must be auto, on or off");
    }
    if (ggml_is_quantized(params.type_v) && params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_DISABLED) {
      throw Napi::Error::New(env, std::string("--cache-type-v ") + ggml_type_name(params.type_v) +
                                      ": a quantized V cache needs flash attention, and --flash-attn is off");
    }
    const auto checkBlock = [&](ggml_type type, int64_t head, const char* flag) {
      const int64_t block = ggml_blck_size(type);
      if (!ggml_is_quantized(type) || head <= 0 || head % block == 0) return;
      throw Napi::Error::New(env, std::string(flag) + " " + ggml_type_name(type) + ": its block of " +
                                      std::to_string(block) + " values does not divide the model's attention head size (" +
                                      std::to_string(head) + "); use f16, bf16 or f32");
    };
    checkBlock(params.type_k, headSize(model, "key_length"), "--cache-type-k");
    checkBlock(params.type_v, headSize(model, "value_length"), "--cache-type-v");
    typeK_ = params.type_k;
    typeV_ = params.type_v;
  }

  /** The model's attention head size for K ("key_length") or V ("value_length"): the GGUF's, else n_embd / n_head; 0 when unknown. */
  static int64_t headSize(const llama_model* model, const char* field) {
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

  /**
   * Reads what llama.cpp reported while creating the context: the KV caches' bytes (each
   * "llama_kv_cache: size = … K (type): X MiB, V (type): Y MiB" line, 0.01 MiB resolution; a
   * sliding-window model has two) and whether flash attention is on ("auto" is resolved by a probe that
   * logs "Flash Attention enabled"; a quantized V cache forces it on).
   */
  void readCacheReport(const std::string& text, const llama_context_params& params) {
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

  /**
   * A persistent ggml threadpool for the CPU backend, as llama.cpp's own tools attach one: without it the
   * prebuilt CPU backend (built without OpenMP) starts and joins its threads on every decode, which cost
   * about 10 ms per one-token step here (36 against 52 tok/s for llama-server at concurrency 1).
   */
  void attachThreadpool(int32_t threads) {
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

  void free() {
    samplers_.clear();
    dropAdapters();
    if (ctx_ != nullptr) {
      llama_batch_free(batch_);
      llama_free(ctx_);
      ctx_ = nullptr;
    }
    if (threadpool_ != nullptr && threadpoolFree_ != nullptr) threadpoolFree_(threadpool_);
    threadpool_ = nullptr;
    if (!modelRef_.IsEmpty()) modelRef_.Reset();
  }

  void check(Napi::Env env) const {
    if (ctx_ == nullptr) throw Napi::Error::New(env, "the context has been disposed");
    if (busy_) throw Napi::Error::New(env, "the context is running a step");
  }

  int32_t seqArg(const Napi::CallbackInfo& info) const {
    const int32_t seq = info[0].As<Napi::Number>().Int32Value();
    if (seq < 0 || static_cast<size_t>(seq) >= samplers_.size()) {
      throw Napi::RangeError::New(info.Env(), "sequence id out of range");
    }
    return seq;
  }

  Napi::Value Info(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("nCtx", llama_n_ctx(ctx_));
    out.Set("nCtxSeq", llama_n_ctx_seq(ctx_));
    out.Set("nBatch", llama_n_batch(ctx_));
    out.Set("nUbatch", llama_n_ubatch(ctx_));
    out.Set("nSeqMax", llama_n_seq_max(ctx_));
    out.Set("cacheTypeK", ggml_type_name(typeK_));
    out.Set("cacheTypeV", ggml_type_name(typeV_));
    out.Set("flashAttn", flashAttn_);
    out.Set("kBytes", static_cast<double>(kBytes_));
    out.Set("vBytes", static_cast<double>(vBytes_));
    return out;
  }

  /** configure(seq, config): a fresh sampler for the sequence (see samplerFrom). */
  Napi::Value Configure(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    const int32_t seq = seqArg(info);
    samplers_[static_cast<size_t>(seq)] = samplerFrom(env, info[1].As<Napi::Object>(), nVocab_, &grammarHome_);
    return env.Undefined();
  }

  Napi::Value Release(const Napi::CallbackInfo& info) {
    check(info.Env());
    samplers_[static_cast<size_t>(seqArg(info))].reset();
    return info.Env().Undefined();
  }

  /** accept(seq, tokens) -> boolean: feeds tokens that were not sampled (injected) to the sampler. */
  Napi::Value Accept(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    SequenceSampler* sampler = samplers_[static_cast<size_t>(seqArg(info))].get();
    if (sampler == nullptr) throw Napi::Error::New(env, "the sequence has no sampler");
    for (int32_t token : toIntVector(info[1])) {
      if (!sampler->accept(token)) return Napi::Boolean::New(env, false);
    }
    return Napi::Boolean::New(env, true);
  }

  /**
   * forced(seq, maxTokens) -> Int32Array: jump-forward. The tokens the sequence's grammar forces next (at
   * most maxTokens), already accepted by its sampler; empty without a grammar or where nothing is forced.
   */
  Napi::Value Forced(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    SequenceSampler* sampler = samplers_[static_cast<size_t>(seqArg(info))].get();
    if (sampler == nullptr) throw Napi::Error::New(env, "the sequence has no sampler");
    const int32_t maxTokens = info[1].As<Napi::Number>().Int32Value();
    return typedArrayOf<Napi::Int32Array>(env, sampler->forced(static_cast<size_t>(std::max(maxTokens, 0))));
  }

  /** maskStats() -> {hits, misses, bytes, computed, computeMs}: the mask cache's lookups, memory, and the masks computed. */
  Napi::Value MaskStats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object out = Napi::Object::New(env);
    const MaskCache::Stats stats = grammarHome_.cache->stats();
    out.Set("hits", static_cast<double>(stats.hits));
    out.Set("misses", static_cast<double>(stats.misses));
    out.Set("bytes", static_cast<double>(stats.bytes));
    out.Set("computed", static_cast<double>(stats.computed));
    out.Set("computeMs", stats.computeMs);
    return out;
  }

  /**
   * grammarMask(gbnf, root, tokens, reference) -> Uint8Array | null. Test entry point: the allowed-token
   * set (1 per allowed id) after the grammar has accepted `tokens` (null when it refuses them), from the
   * mask engine, or with `reference` by brute force: llama.cpp's grammar check of every token on its own
   * (less those that would make the text ill-formed UTF-8, see TokenTable::wellFormedAfter).
   */
  Napi::Value GrammarMask(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    const std::string gbnf = info[0].As<Napi::String>().Utf8Value();
    const std::string root = info[1].As<Napi::String>().Utf8Value();
    const std::vector<int32_t> prefix = toIntVector(info[2]);
    const bool reference = info[3].ToBoolean();
    std::unique_ptr<Constraint> constraint =
        constraintFrom(env, grammarHome_.table(), grammarHome_.cache, gbnf, root);
    for (int32_t token : prefix) {
      if (!constraint->accept(token)) return env.Null();
    }
    auto out = Napi::Uint8Array::New(env, static_cast<size_t>(nVocab_));
    if (!reference) {
      const TokenMask& mask = constraint->mask();
      for (int32_t id = 0; id < nVocab_; id++) out[static_cast<size_t>(id)] = maskAllows(mask, id) ? 1 : 0;
      return out;
    }
    llama_grammar* grammar = llama_grammar_init_impl(vocab_, gbnf.c_str(), root.c_str(), false, nullptr, 0, nullptr, 0);
    if (grammar == nullptr) throw Napi::Error::New(env, "grammar: failed to parse grammar");
    for (int32_t token : prefix) llama_grammar_accept_impl(*grammar, token);
    // llama.cpp's own check of one candidate at a time (what its grammar sampler does per token), less
    // the tokens that would make the text ill-formed UTF-8 (its decoder takes them; ours never allows them).
    const TokenTable& table = *grammarHome_.table();
    for (int32_t id = 0; id < nVocab_; id++) {
      llama_token_data data{id, 0.0f, 0.0f};
      llama_token_data_array array{&data, 1, -1, false};
      llama_grammar_apply_impl(*grammar, &array);
      out[static_cast<size_t>(id)] =
          std::isfinite(data.logit) && table.wellFormedAfter(id, grammar->partial_utf8) ? 1 : 0;
    }
    llama_grammar_free_impl(grammar);
    return out;
  }

  /**
   * sampleRows(config, rows) -> Int32Array. Test entry point: one sampler built from `config` (a
   * sequence's config, grammar and lazy start included, over this context's vocabulary) drawing once per
   * row of `rows` (n_vocab logits each, row after row); stops after the first -1 (under a grammar: no
   * allowed token), which it returns last.
   */
  Napi::Value SampleRows(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    auto sampler = samplerFrom(env, info[0].As<Napi::Object>(), nVocab_, &grammarHome_);
    auto rows = info[1].As<Napi::Float32Array>();
    const size_t steps = rows.ElementLength() / static_cast<size_t>(nVocab_);
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < steps; i++) {
      tokens.push_back(sampler->sample(rows.Data() + i * static_cast<size_t>(nVocab_)));
      if (tokens.back() < 0) break;
    }
    return typedArrayOf<Napi::Int32Array>(env, tokens);
  }

  /** removeTokens(seq, from, to) -> boolean: drops KV cells of positions [from, to) (to < 0: to the end). */
  Napi::Value RemoveTokens(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    const int32_t seq = seqArg(info);
    const bool ok = llama_memory_seq_rm(llama_get_memory(ctx_), seq, info[1].As<Napi::Number>().Int32Value(),
                                        info[2].As<Napi::Number>().Int32Value());
    return Napi::Boolean::New(env, ok);
  }

  Napi::Value Step(const Napi::CallbackInfo& info);
  Napi::Value EvalImage(const Napi::CallbackInfo& info);
  Napi::Value Encode(const Napi::CallbackInfo& info);


 public:
  /** Evaluates one image chunk of `seq` from position `nPast` (encoder, then the embeddings' decode). */
  int evalImage(mtmd_context* projector, const mtmd_input_chunk* chunk, int32_t seq, int32_t nPast,
                int32_t& newNPast) {
    llama_pos next = nPast;
    const int32_t status =
        mtmd_helper_eval_chunk_single(projector, ctx_, chunk, nPast, seq, nBatch_, false, &next);
    newNPast = next;
    return status;
  }

 private:

  void dropAdapters() {
    for (auto& ref : adapterRefs_) {
      if (!ref.IsEmpty()) Lora::Unwrap(ref.Value())->holders--;
      ref.Reset();
    }
    adapterRefs_.clear();
    adapters_.clear();
    adapterScales_.clear();
  }

  /**
   * setAdapters(adapters: Lora[], scales: number[]) -> boolean: the LoRA adapters (of this context's
   * model) the following steps run under, each at its scale; [] for the base alone. True when the set
   * changed (llama.cpp then reserves its compute graph again on the next decode). @throws while a step runs,
   * TypeError/Error for a disposed adapter or one of another model.
   */
  Napi::Value SetAdapters(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    Napi::Array list = info[0].As<Napi::Array>();
    std::vector<float> scales = toFloatVector(info[1]);
    if (scales.size() != list.Length()) throw Napi::RangeError::New(env, "setAdapters: array lengths differ");
    std::vector<llama_adapter_lora*> adapters;
    std::vector<Napi::Object> objects;
    for (uint32_t i = 0; i < list.Length(); i++) {
      Napi::Object object = list.Get(i).As<Napi::Object>();
      Lora* lora = Lora::Unwrap(object);
      if (lora->get() == nullptr) throw Napi::Error::New(env, "setAdapters: the adapter has been disposed");
      if (lora->model() != model_) throw Napi::Error::New(env, "setAdapters: the adapter belongs to another model");
      adapters.push_back(lora->get());
      objects.push_back(object);
    }
    if (adapters == adapters_ && scales == adapterScales_) return Napi::Boolean::New(env, false);
    dropAdapters();
    llama_set_adapters_lora(ctx_, adapters.empty() ? nullptr : adapters.data(), adapters.size(),
                            scales.empty() ? nullptr : scales.data());
    for (Napi::Object& object : objects) {
      Lora::Unwrap(object)->holders++;
      adapterRefs_.push_back(Napi::Persistent(object));
    }
    adapters_ = std::move(adapters);
    adapterScales_ = std::move(scales);
    return Napi::Boolean::New(env, true);
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    check(info.Env());
    free();
    return info.Env().Undefined();
  }

  std::vector<llama_adapter_lora*> adapters_;
  std::vector<float> adapterScales_;
  std::vector<Napi::ObjectReference> adapterRefs_;

  llama_context* ctx_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
  int32_t nVocab_ = 0;
  int32_t nEmbd_ = 0;
  bool embeddingsOn_ = false;
  /** True for a pooled-embeddings context (`pooling` given): only `encode` runs on it. */
  bool pooled_ = false;
  int32_t nBatch_ = 0;
  llama_batch batch_{};
  std::vector<std::unique_ptr<SequenceSampler>> samplers_;
  GrammarHome grammarHome_;
  std::shared_ptr<const TokenTable> tokenTable_;
  int32_t threads_ = 1;
  ggml_threadpool_t threadpool_ = nullptr;
  void (*threadpoolFree_)(ggml_threadpool_t) = nullptr;
  Napi::ObjectReference modelRef_;
  std::atomic<bool> busy_{false};
  const llama_model* model_ = nullptr;
  ggml_type typeK_ = GGML_TYPE_F16;
  ggml_type typeV_ = GGML_TYPE_F16;
  /** Whether the context runs flash attention (after llama.cpp resolved "auto"). */
  bool flashAttn_ = false;
  /** Bytes of the K and V caches, from llama.cpp's report at creation (0 for a model without a KV cache). */
  int64_t kBytes_ = 0;
  int64_t vBytes_ = 0;

};

/**
 * Work on a context off the JS thread (a step, an image): holds the context and its JS object alive,
 * marks the context free again when done, and settles the promise with `result()` or the error.
 */
class ContextWorker : public Napi::AsyncWorker {
 public:
  ContextWorker(Napi::Env env, Context* context, Napi::Object contextObject)
      : Napi::AsyncWorker(env),
        context_(context),
        deferred_(Napi::Promise::Deferred::New(env)),
        contextRef_(Napi::Persistent(contextObject)) {}

  /** Queues the worker and returns its promise. */
  Napi::Promise start() {
    Napi::Promise promise = deferred_.Promise();
    Queue();
    return promise;
  }

  void OnOK() override {
    context_->setBusy(false);
    deferred_.Resolve(result(Env()));
  }

  void OnError(const Napi::Error& error) override {
    context_->setBusy(false);
    deferred_.Reject(error.Value());
  }

 protected:
  /** The resolved value, built on the JS thread. */
  virtual Napi::Value result(Napi::Env env) = 0;

  Context* context_;

 private:
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference contextRef_;
};

class StepWorker : public ContextWorker {
 public:
  StepWorker(Napi::Env env, Context* context, Napi::Object contextObject, StepPlan plan)
      : ContextWorker(env, context, contextObject), plan_(std::move(plan)) {}

  void Execute() override {
    try {
      if (context_->runStep(plan_, result_, error_) != 0) SetError(error_);
    } catch (const std::exception& exception) {
      SetError(std::string("step failed: ") + exception.what());
    }
  }

 protected:
  Napi::Value result(Napi::Env env) override {
    Napi::Object out = Napi::Object::New(env);
    out.Set("tokens", typedArrayOf<Napi::Int32Array>(env, result_.tokens));
    out.Set("ranks", typedArrayOf<Napi::Int32Array>(env, result_.ranks));
    out.Set("logprobs", typedArrayOf<Napi::Float32Array>(env, result_.logprobs));
    out.Set("topStride", result_.stride);
    out.Set("topIds", typedArrayOf<Napi::Int32Array>(env, result_.topIds));
    out.Set("topLogprobs", typedArrayOf<Napi::Float32Array>(env, result_.topLogprobs));
    out.Set("embeddings", typedArrayOf<Napi::Float32Array>(env, result_.embeddings));
    out.Set("embdStride", result_.embdStride);
    out.Set("decodeMs", result_.decodeMs);
    out.Set("sampleMs", result_.sampleMs);
    return out;
  }

 private:
  StepPlan plan_;
  StepResult result_;
  std::string error_;
};

/**
 * step({tokens, positions, seqs, outputRows, kinds, targets, topN}) -> Promise<{tokens, ranks,
 * logprobs, topStride, topIds, topLogprobs}>: one llama_decode of the batch on a worker thread, then
 * each output row sampled (OutputKind::Sample), scored against its target (PromptLogprob) or its hidden
 * state copied (Embedding); `kinds` holds OutputKind values (step.h).
 */
Napi::Value Context::Step(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  check(env);
  Napi::Object input = info[0].As<Napi::Object>();
  StepPlan plan;
  plan.tokens = toIntVector(input.Get("tokens"));
  plan.positions = toIntVector(input.Get("positions"));
  plan.seqs = toIntVector(input.Get("seqs"));
  plan.outputRows = toIntVector(input.Get("outputRows"));
  for (int32_t kind : toIntVector(input.Get("kinds"))) plan.kinds.push_back(static_cast<OutputKind>(kind));
  plan.targets = toIntVector(input.Get("targets"));
  plan.topN = toIntVector(input.Get("topN"));
  const size_t n = plan.tokens.size();
  const size_t outputs = plan.outputRows.size();
  if (n == 0 || static_cast<int32_t>(n) > nBatch_) throw Napi::RangeError::New(env, "step: batch size out of range");
  if (plan.positions.size() != n || plan.seqs.size() != n) throw Napi::RangeError::New(env, "step: array lengths differ");
  if (plan.kinds.size() != outputs || plan.targets.size() != outputs || plan.topN.size() != outputs) {
    throw Napi::RangeError::New(env, "step: output array lengths differ");
  }
  for (size_t i = 0; i < n; i++) {
    if (plan.tokens[i] < 0 || plan.tokens[i] >= nVocab_) throw Napi::RangeError::New(env, "step: token id out of range");
    if (plan.seqs[i] < 0 || static_cast<size_t>(plan.seqs[i]) >= samplers_.size()) {
      throw Napi::RangeError::New(env, "step: sequence id out of range");
    }
  }
  for (int32_t row : plan.outputRows) {
    if (row < 0 || static_cast<size_t>(row) >= n) throw Napi::RangeError::New(env, "step: output row out of range");
  }
  busy_ = true;
  return (new StepWorker(env, this, info.This().As<Napi::Object>(), std::move(plan)))->start();
}

/** Evaluates an image chunk off the JS thread. */
class ImageWorker : public ContextWorker {
 public:
  ImageWorker(Napi::Env env, Context* context, Napi::Object contextObject, Napi::Object projector,
              Napi::Object prompt, size_t chunk, int32_t seq, int32_t nPast)
      : ContextWorker(env, context, contextObject),
        projectorRef_(Napi::Persistent(projector)),
        promptRef_(Napi::Persistent(prompt)),
        projector_(projectorOf(projector)),
        chunk_(mediaChunkOf(prompt, chunk)),
        seq_(seq),
        nPast_(nPast) {}

  void Execute() override {
    if (projector_ == nullptr || chunk_ == nullptr) {
      SetError("the image chunk is not there (disposed projector or prompt)");
      return;
    }
    LogCapture capture;
    try {
      if (context_->evalImage(projector_, chunk_, seq_, nPast_, newNPast_) != 0) {
        SetError("the image could not be evaluated: " + capture.text);
      }
    } catch (const std::exception& error) {
      SetError(std::string("the image could not be evaluated: ") + error.what());
    }
  }

 protected:
  Napi::Value result(Napi::Env env) override {
    Napi::Object out = Napi::Object::New(env);
    out.Set("nPast", newNPast_);
    return out;
  }

 private:
  Napi::ObjectReference projectorRef_, promptRef_;
  mtmd_context* projector_;
  const mtmd_input_chunk* chunk_;
  int32_t seq_, nPast_, newNPast_ = 0;
};

/** evalImage(seq, projector, prompt, chunkIndex, nPast) -> Promise<{nPast}> */
Napi::Value Context::EvalImage(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  check(env);
  const int32_t seq = seqArg(info);
  busy_ = true;
  return (new ImageWorker(env, this, info.This().As<Napi::Object>(), info[1].As<Napi::Object>(),
                          info[2].As<Napi::Object>(), static_cast<size_t>(info[3].As<Napi::Number>().Int64Value()),
                          seq, info[4].As<Napi::Number>().Int32Value()))
      ->start();
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

/** Runs `Context::runEncode` off the JS thread. */
class EncodeWorker : public ContextWorker {
 public:
  EncodeWorker(Napi::Env env, Context* context, Napi::Object contextObject, std::vector<int32_t> tokens,
               std::vector<int32_t> lengths)
      : ContextWorker(env, context, contextObject), tokens_(std::move(tokens)), lengths_(std::move(lengths)) {}

  void Execute() override {
    try {
      if (context_->runEncode(tokens_, lengths_, out_, stride_, ms_, error_) != 0) SetError(error_);
    } catch (const std::exception& exception) {
      SetError(std::string("encode failed: ") + exception.what());
    }
  }

 protected:
  Napi::Value result(Napi::Env env) override {
    Napi::Object out = Napi::Object::New(env);
    out.Set("embeddings", typedArrayOf<Napi::Float32Array>(env, out_));
    out.Set("stride", stride_);
    out.Set("encodeMs", ms_);
    return out;
  }

 private:
  std::vector<int32_t> tokens_, lengths_;
  std::vector<float> out_;
  int32_t stride_ = 0;
  double ms_ = 0;
  std::string error_;
};

/**
 * encode(tokens: Int32Array, lengths: Int32Array) -> Promise<{embeddings, stride, encodeMs}>: the pooled
 * vector of each of `lengths.length` whole sequences laid end to end in `tokens` (a pooled context only,
 * see applyPooledOption). Throws a RangeError when the batch is empty, longer than the ubatch (an
 * encoder sees a whole batch at once), has more sequences than the context, or holds an unknown id.
 */
Napi::Value Context::Encode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  check(env);
  if (!pooled_) throw Napi::Error::New(env, "encode: the context was not created for pooled embeddings");
  std::vector<int32_t> tokens = toIntVector(info[0]);
  std::vector<int32_t> lengths = toIntVector(info[1]);
  int64_t total = 0;
  for (int32_t length : lengths) {
    if (length <= 0) throw Napi::RangeError::New(env, "encode: every sequence needs a token");
    total += length;
  }
  if (total != static_cast<int64_t>(tokens.size())) throw Napi::RangeError::New(env, "encode: lengths do not add up");
  const int64_t limit = std::min<int64_t>(nBatch_, llama_n_ubatch(ctx_));
  if (tokens.empty() || total > limit) {
    throw Napi::RangeError::New(env, "encode: " + std::to_string(total) + " tokens, the batch holds 1.." +
                                         std::to_string(limit));
  }
  if (lengths.size() > llama_n_seq_max(ctx_)) throw Napi::RangeError::New(env, "encode: too many sequences");
  for (int32_t token : tokens) {
    if (token < 0 || token >= nVocab_) throw Napi::RangeError::New(env, "encode: token id out of range");
  }
  busy_ = true;
  return (new EncodeWorker(env, this, info.This().As<Napi::Object>(), std::move(tokens), std::move(lengths)))
      ->start();
}


}  // namespace

Napi::Object Initialize(Napi::Env env, Napi::Object exports) {
  exports.Set("init", Napi::Function::New(env, Init));
  exports.Set("devices", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return deviceList(info.Env()); }));
  exports.Set("loadBackend", Napi::Function::New(env, LoadBackend));
  exports.Set("validateGrammar", Napi::Function::New(env, ValidateGrammar));
  exports.Set("loadModel", Napi::Function::New(env, LoadModel));
  exports.Set("loadLora", Napi::Function::New(env, LoadLora));
  Model::Define(env, exports);
  Lora::Define(env, exports);
  Context::Define(env, exports);
  defineProjector(env, exports);
  defineTestEntryPoints(env, exports);
  return exports;
}

}  // namespace lmserve

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return lmserve::Initialize(env, exports); }

NODE_API_MODULE(lmserve_engine, InitModule)

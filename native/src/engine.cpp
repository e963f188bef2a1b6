// lmserve's native engine: the Node-API surface over llama.cpp's C API (init, devices, the grammar check,
// models, LoRA adapters, and the JS Context: its options, sequences' samplers and adapters, and the worker
// threads that run context.h's pure C++ Context: the step, pooled embeddings, image chunks). The projector
// is in projector.cpp, the shared helpers in binding.cpp, the model-free test entry points in
// testEntryPoints.cpp. Only src/engine/ calls it; see docs/ARCHITECTURE.md.
#include <napi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "ggml-backend.h"
#include "llama.h"
#include "llama-grammar.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "binding.h"
#include "constraint.h"
#include "context.h"
#include "projector.h"
#include "sampler.h"
#include "step.h"

namespace lmserve {
namespace {

bool gInitialized = false;
// The CPU backend library init loaded from outside the prebuilt folder, or "".
std::string gCpuBackend;

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
 * init({cpuBinsDir, cpuBackend?, logLevel}) -> devices. Loads ggml's CPU backend: the library
 * `cpuBackend` (built here for this processor) when given and this processor runs it (its
 * `ggml_backend_score` is not 0), else the prebuilt variants of `cpuBinsDir` (ggml picks the best one);
 * then initialises llama.cpp. Later calls only set the log level. cpuBackend() tells which loaded.
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
    if (options.Get("cpuBackend").IsString()) {
      const std::string own = options.Get("cpuBackend").As<Napi::String>().Utf8Value();
      if (!own.empty() && ggml_backend_load(own.c_str()) != nullptr) gCpuBackend = own;
    }
    if (gCpuBackend.empty()) ggml_backend_load_all_from_path(cpuBinsDir.c_str());
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
// The JS Context: options, sequences' samplers, adapters and the workers over context.h's Context

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

class JsContext : public Napi::ObjectWrap<JsContext> {
 public:
  static void Define(Napi::Env env, Napi::Object exports) {
    Napi::Function fn = DefineClass(env, "Context",
                                    {
                                        InstanceMethod("info", &JsContext::Info),
                                        InstanceMethod("configure", &JsContext::Configure),
                                        InstanceMethod("release", &JsContext::Release),
                                        InstanceMethod("accept", &JsContext::Accept),
                                        InstanceMethod("forced", &JsContext::Forced),
                                        InstanceMethod("maskStats", &JsContext::MaskStats),
                                        InstanceMethod("grammarMask", &JsContext::GrammarMask),
                                        InstanceMethod("sampleRows", &JsContext::SampleRows),
                                        InstanceMethod("removeTokens", &JsContext::RemoveTokens),
                                        InstanceMethod("step", &JsContext::Step),
                                        InstanceMethod("evalImage", &JsContext::EvalImage),
                                        InstanceMethod("encode", &JsContext::Encode),
                                        InstanceMethod("setAdapters", &JsContext::SetAdapters),
                                        InstanceMethod("dispose", &JsContext::Dispose),
                                    });
    exports.Set("Context", fn);
  }

  /**
   * new Context(model, {nCtx, nSeqMax, nBatch, nUbatch, threads, kvUnified, offloadKqv, maskCacheBytes,
   * cacheTypeK, cacheTypeV, flashAttn}). Cache types are ggml type names (see kKvCacheTypes, default f16);
   * flashAttn is "auto" (the default), "on" or "off".
   */
  explicit JsContext(const Napi::CallbackInfo& info) : Napi::ObjectWrap<JsContext>(info) {
    Napi::Env env = info.Env();
    Model* model = Model::Unwrap(info[0].As<Napi::Object>());
    modelRef_ = Napi::Persistent(info[0].As<Napi::Object>());
    Napi::Object options = info[1].As<Napi::Object>();
    llama_context_params params = llama_context_default_params();
    applyCacheOptions(env, model->get(), options, params);
    params.n_ctx = static_cast<uint32_t>(numberOr(options, "nCtx", 0));
    params.n_seq_max = static_cast<uint32_t>(numberOr(options, "nSeqMax", 1));
    params.n_batch = static_cast<uint32_t>(numberOr(options, "nBatch", 512));
    params.n_ubatch = static_cast<uint32_t>(numberOr(options, "nUbatch", 512));
    const int32_t threads = static_cast<int32_t>(numberOr(options, "threads", 4));
    params.n_threads = threads;
    params.n_threads_batch = threads;
    params.kv_unified = options.Get("kvUnified").ToBoolean();
    // Steps with embedding outputs switch llama.cpp's embeddings on (see runStep); the pooling is ours.
    params.embeddings = false;
    params.pooling_type = LLAMA_POOLING_TYPE_NONE;
    const bool pooled = applyPooledOption(options, params);
    params.offload_kqv = options.Get("offloadKqv").IsBoolean() ? options.Get("offloadKqv").ToBoolean().Value() : true;
    params.no_perf = true;
    LogCapture capture;
    capture.keepInfo();
    llama_context* ctx = llama_init_from_model(model->get(), params);
    if (ctx == nullptr) {
      const std::string reason = lastLines(capture.text, 1);
      throw Napi::Error::New(env, "llama.cpp could not create the context: " +
                                      (reason.empty() ? std::string("no reason given") : reason));
    }
    // Guided decoding: masks are kept up to the bound.
    const double maskBytes = numberOr(options, "maskCacheBytes", 64.0 * 1024 * 1024);
    core_ = std::make_unique<Context>(model->get(), ctx, params, capture.info, threads, pooled,
                                      static_cast<size_t>(std::max(maskBytes, 0.0)));
    if (gLogLevel.load() <= GGML_LOG_LEVEL_INFO) std::fputs(capture.info.c_str(), stderr);
  }

  ~JsContext() override { free(); }

  void setBusy(bool busy) { busy_ = busy; }

  /** The pure C++ context the workers run on (valid while not disposed: a busy context refuses dispose). */
  Context& core() { return *core_; }

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
    checkBlock(params.type_k, Context::headSize(model, "key_length"), "--cache-type-k");
    checkBlock(params.type_v, Context::headSize(model, "value_length"), "--cache-type-v");
  }

  void free() {
    dropAdapters();
    core_.reset();
    if (!modelRef_.IsEmpty()) modelRef_.Reset();
  }

  void check(Napi::Env env) const {
    if (core_ == nullptr) throw Napi::Error::New(env, "the context has been disposed");
    if (busy_) throw Napi::Error::New(env, "the context is running a step");
  }

  int32_t seqArg(const Napi::CallbackInfo& info) const {
    const int32_t seq = info[0].As<Napi::Number>().Int32Value();
    if (seq < 0 || static_cast<size_t>(seq) >= core_->nSeqMax()) {
      throw Napi::RangeError::New(info.Env(), "sequence id out of range");
    }
    return seq;
  }

  Napi::Value Info(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("nCtx", llama_n_ctx(core_->get()));
    out.Set("nCtxSeq", llama_n_ctx_seq(core_->get()));
    out.Set("nBatch", llama_n_batch(core_->get()));
    out.Set("nUbatch", llama_n_ubatch(core_->get()));
    out.Set("nSeqMax", llama_n_seq_max(core_->get()));
    out.Set("cacheTypeK", ggml_type_name(core_->typeK()));
    out.Set("cacheTypeV", ggml_type_name(core_->typeV()));
    out.Set("flashAttn", core_->flashAttn());
    out.Set("kBytes", static_cast<double>(core_->kBytes()));
    out.Set("vBytes", static_cast<double>(core_->vBytes()));
    return out;
  }

  /** configure(seq, config): a fresh sampler for the sequence (see samplerFrom). */
  Napi::Value Configure(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    const int32_t seq = seqArg(info);
    core_->setSampler(seq, samplerFrom(env, info[1].As<Napi::Object>(), core_->nVocab(), &core_->grammarHome()));
    return env.Undefined();
  }

  Napi::Value Release(const Napi::CallbackInfo& info) {
    check(info.Env());
    core_->setSampler(seqArg(info), nullptr);
    return info.Env().Undefined();
  }

  /** accept(seq, tokens) -> boolean: feeds tokens that were not sampled (injected) to the sampler. */
  Napi::Value Accept(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    SequenceSampler* sampler = core_->sampler(seqArg(info));
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
    SequenceSampler* sampler = core_->sampler(seqArg(info));
    if (sampler == nullptr) throw Napi::Error::New(env, "the sequence has no sampler");
    const int32_t maxTokens = info[1].As<Napi::Number>().Int32Value();
    return typedArrayOf<Napi::Int32Array>(env, sampler->forced(static_cast<size_t>(std::max(maxTokens, 0))));
  }

  /** maskStats() -> {hits, misses, bytes, computed, computeMs}: the mask cache's lookups, memory, and the masks computed. */
  Napi::Value MaskStats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object out = Napi::Object::New(env);
    const MaskCache::Stats stats = core_->grammarHome().cache->stats();
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
        constraintFrom(env, core_->grammarHome().table(), core_->grammarHome().cache, gbnf, root);
    for (int32_t token : prefix) {
      if (!constraint->accept(token)) return env.Null();
    }
    const int32_t nVocab = core_->nVocab();
    auto out = Napi::Uint8Array::New(env, static_cast<size_t>(nVocab));
    if (!reference) {
      const TokenMask& mask = constraint->mask();
      for (int32_t id = 0; id < nVocab; id++) out[static_cast<size_t>(id)] = maskAllows(mask, id) ? 1 : 0;
      return out;
    }
    llama_grammar* grammar = llama_grammar_init_impl(core_->vocab(), gbnf.c_str(), root.c_str(), false, nullptr, 0, nullptr, 0);
    if (grammar == nullptr) throw Napi::Error::New(env, "grammar: failed to parse grammar");
    for (int32_t token : prefix) llama_grammar_accept_impl(*grammar, token);
    // llama.cpp's own check of one candidate at a time (what its grammar sampler does per token), less
    // the tokens that would make the text ill-formed UTF-8 (its decoder takes them; ours never allows them).
    const TokenTable& table = *core_->grammarHome().table();
    for (int32_t id = 0; id < nVocab; id++) {
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
    const int32_t nVocab = core_->nVocab();
    auto sampler = samplerFrom(env, info[0].As<Napi::Object>(), nVocab, &core_->grammarHome());
    auto rows = info[1].As<Napi::Float32Array>();
    const size_t steps = rows.ElementLength() / static_cast<size_t>(nVocab);
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < steps; i++) {
      tokens.push_back(sampler->sample(rows.Data() + i * static_cast<size_t>(nVocab)));
      if (tokens.back() < 0) break;
    }
    return typedArrayOf<Napi::Int32Array>(env, tokens);
  }

  /** removeTokens(seq, from, to) -> boolean: drops KV cells of positions [from, to) (to < 0: to the end). */
  Napi::Value RemoveTokens(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    const int32_t seq = seqArg(info);
    const bool ok =
        core_->removeTokens(seq, info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int32Value());
    return Napi::Boolean::New(env, ok);
  }

  Napi::Value Step(const Napi::CallbackInfo& info);
  Napi::Value EvalImage(const Napi::CallbackInfo& info);
  Napi::Value Encode(const Napi::CallbackInfo& info);

 private:

  void dropAdapters() {
    for (auto& ref : adapterRefs_) {
      if (!ref.IsEmpty()) Lora::Unwrap(ref.Value())->holders--;
      ref.Reset();
    }
    adapterRefs_.clear();
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
      if (lora->model() != core_->model()) throw Napi::Error::New(env, "setAdapters: the adapter belongs to another model");
      adapters.push_back(lora->get());
      objects.push_back(object);
    }
    if (adapters == core_->adapters() && scales == core_->adapterScales()) return Napi::Boolean::New(env, false);
    dropAdapters();
    core_->setAdapters(std::move(adapters), std::move(scales));
    for (Napi::Object& object : objects) {
      Lora::Unwrap(object)->holders++;
      adapterRefs_.push_back(Napi::Persistent(object));
    }
    return Napi::Boolean::New(env, true);
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    check(info.Env());
    free();
    return info.Env().Undefined();
  }

  std::vector<Napi::ObjectReference> adapterRefs_;
  /** The context itself (context.h); null once disposed. */
  std::unique_ptr<Context> core_;
  Napi::ObjectReference modelRef_;
  std::atomic<bool> busy_{false};
};

/**
 * Work on a context off the JS thread (a step, an image): holds the context and its JS object alive,
 * marks the context free again when done, and settles the promise with `result()` or the error.
 */
class ContextWorker : public Napi::AsyncWorker {
 public:
  ContextWorker(Napi::Env env, JsContext* context, Napi::Object contextObject)
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

  JsContext* context_;

 private:
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference contextRef_;
};

class StepWorker : public ContextWorker {
 public:
  StepWorker(Napi::Env env, JsContext* context, Napi::Object contextObject, StepPlan plan)
      : ContextWorker(env, context, contextObject), plan_(std::move(plan)) {}

  void Execute() override {
    try {
      if (context_->core().runStep(plan_, result_, error_) != 0) SetError(error_);
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
Napi::Value JsContext::Step(const Napi::CallbackInfo& info) {
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
  if (n == 0 || static_cast<int32_t>(n) > core_->nBatch()) throw Napi::RangeError::New(env, "step: batch size out of range");
  if (plan.positions.size() != n || plan.seqs.size() != n) throw Napi::RangeError::New(env, "step: array lengths differ");
  if (plan.kinds.size() != outputs || plan.targets.size() != outputs || plan.topN.size() != outputs) {
    throw Napi::RangeError::New(env, "step: output array lengths differ");
  }
  for (size_t i = 0; i < n; i++) {
    if (plan.tokens[i] < 0 || plan.tokens[i] >= core_->nVocab()) throw Napi::RangeError::New(env, "step: token id out of range");
    if (plan.seqs[i] < 0 || static_cast<size_t>(plan.seqs[i]) >= core_->nSeqMax()) {
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
  ImageWorker(Napi::Env env, JsContext* context, Napi::Object contextObject, Napi::Object projector,
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
      if (context_->core().evalImage(projector_, chunk_, seq_, nPast_, newNPast_) != 0) {
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
Napi::Value JsContext::EvalImage(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  check(env);
  const int32_t seq = seqArg(info);
  busy_ = true;
  return (new ImageWorker(env, this, info.This().As<Napi::Object>(), info[1].As<Napi::Object>(),
                          info[2].As<Napi::Object>(), static_cast<size_t>(info[3].As<Napi::Number>().Int64Value()),
                          seq, info[4].As<Napi::Number>().Int32Value()))
      ->start();
}

/** Runs `Context::runEncode` (context.h) off the JS thread. */
class EncodeWorker : public ContextWorker {
 public:
  EncodeWorker(Napi::Env env, JsContext* context, Napi::Object contextObject, std::vector<int32_t> tokens,
               std::vector<int32_t> lengths)
      : ContextWorker(env, context, contextObject), tokens_(std::move(tokens)), lengths_(std::move(lengths)) {}

  void Execute() override {
    try {
      if (context_->core().runEncode(tokens_, lengths_, out_, stride_, ms_, error_) != 0) SetError(error_);
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
Napi::Value JsContext::Encode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  check(env);
  if (!core_->pooled()) throw Napi::Error::New(env, "encode: the context was not created for pooled embeddings");
  std::vector<int32_t> tokens = toIntVector(info[0]);
  std::vector<int32_t> lengths = toIntVector(info[1]);
  int64_t total = 0;
  for (int32_t length : lengths) {
    if (length <= 0) throw Napi::RangeError::New(env, "encode: every sequence needs a token");
    total += length;
  }
  if (total != static_cast<int64_t>(tokens.size())) throw Napi::RangeError::New(env, "encode: lengths do not add up");
  const int64_t limit = std::min<int64_t>(core_->nBatch(), llama_n_ubatch(core_->get()));
  if (tokens.empty() || total > limit) {
    throw Napi::RangeError::New(env, "encode: " + std::to_string(total) + " tokens, the batch holds 1.." +
                                         std::to_string(limit));
  }
  if (lengths.size() > llama_n_seq_max(core_->get())) throw Napi::RangeError::New(env, "encode: too many sequences");
  for (int32_t token : tokens) {
    if (token < 0 || token >= core_->nVocab()) throw Napi::RangeError::New(env, "encode: token id out of range");
  }
  busy_ = true;
  return (new EncodeWorker(env, this, info.This().As<Napi::Object>(), std::move(tokens), std::move(lengths)))
      ->start();
}


}  // namespace

Napi::Object Initialize(Napi::Env env, Napi::Object exports) {
#if defined(__GLIBC__)
  // glibc gives each thread that allocates its own malloc arena, up to 8 per core, each holding its freed
  // pages: the model loader's thread, libuv's pool and V8's platform threads. At most two (as the common
  // MALLOC_ARENA_MAX=2 for servers) from here on: 5 MiB less resident after warm-up with the 0.5B model
  // (threads that allocated before the addon loaded keep theirs; MALLOC_ARENA_MAX=2 in the environment
  // gives 16 MiB). The engine's hot threads (ggml's pool) do not allocate per step. An explicit
  // MALLOC_ARENA_MAX in the environment wins.
  if (getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
#endif
  exports.Set("init", Napi::Function::New(env, Init));
  exports.Set("devices", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return deviceList(info.Env()); }));
  // cpuBackend() -> the CPU backend library init loaded instead of the prebuilt variants, or "" for those.
  exports.Set("cpuBackend", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                return Napi::String::New(info.Env(), gCpuBackend);
              }));
  exports.Set("loadBackend", Napi::Function::New(env, LoadBackend));
  exports.Set("validateGrammar", Napi::Function::New(env, ValidateGrammar));
  exports.Set("loadModel", Napi::Function::New(env, LoadModel));
  exports.Set("loadLora", Napi::Function::New(env, LoadLora));
  Model::Define(env, exports);
  Lora::Define(env, exports);
  JsContext::Define(env, exports);
  defineProjector(env, exports);
  defineTestEntryPoints(env, exports);
  return exports;
}

}  // namespace lmserve

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return lmserve::Initialize(env, exports); }

NODE_API_MODULE(lmserve_engine, InitModule)

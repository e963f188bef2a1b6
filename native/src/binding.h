// Node-API helpers the binding files share (engine.cpp, projector.cpp, testEntryPoints.cpp): llama.cpp's
// log lines captured per thread, JS value conversions, the worker that loads something slow off the JS
// thread, and a sequence's sampler built from its JS config. The pure C++ parts live in sampler.h and
// constraint.h; this header is the seam between them and the JS values.
#pragma once

#include <napi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "constraint.h"
#include "ggml.h"
#include "llama.h"
#include "sampler.h"

namespace lmserve {

/** The lowest llama.cpp log level that reaches stderr (ggml_log_level; default GGML_LOG_LEVEL_ERROR). */
extern std::atomic<int> gLogLevel;

/**
 * llama.cpp's (and mtmd's) log callback: lines at or above gLogLevel go to stderr, unless this thread
 * holds a LogCapture, which then takes them instead.
 */
void logCallback(ggml_log_level level, const char* text, void*);

/** Captures llama.cpp's log lines on this thread while alive: warnings and errors in `text`, info lines in `info`. */
struct LogCapture {
  std::string text;
  std::string info;
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  /** Also keeps llama.cpp's info lines (in `info`), e.g. the KV cache's size line. */
  void keepInfo();
};

/** The last `count` non-empty lines of captured log text, joined with "; " (the reason of a failure). */
std::string lastLines(const std::string& text, size_t count);

/**
 * Loads something slow (a model, a projector) off the JS thread: `load` runs on the worker thread with
 * llama.cpp's log captured and returns the handle or nullptr; `wrap` turns the handle into its JS object
 * on the JS thread. A failure rejects with the last `reasonLines` log lines, or `fallback`.
 */
template <typename Handle>
class LoadWorker : public Napi::AsyncWorker {
 public:
  using Load = std::function<Handle*()>;
  using Wrap = std::function<Napi::Value(Napi::Env, Handle*)>;

  LoadWorker(Napi::Env env, Load load, Wrap wrap, std::string fallback, size_t reasonLines)
      : Napi::AsyncWorker(env),
        deferred_(Napi::Promise::Deferred::New(env)),
        load_(std::move(load)),
        wrap_(std::move(wrap)),
        fallback_(std::move(fallback)),
        reasonLines_(reasonLines) {}

  /** Queues the worker and returns its promise. */
  Napi::Promise start() {
    Napi::Promise promise = deferred_.Promise();
    Queue();
    return promise;
  }

  void Execute() override {
    LogCapture capture;
    try {
      handle_ = load_();
    } catch (const std::exception& error) {
      capture.text += error.what();
    }
    if (handle_ == nullptr) {
      const std::string reason = lastLines(capture.text, reasonLines_);
      SetError(reason.empty() ? fallback_ : reason);
    }
  }

  void OnOK() override { deferred_.Resolve(wrap_(Env(), handle_)); }
  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Load load_;
  Wrap wrap_;
  std::string fallback_;
  size_t reasonLines_;
  Handle* handle_ = nullptr;
};

/** The int32 values of a JS Int32Array or array of numbers (anything else: empty). */
std::vector<int32_t> toIntVector(const Napi::Value& value);

/** The values of a JS Float32Array (anything else: empty). */
std::vector<float> toFloatVector(const Napi::Value& value);

/** A JS typed array (Int32Array or Float32Array) holding a copy of `values`. */
template <typename Array, typename T>
Array typedArrayOf(Napi::Env env, const std::vector<T>& values) {
  Array array = Array::New(env, values.size());
  std::copy(values.begin(), values.end(), array.Data());
  return array;
}

/** `object[key]` when it is a number, else `fallback`. */
double numberOr(const Napi::Object& object, const char* key, double fallback);

/**
 * A sequence's grammar from GBNF `gbnf` (rule `root`) over the table's vocabulary, lazy when `lazy` is
 * given (LazyStart). Throws a JS Error "grammar: <llama.cpp's parser message>" when it does not parse.
 */
std::unique_ptr<Constraint> constraintFrom(Napi::Env env, std::shared_ptr<const TokenTable> table,
                                           std::shared_ptr<MaskCache> cache, const std::string& gbnf,
                                           const std::string& root, const LazyStart* lazy = nullptr);

/**
 * A SequenceSampler from a JS config: {temperature, topK, topP, minP, repetitionPenalty,
 * frequencyPenalty, presencePenalty, seed, minTokens, biasIds, biasValues, banAlways, banEarly,
 * promptTokens, grammar?, grammarRoot?, grammarTriggers?, grammarBlockOpen?, grammarBlockClose?,
 * grammarStartsInBlock?}; with `grammarTriggers` (strings) the grammar is lazy (LazyStart). Throws a JS
 * Error when the grammar does not parse, or when there is a grammar and no `home` (no vocabulary to mask).
 */
std::unique_ptr<SequenceSampler> samplerFrom(Napi::Env env, const Napi::Object& config, int32_t nVocab,
                                             const GrammarHome* home);

/** The llama_model of a JS Model object (engine.cpp's class); nullptr once it is disposed. */
llama_model* modelOf(const Napi::Object& model);

/** Sets the test entry points on the addon's exports (testEntryPoints.cpp): sampleLogits, rowLogprobs, grammarMatches. */
void defineTestEntryPoints(Napi::Env env, Napi::Object exports);

}  // namespace lmserve

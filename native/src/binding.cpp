// The Node-API helpers of binding.h: llama.cpp's log routing and capture, JS value conversions, and a
// sequence's sampler (with its grammar) from a JS config.
#include "binding.h"

#include <cstdio>

namespace lmserve {

// ---------------------------------------------------------------------------------------------------
// Logging: llama.cpp's log lines at or above the chosen level go to stderr; a thread may also capture
// them (grammar validation reports the parser's message that way).

std::atomic<int> gLogLevel{GGML_LOG_LEVEL_ERROR};

namespace {
thread_local std::string* tCapture = nullptr;
thread_local std::string* tCaptureInfo = nullptr;
thread_local int tLastLevel = GGML_LOG_LEVEL_NONE;
}  // namespace

void logCallback(ggml_log_level level, const char* text, void*) {
  const int effective = level == GGML_LOG_LEVEL_CONT ? tLastLevel : level;
  if (level != GGML_LOG_LEVEL_CONT) tLastLevel = level;
  if (tCapture != nullptr) {
    // A capturing call reports what it needs in its own error; nothing reaches stderr meanwhile.
    if (effective >= GGML_LOG_LEVEL_WARN) tCapture->append(text);
    else if (tCaptureInfo != nullptr && effective >= GGML_LOG_LEVEL_INFO) tCaptureInfo->append(text);
    return;
  }
  if (effective >= gLogLevel.load()) std::fputs(text, stderr);
}

LogCapture::LogCapture() { tCapture = &text; }

LogCapture::~LogCapture() {
  tCapture = nullptr;
  tCaptureInfo = nullptr;
}

void LogCapture::keepInfo() { tCaptureInfo = &info; }

/** The last `count` non-empty lines of captured log text, joined with "; " (the reason of a failure). */
std::string lastLines(const std::string& text, size_t count) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  std::string joined;
  for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); i++) {
    joined += (joined.empty() ? "" : "; ") + lines[i];
  }
  return joined;
}

std::vector<int32_t> toIntVector(const Napi::Value& value) {
  std::vector<int32_t> out;
  if (value.IsTypedArray()) {
    auto array = value.As<Napi::Int32Array>();
    out.assign(array.Data(), array.Data() + array.ElementLength());
  } else if (value.IsArray()) {
    auto array = value.As<Napi::Array>();
    out.reserve(array.Length());
    for (uint32_t i = 0; i < array.Length(); i++) out.push_back(array.Get(i).As<Napi::Number>().Int32Value());
  }
  return out;
}

std::vector<float> toFloatVector(const Napi::Value& value) {
  std::vector<float> out;
  if (value.IsTypedArray()) {
    auto array = value.As<Napi::Float32Array>();
    out.assign(array.Data(), array.Data() + array.ElementLength());
  }
  return out;
}

double numberOr(const Napi::Object& object, const char* key, double fallback) {
  Napi::Value value = object.Get(key);
  return value.IsNumber() ? value.As<Napi::Number>().DoubleValue() : fallback;
}

namespace {

SamplingParams paramsFrom(const Napi::Object& config) {
  SamplingParams params;
  params.temperature = numberOr(config, "temperature", 1.0);
  params.topK = static_cast<int32_t>(numberOr(config, "topK", 0));
  params.topP = numberOr(config, "topP", 1.0);
  params.minP = numberOr(config, "minP", 0.0);
  params.repetitionPenalty = numberOr(config, "repetitionPenalty", 1.0);
  params.frequencyPenalty = numberOr(config, "frequencyPenalty", 0.0);
  params.presencePenalty = numberOr(config, "presencePenalty", 0.0);
  params.seed = static_cast<uint32_t>(static_cast<int64_t>(numberOr(config, "seed", 0)) & 0xffffffff);
  params.minTokens = static_cast<int32_t>(numberOr(config, "minTokens", 0));
  return params;
}

}  // namespace

/**
 * A sequence's grammar from GBNF `gbnf` (rule `root`) over the table's vocabulary, lazy when `lazy` is
 * given (LazyStart). Throws a JS Error "grammar: <llama.cpp's parser message>" when it does not parse.
 */
std::unique_ptr<Constraint> constraintFrom(Napi::Env env, std::shared_ptr<const TokenTable> table,
                                           std::shared_ptr<MaskCache> cache, const std::string& gbnf,
                                           const std::string& root, const LazyStart* lazy) {
  std::string reason;
  {
    LogCapture capture;
    try {
      if (lazy != nullptr) return std::make_unique<Constraint>(std::move(table), std::move(cache), gbnf, root, *lazy);
      return std::make_unique<Constraint>(std::move(table), std::move(cache), gbnf, root);
    } catch (const std::exception& error) {
      reason = capture.text.empty() ? error.what() : capture.text;
    }
  }
  throw Napi::Error::New(env, "grammar: " + reason);
}

/**
 * A SequenceSampler from a JS config: {temperature, topK, topP, minP, repetitionPenalty,
 * frequencyPenalty, presencePenalty, seed, minTokens, biasIds, biasValues, banAlways, banEarly,
 * promptTokens, grammar?, grammarRoot?, grammarTriggers?, grammarBlockOpen?, grammarBlockClose?,
 * grammarStartsInBlock?}; with `grammarTriggers` (strings) the grammar is lazy (LazyStart). Throws a JS Error when the grammar does not parse, or when
 * there is a grammar and no `home` (no vocabulary to mask).
 */
std::unique_ptr<SequenceSampler> samplerFrom(Napi::Env env, const Napi::Object& config, int32_t nVocab,
                                             const GrammarHome* home) {
  std::vector<int32_t> biasIds = toIntVector(config.Get("biasIds"));
  std::vector<float> biasValues = toFloatVector(config.Get("biasValues"));
  std::vector<std::pair<int32_t, float>> bias;
  for (size_t i = 0; i < biasIds.size() && i < biasValues.size(); i++) bias.emplace_back(biasIds[i], biasValues[i]);
  std::unique_ptr<Constraint> constraint;
  Napi::Value text = config.Get("grammar");
  if (text.IsString()) {
    if (home == nullptr) throw Napi::Error::New(env, "grammar: a grammar needs a model's vocabulary");
    Napi::Value rootValue = config.Get("grammarRoot");
    std::string root = rootValue.IsString() ? rootValue.As<Napi::String>().Utf8Value() : "root";
    Napi::Value triggers = config.Get("grammarTriggers");
    if (triggers.IsArray()) {
      LazyStart lazy;
      const Napi::Array list = triggers.As<Napi::Array>();
      for (uint32_t i = 0; i < list.Length(); i++) {
        Napi::Value trigger = list.Get(i);
        if (!trigger.IsString()) throw Napi::TypeError::New(env, "grammar: grammarTriggers holds strings");
        lazy.triggers.push_back(trigger.As<Napi::String>().Utf8Value());
      }
      Napi::Value open = config.Get("grammarBlockOpen");
      Napi::Value close = config.Get("grammarBlockClose");
      if (open.IsString()) lazy.blockOpen = open.As<Napi::String>().Utf8Value();
      if (close.IsString()) lazy.blockClose = close.As<Napi::String>().Utf8Value();
      lazy.startsInBlock = config.Get("grammarStartsInBlock").ToBoolean();
      constraint = constraintFrom(env, home->table(), home->cache, text.As<Napi::String>().Utf8Value(), root, &lazy);
    } else {
      constraint = constraintFrom(env, home->table(), home->cache, text.As<Napi::String>().Utf8Value(), root);
    }
  }
  return std::make_unique<SequenceSampler>(nVocab, paramsFrom(config), std::move(bias),
                                           toIntVector(config.Get("banAlways")), toIntVector(config.Get("banEarly")),
                                           toIntVector(config.Get("promptTokens")), std::move(constraint));
}

}  // namespace lmserve

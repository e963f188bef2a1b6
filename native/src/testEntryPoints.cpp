// Test entry points: the sampler, the raw logprobs and llama.cpp's grammar matcher on given inputs,
// without a model (test/unit/engine/nativeSampler.test.ts and the guided-decoding suites call them). The
// context's own test entry points (grammarMask, sampleRows) need its vocabulary and stay on Context.
#include <algorithm>
#include <string>

#include "binding.h"
#include "llama-grammar.h"
#include "sampler.h"

namespace lmserve {
namespace {

/** sampleLogits(logits: Float32Array, config, steps) -> Int32Array: `steps` draws of one sampler on the same row. */
Napi::Value SampleLogits(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto logits = info[0].As<Napi::Float32Array>();
  const int32_t nVocab = static_cast<int32_t>(logits.ElementLength());
  auto sampler = samplerFrom(env, info[1].As<Napi::Object>(), nVocab, static_cast<const GrammarHome*>(nullptr));
  const int32_t steps = info[2].As<Napi::Number>().Int32Value();
  auto out = Napi::Int32Array::New(env, static_cast<size_t>(std::max(steps, 0)));
  for (int32_t i = 0; i < steps; i++) out[static_cast<size_t>(i)] = sampler->sample(logits.Data());
  return out;
}

/**
 * grammarMatches(gbnf, root, text) -> boolean: whether the grammar's root matches all of `text` (fed code
 * point by code point, without a vocabulary). Test entry point: the guided-decoding suites judge stopped
 * outputs with llama.cpp's own grammar engine. Uses llama.cpp's internal grammar functions of the same
 * build; an unparsable grammar is an Error.
 */
Napi::Value GrammarMatches(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string gbnf = info[0].As<Napi::String>().Utf8Value();
  std::string root = info[1].As<Napi::String>().Utf8Value();
  std::string text = info[2].As<Napi::String>().Utf8Value();
  llama_grammar* grammar = nullptr;
  try {
    grammar = llama_grammar_init_impl(nullptr, gbnf.c_str(), root.c_str(), false, nullptr, 0, nullptr, 0);
  } catch (const std::exception&) {
    grammar = nullptr;
  }
  if (grammar == nullptr) throw Napi::Error::New(env, "the grammar does not parse");
  bool matches = false;
  try {
    llama_grammar_accept_str(*grammar, text);
    for (const auto& stack : llama_grammar_get_stacks(grammar)) {
      if (stack.empty()) matches = true;
    }
  } catch (const std::exception&) {
    matches = false;
  }
  llama_grammar_free_impl(grammar);
  return Napi::Boolean::New(env, matches);
}

/** rowLogprobs(logits, token, topN) -> {logprob, rank, topIds, topLogprobs} */
Napi::Value RowLogprobsJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto logits = info[0].As<Napi::Float32Array>();
  RowLogprobs lp = rawLogprobs(logits.Data(), static_cast<int32_t>(logits.ElementLength()),
                               info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int32Value());
  Napi::Object out = Napi::Object::New(env);
  out.Set("logprob", lp.logprob);
  out.Set("rank", lp.rank);
  out.Set("topIds", typedArrayOf<Napi::Int32Array>(env, lp.topIds));
  out.Set("topLogprobs", typedArrayOf<Napi::Float32Array>(env, lp.topLogprobs));
  return out;
}

}  // namespace

void defineTestEntryPoints(Napi::Env env, Napi::Object exports) {
  exports.Set("sampleLogits", Napi::Function::New(env, SampleLogits));
  exports.Set("rowLogprobs", Napi::Function::New(env, RowLogprobsJs));
  exports.Set("grammarMatches", Napi::Function::New(env, GrammarMatches));
}

}  // namespace lmserve

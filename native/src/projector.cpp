// The projector's Node-API classes (see projector.h): Projector (info, tokenize with images, dispose),
// MediaPrompt (mtmd's chunks of one prompt) and loadProjector.
#include "projector.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "binding.h"
#include "mtmd-helper.h"

namespace lmserve {
namespace {

/** A prompt tokenized with its images: mtmd's chunks, kept for the image chunks' evaluation. */
class MediaPrompt : public Napi::ObjectWrap<MediaPrompt> {
 public:
  static Napi::FunctionReference constructor;

  static void Define(Napi::Env env, Napi::Object exports) {
    Napi::Function fn = DefineClass(env, "MediaPrompt", {InstanceMethod("dispose", &MediaPrompt::Dispose)});
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    exports.Set("MediaPrompt", fn);
  }

  explicit MediaPrompt(const Napi::CallbackInfo& info) : Napi::ObjectWrap<MediaPrompt>(info) {
    chunks_ = static_cast<mtmd_input_chunks*>(info[0].As<Napi::External<mtmd_input_chunks>>().Data());
  }
  ~MediaPrompt() override { free(); }

  const mtmd_input_chunk* chunk(size_t index) const {
    return chunks_ != nullptr && index < mtmd_input_chunks_size(chunks_) ? mtmd_input_chunks_get(chunks_, index) : nullptr;
  }

 private:
  void free() {
    if (chunks_ != nullptr) mtmd_input_chunks_free(chunks_);
    chunks_ = nullptr;
  }
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    free();
    return info.Env().Undefined();
  }
  mtmd_input_chunks* chunks_ = nullptr;
};

Napi::FunctionReference MediaPrompt::constructor;

/** A loaded multimodal projector (`--mmproj`), bound to its text model. */
class Projector : public Napi::ObjectWrap<Projector> {
 public:
  static Napi::FunctionReference constructor;

  static void Define(Napi::Env env, Napi::Object exports) {
    Napi::Function fn = DefineClass(env, "Projector",
                                    {
                                        InstanceMethod("info", &Projector::Info),
                                        InstanceMethod("tokenize", &Projector::Tokenize),
                                        InstanceMethod("dispose", &Projector::Dispose),
                                    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    exports.Set("Projector", fn);
  }

  explicit Projector(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Projector>(info) {
    ctx_ = static_cast<mtmd_context*>(info[0].As<Napi::External<mtmd_context>>().Data());
    modelRef_ = Napi::Persistent(info[1].As<Napi::Object>());
  }
  ~Projector() override { free(); }

  mtmd_context* get() const { return ctx_; }

 private:
  void free() {
    if (ctx_ != nullptr) mtmd_free(ctx_);
    ctx_ = nullptr;
    if (!modelRef_.IsEmpty()) modelRef_.Reset();
  }

  void check(Napi::Env env) const {
    if (ctx_ == nullptr) throw Napi::Error::New(env, "the projector has been disposed");
  }

  Napi::Value Info(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("vision", mtmd_support_vision(ctx_));
    out.Set("audio", mtmd_support_audio(ctx_));
    out.Set("marker", mtmd_get_marker(ctx_) != nullptr ? mtmd_get_marker(ctx_) : mtmd_default_marker());
    out.Set("mrope", mtmd_decode_use_mrope(ctx_));
    return out;
  }

  /**
   * tokenize(text, images: Uint8Array[]) -> {chunks, prompt}: the text (with one marker per image) and
   * the images' encoded bytes as mtmd's chunks. Throws an Error whose `imageIndex` names an image that
   * does not decode; a plain Error when the markers and images do not pair up.
   */
  Napi::Value Tokenize(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    check(env);
    std::string text = info[0].As<Napi::String>().Utf8Value();
    Napi::Array images = info[1].As<Napi::Array>();
    std::vector<mtmd_bitmap*> bitmaps;
    const auto freeBitmaps = [&]() {
      for (mtmd_bitmap* bitmap : bitmaps) mtmd_bitmap_free(bitmap);
    };
    for (uint32_t i = 0; i < images.Length(); i++) {
      Napi::Uint8Array bytes = images.Get(i).As<Napi::Uint8Array>();
      LogCapture capture;
      mtmd_helper_bitmap_wrapper wrapper =
          mtmd_helper_bitmap_init_from_buf(ctx_, bytes.Data(), bytes.ByteLength(), false, mtmd_helper_init_opt_default());
      if (wrapper.bitmap == nullptr) {
        freeBitmaps();
        Napi::Error error = Napi::Error::New(env, "the image could not be decoded");
        error.Set("imageIndex", Napi::Number::New(env, i));
        throw error;
      }
      bitmaps.push_back(wrapper.bitmap);
    }
    mtmd_input_text input{text.c_str(), text.size(), false, true};
    mtmd_input_chunks* chunks = mtmd_input_chunks_init();
    LogCapture capture;
    const int32_t status = mtmd_tokenize(ctx_, chunks, &input, const_cast<const mtmd_bitmap**>(bitmaps.data()), bitmaps.size());
    freeBitmaps();
    if (status != 0) {
      mtmd_input_chunks_free(chunks);
      throw Napi::Error::New(env, status == 1 ? "the number of images does not match the image markers"
                                              : "an image could not be preprocessed: " + capture.text);
    }
    Napi::Array list = Napi::Array::New(env);
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
      const mtmd_input_chunk* chunk = mtmd_input_chunks_get(chunks, i);
      Napi::Object entry = Napi::Object::New(env);
      if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
        size_t n = 0;
        const llama_token* tokens = mtmd_input_chunk_get_tokens_text(chunk, &n);
        auto array = Napi::Int32Array::New(env, n);
        std::copy(tokens, tokens + n, array.Data());
        entry.Set("type", "text");
        entry.Set("tokens", array);
      } else {
        entry.Set("type", mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_IMAGE ? "image" : "audio");
        entry.Set("nTokens", static_cast<double>(mtmd_input_chunk_get_n_tokens(chunk)));
        entry.Set("nPos", static_cast<double>(mtmd_input_chunk_get_n_pos(chunk)));
        const char* id = mtmd_input_chunk_get_id(chunk);
        entry.Set("id", id != nullptr ? id : "");
      }
      list.Set(static_cast<uint32_t>(i), entry);
    }
    Napi::Object out = Napi::Object::New(env);
    out.Set("chunks", list);
    out.Set("prompt", MediaPrompt::constructor.New({Napi::External<mtmd_input_chunks>::New(env, chunks)}));
    return out;
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    free();
    return info.Env().Undefined();
  }

  mtmd_context* ctx_ = nullptr;
  Napi::ObjectReference modelRef_;
};

Napi::FunctionReference Projector::constructor;

/** loadProjector(path, model, {threads, useGpu}) -> Promise<Projector> */
Napi::Value LoadProjector(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path = info[0].As<Napi::String>().Utf8Value();
  Napi::Object model = info[1].As<Napi::Object>();
  Napi::Object options = info[2].As<Napi::Object>();
  llama_model* text = modelOf(model);
  const int threads = static_cast<int>(numberOr(options, "threads", 4));
  const bool useGpu = options.Get("useGpu").ToBoolean();
  // The text model stays alive until the projector is built (and then through the projector's reference).
  auto keep = std::make_shared<Napi::ObjectReference>(Napi::Persistent(model));
  auto load = [path, text, threads, useGpu]() -> mtmd_context* {
    mtmd_context_params params = mtmd_context_params_default();
    params.use_gpu = useGpu;
    params.n_threads = threads;
    params.print_timings = false;
    params.warmup = false;
    return mtmd_init_from_file(path.c_str(), text, params);
  };
  auto wrap = [keep](Napi::Env env, mtmd_context* projector) -> Napi::Value {
    return Projector::constructor.New({Napi::External<mtmd_context>::New(env, projector), keep->Value()});
  };
  // mtmd explains a refusal over its last lines (e.g. the width mismatch, then a hint): keep two.
  return (new LoadWorker<mtmd_context>(env, load, wrap, "llama.cpp could not load the projector", 2))->start();
}

}  // namespace

void defineProjector(Napi::Env env, Napi::Object exports) {
  exports.Set("loadProjector", Napi::Function::New(env, LoadProjector));
  MediaPrompt::Define(env, exports);
  Projector::Define(env, exports);
}

mtmd_context* projectorOf(const Napi::Object& projector) { return Projector::Unwrap(projector)->get(); }

const mtmd_input_chunk* mediaChunkOf(const Napi::Object& prompt, size_t index) {
  return MediaPrompt::Unwrap(prompt)->chunk(index);
}

}  // namespace lmserve

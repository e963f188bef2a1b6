// Images for vision-language models: a multimodal projector (llama.cpp's mtmd, `--mmproj`) bound to its
// text model, and prompts tokenized with their images into mtmd's text and image chunks. The context
// evaluates an image chunk (engine.cpp's evalImage) through the accessors below.
#pragma once

#include <napi.h>

#include <cstddef>

#include "mtmd.h"

namespace lmserve {

/** Sets loadProjector and the Projector and MediaPrompt classes on the addon's exports. */
void defineProjector(Napi::Env env, Napi::Object exports);

/** The mtmd context of a JS Projector object; nullptr once it is disposed. */
mtmd_context* projectorOf(const Napi::Object& projector);

/** Chunk `index` of a JS MediaPrompt object; nullptr when out of range or disposed. */
const mtmd_input_chunk* mediaChunkOf(const Napi::Object& prompt, size_t index);

}  // namespace lmserve

/**
 * Model sources for `lmserve serve|pull|list`: local paths, `hf:` URIs and URLs resolved to verified
 * local GGUF files in a download cache. See `resolveModel.ts` for the behaviour and its sources.
 */
export {
  type CacheRecord,
  cacheRecordPath,
  cacheRecordSuffix,
  partialDownloadSuffix,
  readCacheRecord,
  removeCachedModel,
} from "./cacheRecord.ts";
export { defaultDownloadDir } from "./defaultDownloadDir.ts";
export { type CachedModel, formatModelList, listModels } from "./listModels.ts";
export { ModelSourceError, type ModelSourceErrorCode } from "./ModelSourceError.ts";
export {
  classifyModelSource,
  displaySource,
  type HuggingFaceUri,
  type ModelSourceKind,
  modelIdFromSource,
  parseHuggingFaceUri,
} from "./modelSource.ts";
export {
  createProgressReporter,
  type DownloadProgress,
  formatBytes,
  type ProgressReporter,
  type ProgressReporterOptions,
  type ProgressStream,
} from "./progress.ts";
export { type PullModelOptions, pullModel } from "./pullModel.ts";
export { type ResolvedModel, type ResolveModelOptions, resolveModel } from "./resolveModel.ts";
export { type GgufVerification, hasGgufMagic, verifyGgufFile } from "./verifyGguf.ts";

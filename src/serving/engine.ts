/**
 * The engine as serving sees it: the parts of a loaded model's `Scheduler` and `ModelHost` that the
 * endpoints read. The real engine (`engine/Scheduler.ts`) satisfies these types as it is; the tests'
 * fake engine (`test/helpers/fakeEngine.ts`) implements them without a model.
 */
import type { ModelHost } from "../engine/ModelHost.ts";
import type { Scheduler } from "../engine/Scheduler.ts";

/** A loaded model as serving reads it: names, limits, tokenizer, vocabulary, the GGUF's chat template, projector. */
export type EngineHost = Pick<
  ModelHost,
  | "names"
  | "id"
  | "modelPath"
  | "info"
  | "chatTemplate"
  | "created"
  | "vocabulary"
  | "vocabularySize"
  | "contextSize"
  | "placement"
  | "pooling"
  | "projector"
  | "imageMarker"
  | "acceptsImages"
  | "infillTokens"
  | "bosText"
  | "eosText"
  | "tokenize"
  | "withBos"
  | "detokenize"
> &
  Partial<Pick<ModelHost, "task" | "encoder" | "batchSize" | "sequences" | "rerankPrompt">>;

/**
 * A loaded model's scheduler as serving uses it: admission, generations and the load figures, and the
 * LoRA adapters it serves (absent on engines without adapters: encoders, the tests' fake engine).
 */
export type EngineModel = Pick<
  Scheduler,
  "submit" | "assertCapacity" | "runningCount" | "waitingCount" | "kvCacheUsage"
> &
  Partial<Pick<Scheduler, "adapter" | "adapterList" | "loadAdapter" | "unloadAdapter">> & {
    /** The model the scheduler runs. */
    readonly host: EngineHost;
  };

import { badRequest, modelFileChanged, modelNotFound } from "../errors.ts";
import type { ModelFileWatch } from "../models/modelFileWatch.ts";
import type { ModelObject } from "../protocol/models.ts";
import type { EngineModel } from "./engine.ts";

/**
 * A served model's chat settings, which belong to serving, not to the engine: from the model's entry of
 * the config file, else the server's flags, else what the GGUF says.
 */
export type ChatSettings = {
  /** The Jinja chat template (`--chat-template`, else the GGUF's), or null: then ChatML. */
  readonly template: string | null;
  /** `--tool-call-parser`; absent: detected from the template per request. */
  readonly toolCallParser?: string;
  /** `--reasoning-parser`; absent: detected from the template per request. */
  readonly reasoningParser?: string;
  /**
   * Honour a request's own `chat_template` (vLLM's `--trust-request-chat-template`): a Jinja template
   * runs arbitrary loops, so by default only the model's and the server's templates are used.
   */
  readonly trustRequestTemplate: boolean;
};

/** A model as an endpoint serves it: the name asked for, its scheduler and its chat settings. */
export type ServedModel<Model extends EngineModel = EngineModel> = {
  /** The name the request used (or the model id when it named none). */
  readonly name: string;
  /** The model's scheduler (the engine). */
  readonly scheduler: Model;
  /** Its chat settings. */
  readonly chat: ChatSettings;
  /** The shorter embedding widths it was trained to give (`--matryoshka-dimensions`), ascending; empty: none. */
  readonly matryoshkaDimensions: readonly number[];
};

/** Options of {@link ModelRegistry.add}. */
export type ServedModelOptions = {
  /** Refuse the model (503) once its file changed on disk. */
  watch?: ModelFileWatch;
  /** Its chat settings. Defaults to the GGUF's template, parsers detected, request templates refused. */
  chat?: ChatSettings;
  /**
   * The shorter embedding widths the model was trained to give (Matryoshka, `--matryoshka-dimensions`);
   * `/v1/embeddings` `dimensions` may name one. Defaults to none.
   */
  matryoshkaDimensions?: readonly number[];
};

/**
 * The loaded models by every name they are served under, with their serving settings. `Model` is the scheduler type: the real
 * `Scheduler` at startup (which also closes them), any {@link EngineModel} for the endpoints and tests.
 */
export class ModelRegistry<Model extends EngineModel = EngineModel> {
  private readonly byName = new Map<string, Model>();
  private readonly schedulers: Model[] = [];
  private readonly watches = new Map<Model, ModelFileWatch>();
  private readonly chats = new Map<Model, ChatSettings>();
  private readonly matryoshka = new Map<Model, readonly number[]>();

  /**
   * Adds a loaded model under all of its served names, with its chat settings; with a `watch`, the model
   * is refused (503) once its file has changed on disk.
   */
  add(scheduler: Model, options: ServedModelOptions = {}): void {
    this.schedulers.push(scheduler);
    if (options.watch) this.watches.set(scheduler, options.watch);
    this.chats.set(
      scheduler,
      options.chat ?? { template: scheduler.host.chatTemplate, trustRequestTemplate: false },
    );
    if (options.matryoshkaDimensions) this.matryoshka.set(scheduler, options.matryoshkaDimensions);
    for (const name of scheduler.host.names) this.byName.set(name, scheduler);
  }

  /** One line per model whose file changed on disk (`modelFileWatch.ts`), checked now; empty when none. */
  changedModelFiles(): string[] {
    return [...this.watches].flatMap(([scheduler, watch]) =>
      watch.check() ? [] : [`${scheduler.host.id}: ${watch.changed}`],
    );
  }

  /** Every loaded model's scheduler, in load order. */
  all(): readonly Model[] {
    return this.schedulers;
  }

  /**
   * The scheduler serving `name`; its file is checked first (one `stat`).
   * @throws ApiError 404 naming the available models when no model has that name; 503
   *   `model_file_changed` when the model's file changed on disk while served.
   */
  get(name: string): Model {
    const scheduler = this.byName.get(name);
    if (!scheduler) throw modelNotFound(name, [...this.byName.keys()]);
    const watch = this.watches.get(scheduler);
    if (watch && !watch.check()) throw modelFileChanged(name, watch.changed ?? "changed");
    return scheduler;
  }

  /**
   * The model a request names, or the first served model (its id) when `name` is absent or null:
   * `model` is optional on every route, as llama-server serves its one model whatever the name.
   * With `task`, the model must serve it (`generate`: a generation endpoint; `embed`: embeddings, which
   * decoder models also give; `rerank`: a reranker).
   * @throws ApiError 404 for a name no model has; 400 when the model does not serve `task`; 503 as {@link get}.
   */
  resolve(name: string | null | undefined, task?: "generate" | "embed" | "rerank"): ServedModel<Model> {
    const served = name ?? this.schedulers[0]?.host.id;
    if (served === undefined) throw modelNotFound("(none)", []);
    const scheduler = this.get(served);
    if (task !== undefined) assertTask(served, scheduler.host.task ?? "generate", task);
    return {
      name: served,
      scheduler,
      chat: this.chats.get(scheduler) as ChatSettings,
      matryoshkaDimensions: this.matryoshka.get(scheduler) ?? [],
    };
  }

  /** OpenAI model objects, one per served name (aliases included, each with `root` = the model id). */
  modelObjects(): ModelObject[] {
    return [...this.byName.entries()].map(([name, scheduler]) => toModelObject(name, scheduler));
  }

  /**
   * The model object of one served name.
   * @throws ApiError 404 when no model has that name.
   */
  modelObject(name: string): ModelObject {
    return toModelObject(name, this.get(name));
  }
}

function toModelObject(name: string, scheduler: EngineModel): ModelObject {
  const { host } = scheduler;
  return {
    id: name,
    object: "model",
    created: host.created,
    owned_by: "lmserve",
    root: host.id,
    parent: null,
    max_model_len: host.contextSize,
    capabilities: { vision: host.acceptsImages, task: host.task ?? "generate" },
  };
}

/** What each endpoint family needs, and which kind of model serves it (for the 400's message). */
const TASK_NEEDS = {
  generate: { serves: ["generate"], kind: "a generative (decoder) model" },
  embed: { serves: ["embed", "generate"], kind: "an embedding model or a generative model" },
  rerank: { serves: ["rerank"], kind: "a reranker (a cross-encoder with rank pooling, --task rerank)" },
} as const;

/** @throws ApiError 400 when a model of task `has` cannot serve an endpoint that needs `needs`. */
function assertTask(
  name: string,
  has: "generate" | "embed" | "rerank",
  needs: "generate" | "embed" | "rerank",
): void {
  const need = TASK_NEEDS[needs];
  if ((need.serves as readonly string[]).includes(has)) return;
  const what = needs === "generate" ? "generation" : needs === "embed" ? "embeddings" : "reranking";
  throw badRequest(
    `The model ${name} is a ${has} model (task ${has}) and does not serve ${what}; ${what} needs ${need.kind}.`,
    "model",
  );
}

import { modelFileChanged, modelNotFound } from "../errors.ts";
import type { ModelFileWatch } from "../models/modelFileWatch.ts";
import type { ModelObject } from "../protocol/models.ts";
import type { EngineModel } from "./engine.ts";

/**
 * The loaded models by every name they are served under. `Model` is the scheduler type: the real
 * `Scheduler` at startup (which also closes them), any {@link EngineModel} for the endpoints and tests.
 */
export class ModelRegistry<Model extends EngineModel = EngineModel> {
  private readonly byName = new Map<string, Model>();
  private readonly schedulers: Model[] = [];
  private readonly watches = new Map<Model, ModelFileWatch>();

  /**
   * Adds a loaded model under all of its served names; with `watch`, the model is refused (503) once its
   * file has changed on disk.
   */
  add(scheduler: Model, watch?: ModelFileWatch): void {
    this.schedulers.push(scheduler);
    if (watch) this.watches.set(scheduler, watch);
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
   * @throws ApiError 404 for a name no model has; 503 as {@link get}.
   */
  resolve(name: string | null | undefined): { name: string; scheduler: Model } {
    if (name !== undefined && name !== null) return { name, scheduler: this.get(name) };
    const first = this.schedulers[0];
    if (first === undefined) throw modelNotFound("(none)", []);
    return { name: first.host.id, scheduler: this.get(first.host.id) };
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
    capabilities: { vision: host.acceptsImages },
  };
}

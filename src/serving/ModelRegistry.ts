import type { Scheduler } from "../engine/Scheduler.ts";
import { modelNotFound } from "../errors.ts";
import type { ModelObject } from "../protocol/models.ts";

/** The loaded models by every name they are served under. */
export class ModelRegistry {
  private readonly byName = new Map<string, Scheduler>();
  private readonly schedulers: Scheduler[] = [];

  /** Adds a loaded model under all of its served names. */
  add(scheduler: Scheduler): void {
    this.schedulers.push(scheduler);
    for (const name of scheduler.host.names) this.byName.set(name, scheduler);
  }

  /** Every loaded model's scheduler, in load order. */
  all(): readonly Scheduler[] {
    return this.schedulers;
  }

  /**
   * The scheduler serving `name`.
   * @throws ApiError 404 naming the available models when no model has that name.
   */
  get(name: string): Scheduler {
    const scheduler = this.byName.get(name);
    if (!scheduler) throw modelNotFound(name, [...this.byName.keys()]);
    return scheduler;
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

function toModelObject(name: string, scheduler: Scheduler): ModelObject {
  const { host } = scheduler;
  return {
    id: name,
    object: "model",
    created: host.created,
    owned_by: "lmserve",
    root: host.id,
    parent: null,
    max_model_len: host.contextSize,
  };
}

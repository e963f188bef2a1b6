import { statSync } from "node:fs";
import type { LoraAdapter } from "../engine/LoraAdapter.ts";
import {
  type ApiError,
  badRequest,
  loraLoadFailed,
  loraNotFound,
  modelCapacity,
  modelFileChanged,
  modelLoadFailed,
  modelNotFound,
  modelNotLoaded,
  modelUnloaded,
  modelUnloading,
} from "../errors.ts";
import type { ModelFileWatch } from "../models/modelFileWatch.ts";
import type { ModelObject, ModelState, ModelStatus } from "../protocol/models.ts";
import type { EngineModel } from "./engine.ts";
import type { KeepAliveMs } from "./request/keepAlive.ts";

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

/** A model as its loader hands it over: the scheduler, its serving settings, its memory and how to free it. */
export type LoadedModel<Model extends EngineModel = EngineModel> = {
  readonly scheduler: Model;
  /** Its chat settings. Defaults as in {@link ServedModelOptions}. */
  readonly chat?: ChatSettings;
  /** Refuse the model (503) once its file changed on disk; stopped when the model is unloaded. */
  readonly watch?: ModelFileWatch;
  /** Its Matryoshka widths, as in {@link ServedModelOptions}. Defaults to none. */
  readonly matryoshkaDimensions?: readonly number[];
  /** Bytes it holds, as measured at load: weights + KV cache + projector. */
  readonly memoryBytes: number;
  /** Ends its scheduler (aborting anything left) and frees the model. */
  close(): Promise<void>;
};

/**
 * A model the server can serve without having it loaded: a file of `--models-dir`, of the download
 * cache, or a configured model (which also loads at startup). `parent` is the seam for a model served
 * on top of another (a LoRA adapter: its object's `parent` and `root` name the base model).
 */
export type ServableModel<Model extends EngineModel = EngineModel> = {
  /** Served names, the first is its id. */
  readonly names: readonly string[];
  /** Absolute path of its GGUF file, shown in `/v1/models`; absent for none. */
  readonly path?: string;
  /** Where it was found: `config` (a MODEL argument or config file entry), `models-dir`, `cache`. */
  readonly origin: "config" | "models-dir" | "cache";
  /** Bytes expected before a first load (file sizes); a model loaded once uses its measured bytes. */
  readonly estimatedBytes: number;
  /** Idle time before it unloads when requests set no `keep_alive`; absent: the registry's default. */
  readonly idleUnloadMs?: KeepAliveMs;
  /** The model it is served on top of (an adapter's base), or absent. */
  readonly parent?: string;
  /** Loads it. @throws Error with a one-line message when it cannot be loaded. */
  load(): Promise<LoadedModel<Model>>;
};

/** Why a model was unloaded (`lmserve:model_unloads_total{reason}`). */
export type UnloadReason = "request" | "keep_alive" | "idle" | "evicted" | "shutdown";

/** How a load ended (`lmserve:model_loads_total{outcome}`). */
export type LoadOutcome = "success" | "failure" | "no_capacity";

/** Callbacks of the registry's model lifecycle (metrics, logs). */
export type ModelLifecycleEvents<Model extends EngineModel = EngineModel> = {
  /** A load ended: its outcome, its time in seconds, and the error when it failed. */
  onLoad?(id: string, outcome: LoadOutcome, seconds: number, error?: unknown): void;
  /** A model is loaded and serves now. */
  onLoaded?(id: string, scheduler: Model, memoryBytes: number): void;
  /** A model was unloaded (its scheduler is closed). */
  onUnloaded?(id: string, scheduler: Model, reason: UnloadReason): void;
};

/** The residency policy of a {@link ModelRegistry}. Every field is optional. */
export type ResidencyOptions<Model extends EngineModel = EngineModel> = {
  /** Load an unloaded model when a request names it (`--models-autoload`). Defaults to false. */
  autoload?: boolean;
  /** `--models-max`: the most models loaded at once (least recently used idle ones are evicted). Absent: no limit. */
  maxModels?: number;
  /** `--memory-budget`: the most bytes (weights + KV cache + projector) loaded models hold. Absent: no limit. */
  memoryBudget?: number;
  /** `--idle-unload` in ms: idle time before a model unloads when neither request nor entry says. Absent: never. */
  idleUnloadMs?: KeepAliveMs;
  /**
   * How long an unload waits for the model's requests (`--shutdown-timeout`), in ms, before it ends
   * them with `model_unloaded`. Defaults to 30,000.
   */
  drainTimeoutMs?: number;
  /** Lifecycle callbacks. */
  events?: ModelLifecycleEvents<Model>;
  /** The clock, in ms since the epoch (tests). Defaults to `Date.now`. */
  now?: () => number;
};

/** A request's hold on a loaded model: the model is not unloaded or evicted before {@link release}. */
export type ModelLease = {
  /** The model's id. */
  readonly id: string;
  /** Ends the hold (once; later calls do nothing); the model's idle time starts when the last ends. */
  release(): void;
};

/** Options of {@link ModelRegistry.acquire}. */
export type AcquireOptions = {
  /** The request's `keep_alive` (parsed, ms; null: forever); absent: the model's default. */
  keepAliveMs?: KeepAliveMs;
  /** Ends the request with `reason` (an unload past its drain timeout); absent: it cannot be ended early. */
  abort?: (reason: ApiError) => void;
};

type Lease = { abort: ((reason: ApiError) => void) | undefined };

type Entry<Model extends EngineModel> = {
  readonly id: string;
  readonly names: readonly string[];
  readonly servable: ServableModel<Model> | undefined;
  state: ModelState;
  reason: string | undefined;
  loaded: LoadedModel<Model> | undefined;
  loading: Promise<void> | undefined;
  unloading: Promise<void> | undefined;
  readonly leases: Set<Lease>;
  /** Use order: the registry's use counter at this entry's latest use (a clock can tie within a millisecond). */
  lastUse: number;
  /** The latest request's keep-alive; undefined: the entry's or registry's default. */
  keepAliveMs: KeepAliveMs | undefined;
  expiresAt: number | null;
  timer: NodeJS.Timeout | undefined;
  /** Bytes measured at its last load. */
  measuredBytes: number | undefined;
};

/**
 * The servable models by every name they are served under, their state (loaded, loading, unloading,
 * unloaded, failed) and their serving settings. `Model` is the scheduler type: the real `Scheduler` at
 * startup, any {@link EngineModel} for the endpoints and tests.
 *
 * Residency (issue 28, as llama-server's router and Ollama): models load at startup, on `POST
 * /models/load`, or on demand ({@link acquire} with `autoload`); loads run one at a time, and requests
 * autoloading one model share its load. Before a load, the least recently used idle models (no request
 * holds them) are unloaded until the new one fits `maxModels` and `memoryBudget`; when it cannot fit,
 * the load is refused with 503 `model_capacity` and its numbers. An unload stops the model taking new
 * requests (503 `model_unloading`), lets the requests holding it finish (up to `drainTimeoutMs`, then
 * ends them with `model_unloaded`), then frees it. A failed load leaves the model `failed` with its
 * reason; the next load retries.
 */
export class ModelRegistry<Model extends EngineModel = EngineModel> {
  private readonly byName = new Map<string, Entry<Model>>();
  private readonly entries: Entry<Model>[] = [];
  private readonly options: ResidencyOptions<Model>;
  private readonly now: () => number;
  /** Counts uses; orders entries for LRU eviction. */
  private uses = 0;
  /** Loads run one after another (residency decisions see every other load's result). */
  private loadChain: Promise<unknown> = Promise.resolve();

  /** @param options The residency policy; defaults: no autoload, no limits, never unload when idle. */
  constructor(options: ResidencyOptions<Model> = {}) {
    this.options = options;
    this.now = options.now ?? Date.now;
  }

  /** True when a request naming an unloaded model loads it (`--models-autoload`). */
  get autoload(): boolean {
    return this.options.autoload ?? false;
  }

  /**
   * Adds a loaded model under all of its served names, with its chat settings; with a `watch`, the model
   * is refused (503) once its file has changed on disk. Such a model has no loader: it is never
   * unloaded before the server closes.
   * @throws ConfigError-like Error when one of its names is taken.
   */
  add(scheduler: Model, options: ServedModelOptions = {}): void {
    const entry = this.newEntry(scheduler.host.names, undefined);
    entry.state = "loaded";
    entry.loaded = {
      scheduler,
      ...(options.chat ? { chat: options.chat } : {}),
      ...(options.watch ? { watch: options.watch } : {}),
      ...(options.matryoshkaDimensions ? { matryoshkaDimensions: options.matryoshkaDimensions } : {}),
      memoryBytes: 0,
      close: async () => undefined,
    };
  }

  /**
   * Registers a model that can be loaded later ({@link load}, {@link acquire}); it starts `unloaded`.
   * @throws Error naming the name when one of its names is already served.
   */
  addServable(servable: ServableModel<Model>): void {
    this.newEntry(servable.names, servable);
  }

  /** True when some model is served under `name` (loaded or not), or a loaded model's LoRA adapter. */
  has(name: string): boolean {
    return this.byName.has(name) || this.adapterHome(name) !== undefined;
  }

  /**
   * Loads a LoRA adapter GGUF onto the model `base` (absent: the default model) and serves it as `name`
   * (vLLM's `/v1/load_lora_adapter`, whose checks and messages these follow).
   * @throws ApiError 400 when the name is taken (a model or an adapter), the model takes no adapters, or
   *   the file is not an adapter for it (`lora_load_failed`); 404 (`lora_not_found`) when no file is at
   *   `path`, `model_not_found` for an unknown base; 503 when the base is not loaded.
   */
  async loadAdapter(name: string, path: string, base?: string): Promise<void> {
    if (this.byName.has(name)) {
      throw badRequest(`'${name}' is the name of a served model; choose another lora_name.`, "lora_name");
    }
    if (this.adapterHome(name)) {
      throw badRequest(`The lora adapter '${name}' has already been loaded.`, "lora_name");
    }
    const baseName = base ?? this.defaultName();
    if (baseName === undefined) throw modelNotFound("(none)", []);
    const entry = this.entryOf(baseName);
    // An unloading base would drop the adapter with it; an unloaded one loads first when autoload is on.
    if (entry.state === "unloading") throw modelUnloading(baseName);
    if (entry.state !== "loaded" && this.autoload && entry.servable) await this.loadEntry(entry, false);
    const scheduler = this.get(baseName);
    if (!scheduler.loadAdapter) {
      throw badRequest(`The model '${baseName}' does not take LoRA adapters.`, "base_model_name");
    }
    let isFile = false;
    try {
      isFile = statSync(path).isFile();
    } catch {
      // Absent or unreadable: the 404 below.
    }
    if (!isFile) {
      throw loraNotFound(name, "lora_path", `No adapter found at lora_path '${path}'.`);
    }
    try {
      await scheduler.loadAdapter(name, path);
    } catch (error) {
      if (this.has(name))
        throw badRequest(`The lora adapter '${name}' has already been loaded.`, "lora_name");
      throw loraLoadFailed(name, oneLine(error).replace(/^The LoRA adapter .* could not be loaded: /, ""));
    }
    if (entry.state !== "loaded") {
      // The base began unloading while the adapter loaded: it goes with it.
      await scheduler.unloadAdapter?.(name).catch(() => undefined);
      throw modelUnloading(baseName);
    }
  }

  /**
   * Stops serving the LoRA adapter `name` at once (vLLM's `/v1/unload_lora_adapter`); requests already
   * queued or running under it finish first, then it is freed (the returned promise).
   * @throws ApiError 404 (`lora_not_found`) when no loaded model serves an adapter of that name.
   */
  unloadAdapter(name: string): Promise<void> {
    const home = this.adapterHome(name);
    if (!home?.scheduler.unloadAdapter) throw loraNotFound(name);
    return home.scheduler.unloadAdapter(name);
  }

  /** The loaded model serving LoRA adapter `name` (model names first: an adapter never shadows one). */
  private adapterHome(
    name: string,
  ): { entry: Entry<Model>; scheduler: Model; adapter: LoraAdapter } | undefined {
    if (this.byName.has(name)) return undefined;
    for (const entry of this.entries) {
      const scheduler = entry.loaded?.scheduler;
      const adapter = scheduler?.adapter?.(name);
      if (scheduler && adapter) return { entry, scheduler, adapter };
    }
    return undefined;
  }

  /** One line per model whose file changed on disk (`modelFileWatch.ts`), checked now; empty when none. */
  changedModelFiles(): string[] {
    return this.entries.flatMap((entry) => {
      const watch = entry.loaded?.watch;
      return watch && !watch.check() ? [`${entry.id}: ${watch.changed}`] : [];
    });
  }

  /** Every loaded model's scheduler (also those being unloaded), in registration order. */
  all(): readonly Model[] {
    return this.entries.flatMap((entry) => (entry.loaded ? [entry.loaded.scheduler] : []));
  }

  /**
   * The name a request that names no model gets: the first registered model that is loaded, else the
   * first that has not failed to load (with `--models-dir` alone, a broken file first in order would
   * otherwise answer every such request), else the first.
   */
  defaultName(): string | undefined {
    const entry =
      this.entries.find((candidate) => candidate.state === "loaded") ??
      this.entries.find((candidate) => candidate.state !== "failed") ??
      this.entries[0];
    return entry?.id;
  }

  /**
   * The scheduler serving `name`; its file is checked first (one `stat`).
   * @throws ApiError 404 naming the available models when no model has that name; 503
   *   `model_not_loaded` / `model_unloading` / `model_load_failed` when it is not loaded (see
   *   {@link acquire} for the path that loads it); 503 `model_file_changed` when the model's file changed
   *   on disk while served.
   */
  get(name: string): Model {
    const entry = this.entryOf(name);
    const loaded = entry.loaded;
    if (!loaded) throw this.notLoaded(entry, name);
    if (loaded.watch && !loaded.watch.check())
      throw modelFileChanged(name, loaded.watch.changed ?? "changed");
    entry.lastUse = ++this.uses;
    return loaded.scheduler;
  }

  /**
   * The model a request names, or the first served model (its id) when `name` is absent or null:
   * `model` is optional on every route, as llama-server serves its one model whatever the name.
   * With `task`, the model must serve it (`generate`: a generation endpoint; `embed`: embeddings, which
   * decoder models also give; `rerank`: a reranker).
   * @throws ApiError 404 for a name no model has; 400 when the model does not serve `task`; 503 as {@link get}.
   */
  resolve(name: string | null | undefined, task?: "generate" | "embed" | "rerank"): ServedModel<Model> {
    const served = name ?? this.defaultName();
    if (served === undefined) throw modelNotFound("(none)", []);
    const home = this.adapterHome(served);
    if (home) {
      // An adapter's name: its base model, every generation under the adapter.
      const base = this.resolve(home.entry.id, task);
      return { ...base, name: served, scheduler: withAdapter(base.scheduler, home.adapter) };
    }
    const scheduler = this.get(served);
    if (task !== undefined) assertTask(served, scheduler.host.task ?? "generate", task);
    const loaded = this.entryOf(served).loaded;
    const chat = loaded?.chat ?? { template: scheduler.host.chatTemplate, trustRequestTemplate: false };
    return { name: served, scheduler, chat, matryoshkaDimensions: loaded?.matryoshkaDimensions ?? [] };
  }

  /**
   * Holds the model `name` (absent or null: the default model) for one request, loading it first when
   * it is not loaded and autoload is on (the request waits for the load: its time to first token
   * includes it). A loaded model is held at once (no await needed on the hot path: the result is a
   * lease, not a promise). A request's `keep_alive` becomes the model's idle time from now on.
   * @throws ApiError 404 for an unknown name; 503 `model_unloading` while it unloads,
   *   `model_not_loaded` when it is not loaded and autoload is off, `model_load_failed` or
   *   `model_capacity` when the load fails or does not fit.
   */
  acquire(name: string | null | undefined, options: AcquireOptions = {}): ModelLease | Promise<ModelLease> {
    const served = name ?? this.defaultName();
    if (served === undefined) throw modelNotFound("(none)", []);
    // A LoRA adapter holds its base model.
    const entry = this.adapterHome(served)?.entry ?? this.entryOf(served);
    if (entry.state === "loaded") return this.hold(entry, options);
    if (entry.state === "unloading") throw modelUnloading(served);
    if (!this.autoload || !entry.servable) throw this.notLoaded(entry, served);
    return this.loadEntry(entry, false).then(() => {
      if (entry.state !== "loaded") throw this.notLoaded(entry, served);
      return this.hold(entry, options);
    });
  }

  /**
   * Loads the model `name` (`POST /models/load`), making room first (LRU eviction of idle models);
   * resolves once it is loaded. Loading a model already loading joins that load.
   * @throws ApiError 404 for an unknown name; 400 when it is already loaded or cannot be loaded (a model
   *   added already loaded); 503 `model_load_failed` (the loader's message) or `model_capacity`.
   *   With `rethrow`, a loader's own error is thrown as it is (startup reports it as it always has).
   */
  async load(name: string, rethrow = false): Promise<void> {
    const entry = this.entryOf(name);
    if (!entry.servable)
      throw badRequest(`The model '${name}' cannot be reloaded: it has no loader.`, "model");
    if (entry.state === "loaded") throw badRequest(`The model '${name}' is already loaded.`, "model");
    await this.loadEntry(entry, rethrow);
  }

  /**
   * Unloads the model `name` (`POST /models/unload`, keep-alive, eviction, shutdown): it takes no new
   * request, the ones holding it finish (up to the drain timeout, then they end with `model_unloaded`),
   * then it is freed. Resolves once it is freed; unloading a model already unloading joins that.
   * @throws ApiError 404 for an unknown name; 400 when it is not loaded.
   */
  unload(name: string, reason: UnloadReason = "request"): Promise<void> {
    const entry = this.entryOf(name);
    if (entry.unloading) return entry.unloading;
    if (entry.state !== "loaded" || !entry.loaded) {
      throw badRequest(`The model '${name}' is not loaded (it is ${entry.state}).`, "model");
    }
    return this.unloadEntry(entry, reason);
  }

  /**
   * Unloads every loaded model (server shutdown), after loads in progress end. Never rejects.
   */
  async closeAll(): Promise<void> {
    await this.loadChain.catch(() => undefined);
    await Promise.all(
      this.entries.map(
        (entry) =>
          entry.unloading ??
          (entry.loaded ? this.unloadEntry(entry, "shutdown").catch(() => undefined) : undefined),
      ),
    );
  }

  /** OpenAI model objects, one per served name (aliases included, each with `root` = the model id). */
  modelObjects(): ModelObject[] {
    const models = [...this.byName.entries()].map(([name, entry]) => this.toModelObject(name, entry));
    const adapters = this.loadedAdapters().map(({ entry, adapter }) => adapterObject(entry, adapter));
    return [...models, ...adapters];
  }

  /**
   * The model object of one served name.
   * @throws ApiError 404 when no model has that name.
   */
  modelObject(name: string): ModelObject {
    const home = this.adapterHome(name);
    if (home) return adapterObject(home.entry, home.adapter);
    return this.toModelObject(name, this.entryOf(name));
  }

  /** Bytes the loaded models hold now (measured at load), and their count. */
  residency(): { loaded: number; memoryBytes: number } {
    const resident = this.entries.filter((entry) => entry.loaded);
    return {
      loaded: resident.length,
      memoryBytes: resident.reduce((sum, entry) => sum + (entry.loaded?.memoryBytes ?? 0), 0),
    };
  }

  private newEntry(names: readonly string[], servable: ServableModel<Model> | undefined): Entry<Model> {
    const id = names[0];
    if (id === undefined) throw new Error("A served model needs a name.");
    for (const name of names) {
      if (this.byName.has(name)) throw new Error(`Two models are served as '${name}'.`);
    }
    const entry: Entry<Model> = {
      id,
      names,
      servable,
      state: "unloaded",
      reason: undefined,
      loaded: undefined,
      loading: undefined,
      unloading: undefined,
      leases: new Set(),
      lastUse: 0,
      keepAliveMs: undefined,
      expiresAt: null,
      timer: undefined,
      measuredBytes: undefined,
    };
    this.entries.push(entry);
    for (const name of names) this.byName.set(name, entry);
    return entry;
  }

  /** Every LoRA adapter of the loaded models with its model's entry, in registration and load order. */
  private loadedAdapters(): { entry: Entry<Model>; adapter: LoraAdapter }[] {
    return this.entries.flatMap((entry) =>
      (entry.loaded?.scheduler.adapterList?.() ?? []).map((adapter) => ({ entry, adapter })),
    );
  }

  /** Every name a request may give: the models' names, then the loaded models' LoRA adapters. */
  private servedNames(): string[] {
    return [...this.byName.keys(), ...this.loadedAdapters().map(({ adapter }) => adapter.name)];
  }

  private entryOf(name: string): Entry<Model> {
    const entry = this.byName.get(name);
    if (!entry) throw modelNotFound(name, this.servedNames());
    return entry;
  }

  private notLoaded(entry: Entry<Model>, name: string): ApiError {
    if (entry.state === "unloading") return modelUnloading(name);
    if (entry.state === "failed") return modelLoadFailed(name, entry.reason ?? "unknown error");
    return modelNotLoaded(name);
  }

  private hold(entry: Entry<Model>, options: AcquireOptions): ModelLease {
    const lease: Lease = { abort: options.abort };
    entry.leases.add(lease);
    entry.lastUse = ++this.uses;
    if (options.keepAliveMs !== undefined) entry.keepAliveMs = options.keepAliveMs;
    this.clearExpiry(entry);
    let released = false;
    return {
      id: entry.id,
      release: () => {
        if (released) return;
        released = true;
        entry.leases.delete(lease);
        entry.lastUse = ++this.uses;
        if (entry.leases.size === 0) this.becameIdle(entry);
      },
    };
  }

  /** The idle time of a model: the latest request's keep_alive, else its entry's, else the registry's. */
  private keepAliveOf(entry: Entry<Model>): KeepAliveMs {
    if (entry.keepAliveMs !== undefined) return entry.keepAliveMs;
    if (entry.servable?.idleUnloadMs !== undefined) return entry.servable.idleUnloadMs;
    return this.options.idleUnloadMs ?? null;
  }

  private clearExpiry(entry: Entry<Model>): void {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.expiresAt = null;
  }

  /** Starts the idle countdown of a loaded model nothing holds (none for a model that cannot reload). */
  private becameIdle(entry: Entry<Model>): void {
    this.clearExpiry(entry);
    if (entry.state !== "loaded" || !entry.servable) return;
    const keepAlive = this.keepAliveOf(entry);
    if (keepAlive === null) return;
    const reason: UnloadReason = entry.keepAliveMs !== undefined ? "keep_alive" : "idle";
    if (keepAlive === 0) {
      this.unloadEntry(entry, reason).catch(() => undefined);
      return;
    }
    entry.expiresAt = this.now() + keepAlive;
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      if (entry.state === "loaded" && entry.leases.size === 0)
        this.unloadEntry(entry, reason).catch(() => undefined);
    }, keepAlive);
    entry.timer.unref();
  }

  private loadEntry(entry: Entry<Model>, rethrow: boolean): Promise<void> {
    if (entry.loading) return entry.loading;
    const previous = entry.state;
    entry.state = "loading";
    entry.reason = undefined;
    const run = async () => {
      if (entry.unloading) await entry.unloading;
      await this.doLoad(entry, previous, rethrow);
    };
    const loading = this.loadChain.then(run, run);
    entry.loading = loading;
    this.loadChain = loading.catch(() => undefined);
    return loading.finally(() => {
      if (entry.loading === loading) entry.loading = undefined;
    });
  }

  private async doLoad(entry: Entry<Model>, previous: ModelState, rethrow: boolean): Promise<void> {
    const servable = entry.servable as ServableModel<Model>;
    const events = this.options.events;
    const started = this.now();
    const seconds = () => (this.now() - started) / 1000;
    try {
      await this.makeRoom(entry, entry.measuredBytes ?? servable.estimatedBytes);
    } catch (error) {
      entry.state = previous === "failed" ? "failed" : "unloaded";
      events?.onLoad?.(entry.id, "no_capacity", seconds(), error);
      throw error;
    }
    let loaded: LoadedModel<Model>;
    try {
      loaded = await servable.load();
    } catch (error) {
      entry.state = "failed";
      entry.reason = oneLine(error);
      events?.onLoad?.(entry.id, "failure", seconds(), error);
      if (rethrow) throw error;
      throw modelLoadFailed(entry.id, entry.reason);
    }
    entry.measuredBytes = loaded.memoryBytes;
    try {
      // The measured size may exceed the estimate: make room again, or give the model back.
      await this.makeRoom(entry, loaded.memoryBytes);
    } catch (error) {
      await loaded.close().catch(() => undefined);
      entry.state = "unloaded";
      events?.onLoad?.(entry.id, "no_capacity", seconds(), error);
      throw error;
    }
    entry.loaded = loaded;
    entry.state = "loaded";
    entry.keepAliveMs = undefined;
    entry.lastUse = ++this.uses;
    events?.onLoad?.(entry.id, "success", seconds());
    events?.onLoaded?.(entry.id, loaded.scheduler, loaded.memoryBytes);
    // Loaded for nobody yet (POST /models/load): its idle time starts now; a waiting request holds it first.
    queueMicrotask(() => {
      if (entry.leases.size === 0 && entry.state === "loaded" && !entry.timer) this.becameIdle(entry);
    });
  }

  /**
   * Unloads least recently used idle models until `bytes` more (and one more model) fit the limits.
   * @throws ApiError 503 `model_capacity` with the numbers when the busy models leave too little room.
   */
  private async makeRoom(entry: Entry<Model>, bytes: number): Promise<void> {
    const { maxModels, memoryBudget } = this.options;
    if (memoryBudget !== undefined && bytes > memoryBudget) {
      throw modelCapacity(
        `The model '${entry.id}' needs ${bytes} bytes (weights + KV cache + projector), more than the whole --memory-budget of ${memoryBudget} bytes.`,
      );
    }
    for (;;) {
      const resident = this.entries.filter((other) => other !== entry && other.loaded);
      const used = resident.reduce((sum, other) => sum + (other.loaded?.memoryBytes ?? 0), 0);
      const overCount = maxModels !== undefined && resident.length + 1 > maxModels;
      const overMemory = memoryBudget !== undefined && used + bytes > memoryBudget;
      if (!overCount && !overMemory) return;
      const idle = resident
        .filter((other) => other.state === "loaded" && other.servable && this.isIdle(other))
        .sort((a, b) => a.lastUse - b.lastUse);
      const victim = idle[0];
      if (victim) {
        await this.unloadEntry(victim, "evicted");
        continue;
      }
      const draining = resident.find((other) => other.unloading);
      if (draining) {
        await draining.unloading;
        continue;
      }
      const busy = resident.map((other) => other.id).join(", ");
      throw modelCapacity(
        overCount
          ? `The model '${entry.id}' cannot be loaded: ${resident.length} models are loaded (--models-max ${maxModels}) and none is idle (${busy}). Retry when one is idle, or unload one (POST /models/unload).`
          : `The model '${entry.id}' needs ${bytes} bytes (weights + KV cache + projector); ${used} of the --memory-budget of ${memoryBudget} bytes are held by models in use (${busy}), leaving ${Math.max(0, (memoryBudget ?? 0) - used)}. Retry when one is idle, or unload one (POST /models/unload).`,
      );
    }
  }

  private isIdle(entry: Entry<Model>): boolean {
    const scheduler = entry.loaded?.scheduler;
    return (
      entry.leases.size === 0 &&
      !entry.loading &&
      (scheduler === undefined || scheduler.runningCount + scheduler.waitingCount === 0)
    );
  }

  private unloadEntry(entry: Entry<Model>, reason: UnloadReason): Promise<void> {
    if (entry.unloading) return entry.unloading;
    const loaded = entry.loaded;
    if (!loaded) return Promise.resolve();
    entry.state = "unloading";
    this.clearExpiry(entry);
    const timeoutMs = this.options.drainTimeoutMs ?? 30_000;
    const unloading = (async () => {
      if (!(await this.drained(entry, timeoutMs))) {
        const error = modelUnloaded(entry.id, timeoutMs / 1000);
        for (const lease of entry.leases) lease.abort?.(error);
        await this.drained(entry, 5_000);
      }
      loaded.watch?.stop();
      try {
        await loaded.close();
      } finally {
        entry.loaded = undefined;
        entry.state = "unloaded";
        entry.keepAliveMs = undefined;
        entry.unloading = undefined;
        this.options.events?.onUnloaded?.(entry.id, loaded.scheduler, reason);
      }
    })();
    entry.unloading = unloading;
    return unloading;
  }

  /** Waits until nothing holds the model, at most `ms`; true when it drained. */
  private async drained(entry: Entry<Model>, ms: number): Promise<boolean> {
    const deadline = this.now() + ms;
    while (!this.isIdle(entry)) {
      if (this.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return true;
  }

  private toModelObject(name: string, entry: Entry<Model>): ModelObject {
    const host = entry.loaded?.scheduler.host;
    const status: ModelStatus = { value: entry.state };
    if (entry.state === "failed" && entry.reason !== undefined) status.reason = entry.reason;
    if (entry.loaded && entry.servable) status.memory_bytes = entry.loaded.memoryBytes;
    if (entry.loaded) {
      status.in_flight = entry.leases.size;
      status.expires_at = entry.expiresAt === null ? null : new Date(entry.expiresAt).toISOString();
    }
    return modelObjectOf(name, {
      root: entry.servable?.parent ?? entry.id,
      parent: entry.servable?.parent ?? null,
      ...(host ? { host } : {}),
      ...(entry.servable?.path !== undefined ? { path: entry.servable.path } : {}),
      status,
    });
  }
}

/**
 * An OpenAI model object (vLLM's `root`, `parent`, `max_model_len`; llama-server's `status`). `root` is
 * the model the name serves; `parent` the base model of an adapter (null otherwise). Without `host`
 * (a model not loaded) the fields only a loaded model knows are left out.
 */
export function modelObjectOf(
  name: string,
  fields: {
    root: string;
    parent: string | null;
    host?: EngineModel["host"];
    path?: string;
    status?: ModelStatus;
  },
): ModelObject {
  const { host } = fields;
  return {
    id: name,
    object: "model",
    created: host?.created ?? 0,
    owned_by: "lmserve",
    root: fields.root,
    parent: fields.parent,
    ...(host
      ? {
          max_model_len: host.contextSize,
          capabilities: {
            vision: host.acceptsImages,
            task: host.task ?? "generate",
            pooling: host.pooling,
          },
        }
      : {}),
    ...(fields.path !== undefined ? { path: fields.path } : {}),
    ...(fields.status ? { status: fields.status } : {}),
  };
}

/**
 * The model object of a LoRA adapter, as vLLM lists one: `id` its name, `root` its file, `parent` the
 * base model's id; the base's context and capabilities.
 */
function adapterObject<Model extends EngineModel>(entry: Entry<Model>, adapter: LoraAdapter): ModelObject {
  const host = entry.loaded?.scheduler.host;
  return modelObjectOf(adapter.name, { root: adapter.path, parent: entry.id, ...(host ? { host } : {}) });
}

/**
 * The base model's scheduler as a LoRA adapter's requests see it: the same scheduler, whose `submit`
 * runs every generation under `adapter`.
 */
function withAdapter<Model extends EngineModel>(scheduler: Model, adapter: LoraAdapter): Model {
  const submit: EngineModel["submit"] = (request, observer, signal) =>
    scheduler.submit({ ...request, adapter }, observer, signal);
  return new Proxy(scheduler, {
    get(target, property) {
      if (property === "submit") return submit;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** An error's message, first line only. */
function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0] ?? message;
}

/** What each endpoint family needs, and which kind of model serves it (for the 400's message). */
const TASK_NEEDS = {
  generate: { serves: ["generate"], kind: "a generative (decoder) model" },
  embed: { serves: ["embed", "generate"], kind: "an embedding model or a generative model" },
  rerank: { serves: ["rerank"], kind: "a reranker (a cross-encoder with rank pooling, --task rerank)" },
} as const;

/** Each task's kind of model, with its article, for the 400's message. */
const TASK_KIND = {
  generate: "a generative model",
  embed: "an embedding model",
  rerank: "a reranker",
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
    `The model ${name} is ${TASK_KIND[has]} (task ${has}) and does not serve ${what}; ${what} needs ${need.kind}.`,
    "model",
  );
}

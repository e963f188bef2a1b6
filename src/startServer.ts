import { stat } from "node:fs/promises";
import { type AddressInfo, createServer } from "node:net";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { type Logger as PinoLogger, pino } from "pino";
import type { LoraModule } from "./config/loraModules.ts";
import { ConfigError, type ServeConfig, threadsFor } from "./config/serveConfig.ts";
import { collectGarbage } from "./engine/collectGarbage.ts";
import { summariseSkippedBackends } from "./engine/devices.ts";
import { EncoderScheduler } from "./engine/EncoderScheduler.ts";
import { ModelHost } from "./engine/ModelHost.ts";
import { cpuBackendKind } from "./engine/native.ts";
import { Scheduler } from "./engine/Scheduler.ts";
import { shuttingDown } from "./errors.ts";
import { listModels } from "./models/listModels.ts";
import { ModelFileWatch } from "./models/modelFileWatch.ts";
import { listModelsDir } from "./models/modelsDir.ts";
import { resolveServeModels } from "./resolveServeModels.ts";
import { buildApp } from "./server/app.ts";
import { chooseLogFormat, LOG_HOOKS, prettyLogStream } from "./server/logFormat.ts";
import { ServerMetrics } from "./server/metrics.ts";
import { drainServer } from "./server/shutdown.ts";
import { type LoadedModel, ModelRegistry } from "./serving/ModelRegistry.ts";
import { SeedSource } from "./serving/request/generationParams.ts";
import { sharedCompiler } from "./structured/worker/compileService.ts";

/** A model's own settings (a config file's `models` entry, or a `--models-dir` folder's projector). */
/**
 * Loads a model's configured LoRA adapters (`--lora`, a config entry's `lora`) onto its scheduler.
 * @throws ConfigError naming the adapter when it cannot be served (an encoder model, a name another model
 *   has, a file llama.cpp refuses); the scheduler is closed first.
 */
async function loadLoras(
  scheduler: Scheduler | EncoderScheduler,
  loras: readonly LoraModule[],
  nameTaken: (name: string) => boolean,
): Promise<void> {
  for (const lora of loras) {
    try {
      if (!(scheduler instanceof Scheduler))
        throw new Error("an embedding or rerank model takes no adapters");
      if (nameTaken(lora.name)) throw new Error("a model or another adapter is served under that name");
      await scheduler.loadAdapter(lora.name, lora.path, lora.scale);
    } catch (error) {
      await scheduler.close();
      throw new ConfigError(`--lora ${lora.name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

type ModelSettings = Partial<Omit<ServeConfig["models"][number], "source" | "servedModelNames">>;

/** A running server: its address and how to stop it. */
export type RunningServer = {
  app: FastifyInstance;
  registry: ModelRegistry;
  /** `http://host:port`, with the port actually bound. */
  url: string;
  /** Stops listening, ends in-flight work and frees the models. */
  close(): Promise<void>;
};

/**
 * Resolves every configured model source to a local file (downloading `hf:` URIs and URLs into
 * `config.downloadDir`, see `resolveServeModels.ts`), loads them, then listens. Loading progress is shown
 * on a TTY; on SIGTERM/SIGINT the server stops listening and exits.
 * @throws ModelSourceError when a source cannot be resolved, ModelLoadError when a model cannot be
 *   loaded, ConfigError when its Matryoshka widths are wider than its embeddings (each with a one-line
 *   message).
 */
export async function startServer(
  config: ServeConfig,
  options: { handleSignals?: boolean } = {},
): Promise<RunningServer> {
  const logOptions = { level: config.logLevel, base: { service: "lmserve" }, hooks: LOG_HOOKS };
  const logger =
    chooseLogFormat(config.logFormat, process.stdout.isTTY) === "pretty"
      ? pino(logOptions, prettyLogStream(process.stdout))
      : pino(logOptions);
  const metrics = new ServerMetrics();
  if (config.enableLora) metrics.enableLora();
  const registry = new ModelRegistry<Scheduler>({
    autoload: config.modelsAutoload,
    ...(config.modelsMax !== undefined ? { maxModels: config.modelsMax } : {}),
    ...(config.memoryBudget !== undefined ? { memoryBudget: config.memoryBudget } : {}),
    ...(config.idleUnload !== undefined ? { idleUnloadMs: Math.round(config.idleUnload * 1000) } : {}),
    drainTimeoutMs: config.shutdownTimeout * 1000,
    events: {
      onLoad: (id, outcome, seconds, error) => {
        metrics.modelLoad(id, outcome, seconds);
        if (outcome === "failure") logger.error({ model: id, err: error }, "model failed to load");
        else if (outcome === "no_capacity")
          logger.warn({ model: id, reason: (error as Error).message }, "model not loaded: no room");
      },
      onLoaded: (id, scheduler, memoryBytes) => {
        metrics.track(scheduler);
        metrics.modelResident(id, memoryBytes);
      },
      onUnloaded: (id, scheduler, reason) => {
        metrics.untrack(scheduler);
        metrics.modelUnload(id, reason);
        logger.info({ model: id, reason }, "model unloaded");
      },
    },
  });
  const seeds = new SeedSource(config.seed, config.batchInvariantSeeds);
  let ready = false;

  // A busy port fails at once, before minutes of downloading and loading (the real bind follows the load).
  await checkPortFree(config.host, config.port);

  /** Loads one model (a configured one, or one of --models-dir / the download cache) with the server's settings. */
  const loadModel = async (
    model: { source: string; path: string; servedModelNames: readonly string[]; sizeBytes: number },
    own: ModelSettings | undefined,
  ): Promise<LoadedModel<Scheduler>> => {
    // A config file's `models` entry may set its own context, slots and template (each model has its own slot pool).
    const maxModelLen = own?.maxModelLen ?? config.maxModelLen;
    const chatTemplate = own?.chatTemplate ?? config.chatTemplate;
    const mmproj = own?.mmproj ?? config.mmproj;
    const maxNumBatchedTokens = own?.maxNumBatchedTokens ?? config.maxNumBatchedTokens;
    const matryoshkaDimensions = own?.matryoshkaDimensions ?? config.matryoshkaDimensions;
    const host = await ModelHost.load({
      modelPath: model.path,
      servedModelNames: model.servedModelNames,
      ...(maxModelLen !== undefined ? { maxModelLen } : {}),
      sequences: own?.maxNumSeqs ?? config.maxNumSeqs,
      threads: threadsFor(config, model.sizeBytes),
      device: config.device,
      ...(config.nGpuLayers !== undefined ? { nGpuLayers: config.nGpuLayers } : {}),
      kvUnified: config.kvUnified,
      cacheTypeK: own?.cacheTypeK ?? config.cacheTypeK,
      cacheTypeV: own?.cacheTypeV ?? config.cacheTypeV,
      flashAttn: own?.flashAttn ?? config.flashAttn,
      ...(maxNumBatchedTokens !== undefined ? { stepBudget: maxNumBatchedTokens } : {}),
      ...(config.pooling !== undefined ? { pooling: config.pooling } : {}),
      ...(config.task !== undefined ? { task: config.task } : {}),
      ...(mmproj !== undefined ? { mmproj } : {}),
    });
    const tooWide = matryoshkaTooWide(host, matryoshkaDimensions, own?.matryoshkaDimensions !== undefined);
    if (tooWide !== undefined) {
      await host.dispose();
      throw new ConfigError(tooWide);
    }
    // A model file truncated or rewritten in place while mapped would kill the process (SIGBUS) on the
    // next read: the watch stops serving it instead, with one log line (see modelFileWatch.ts).
    const watch = new ModelFileWatch(model.path, {
      onChange: (reason) =>
        logger.error(
          { model: host.id, path: model.path, reason },
          "model file changed on disk: the model is no longer served and the server is not ready; restart it (replace model files by rename, never in place)",
        ),
    });
    const scheduler = new (host.encoder ? EncoderScheduler : Scheduler)(host, {
      prefixCaching: config.prefixCaching,
      jumpForward: config.jumpForward,
      ...(config.maxWaiting !== undefined ? { maxWaiting: config.maxWaiting } : {}),
      ...(config.requestTimeout !== undefined ? { requestTimeoutSeconds: config.requestTimeout } : {}),
      ...(config.maxLoras !== undefined ? { maxLoras: config.maxLoras } : {}),
      events: metrics.eventsFor(host.id),
    });
    await loadLoras(scheduler, own?.loras ?? [], (name) => registry.has(name));
    const projectorBytes = mmproj !== undefined ? await fileSize(mmproj) : 0;
    logModelLoaded(logger, config, model, own, host, mmproj);
    collectGarbage(); // the metadata's vocabulary arrays, read to load it
    return {
      scheduler,
      watch,
      chat: {
        template: chatTemplate ?? host.chatTemplate,
        ...(config.toolCallParser !== undefined ? { toolCallParser: config.toolCallParser } : {}),
        ...(config.reasoningParser !== undefined ? { reasoningParser: config.reasoningParser } : {}),
        trustRequestTemplate: config.trustRequestChatTemplate,
      },
      ...(matryoshkaDimensions !== undefined ? { matryoshkaDimensions } : {}),
      memoryBytes: host.info.size + host.kvCache.kBytes + host.kvCache.vBytes + projectorBytes,
      close: () => scheduler.close(),
    };
  };

  try {
    // Local paths, hf: URIs and URLs become verified local files first (downloads show progress on stderr).
    const configured = await resolveServeModels(config, process.stderr);
    for (const [index, model] of configured.entries()) {
      const own = config.models[index];
      registry.addServable({
        names: model.servedModelNames,
        path: model.path,
        origin: "config",
        estimatedBytes: model.sizeBytes,
        load: () => loadModel(model, own),
      });
    }
    if (config.modelsDir !== undefined) await addDirectoryModels(registry, config, loadModel, logger);
    // The configured models load at startup, as always (a failure stops the server with its message).
    for (const model of configured) await registry.load(model.servedModelNames[0] as string, true);
  } catch (error) {
    await registry.closeAll();
    throw error;
  }
  ready = true;

  const app = buildApp(
    {
      registry,
      seeds,
      metrics,
      maxTokensCap: config.maxTokensCap,
      prefixCacheScope: config.prefixCacheScope,
      defaultMaxTokens: config.defaultMaxTokens,
      imageLimits: { maxBytes: config.maxImageBytes, allowPrivate: config.allowPrivateImageUrls },
      isReady: () => ready,
    },
    {
      logger: logger as FastifyBaseLogger,
      ui: config.ui ? {} : false,
      // A model that takes images takes a --max-image-bytes image as a base64 data: URL in the body too.
      bodyLimit:
        config.modelsDir !== undefined || registry.all().some((scheduler) => scheduler.host.acceptsImages)
          ? Math.max(config.maxBodySize, Math.ceil((config.maxImageBytes * 4) / 3) + 1_000_000)
          : config.maxBodySize,
      operations: config,
    },
  );
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await registry.closeAll();
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError(`Cannot listen on ${config.host}:${config.port}: ${code}.`);
  }
  const address = app.server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger.info(
    {
      url,
      api: `${url}/v1`,
      ...(config.ui ? { ui: `${url}/` } : {}),
      ...(config.defaultMaxTokens !== undefined ? { defaultMaxTokens: config.defaultMaxTokens } : {}),
    },
    "listening",
  );
  sharedCompiler().warm(); // in the background: the guided-decoding compiler's worker

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      ready = false;
      // Graceful: stop accepting, let in-flight requests finish up to --shutdown-timeout, then end them.
      const outcome = await drainServer(app, config.shutdownTimeout);
      logger.info(outcome, "server closed");
      await registry.closeAll();
    })();
    return closing;
  };
  if (options.handleSignals ?? true) {
    // A second signal while draining ends every in-flight request now, each with the shutdown error as
    // its final event (a stream is never cut mid-event), and exits 1 within about a second.
    let forced = false;
    const onSecondSignal = (signal: NodeJS.Signals) => {
      forced = true;
      logger.warn({ signal }, "second signal: ending in-flight requests now");
      const inFlight = app.inFlight;
      inFlight?.abortAll(shuttingDown());
      const idle = inFlight ? inFlight.idle() : Promise.resolve();
      setTimeout(() => process.exit(1), 1_000);
      idle.then(
        () => setTimeout(() => process.exit(1), 100),
        () => undefined,
      );
    };
    const onSignal = (signal: NodeJS.Signals) => {
      logger.info({ signal, shutdownTimeout: config.shutdownTimeout }, "shutting down");
      process.once("SIGTERM", onSecondSignal);
      process.once("SIGINT", onSecondSignal);
      close().then(
        () => process.exit(forced ? 1 : 0),
        (error: unknown) => {
          logger.error({ err: error }, "shutdown failed");
          process.exit(1);
        },
      );
    };
    process.once("SIGTERM", onSignal);
    process.once("SIGINT", onSignal);
  }
  return { app, registry, url, close };
}

/**
 * Binds `host:port` for a moment and lets it go, so that a port already taken fails before the models
 * load. Port 0 (any free port) is not checked. Another process may still take the port before the
 * server binds it; that later bind reports the same error.
 * @throws ConfigError "Cannot listen on HOST:PORT: EADDRINUSE …" (or the bind's other error code).
 */
export async function checkPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolvePromise, reject) => {
    const probe = createServer();
    probe.once("error", (error: NodeJS.ErrnoException) => {
      const code = error.code ?? String(error);
      const hint = code === "EADDRINUSE" ? " (another process uses this port; pick another with --port)" : "";
      reject(new ConfigError(`Cannot listen on ${host}:${port}: ${code}${hint}.`));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolvePromise()));
  });
}

/** Bytes of a file, 0 when it cannot be read. */
async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

/**
 * Registers, unloaded, every model of `--models-dir` and of the download cache (`lmserve pull`) whose
 * name no configured model takes (a name found twice keeps its first: the folder's, then the cache's;
 * a file already served is not listed again).
 */
async function addDirectoryModels(
  registry: ModelRegistry<Scheduler>,
  config: ServeConfig,
  loadModel: (
    model: { source: string; path: string; servedModelNames: readonly string[]; sizeBytes: number },
    own: ModelSettings | undefined,
  ) => Promise<LoadedModel<Scheduler>>,
  logger: PinoLogger,
): Promise<void> {
  const seen = new Set(registry.modelObjects().flatMap((model) => (model.path ? [model.path] : [])));
  const found = [
    ...(await listModelsDir(config.modelsDir as string)).map((model) => ({
      ...model,
      origin: "models-dir" as const,
    })),
    ...(await listModels(config.downloadDir).catch(() => []))
      .filter((model) => model.complete)
      .map((model) => ({
        id: model.id,
        path: model.path,
        sizeBytes: model.sizeBytes,
        origin: "cache" as const,
      })),
  ];
  for (const model of found) {
    if (seen.has(model.path) || registry.has(model.id)) {
      if (!seen.has(model.path))
        logger.warn({ model: model.id, path: model.path }, "model name already served: not listed");
      continue;
    }
    seen.add(model.path);
    const mmproj = "mmproj" in model ? model.mmproj : undefined;
    registry.addServable({
      names: [model.id],
      path: model.path,
      origin: model.origin,
      estimatedBytes: model.sizeBytes,
      load: () =>
        loadModel(
          { source: model.path, path: model.path, servedModelNames: [model.id], sizeBytes: model.sizeBytes },
          mmproj !== undefined ? { mmproj } : undefined,
        ),
    });
  }
}

/** The "model loaded" log line: where the model runs, its context, slots, KV cache and projector. */
function logModelLoaded(
  logger: PinoLogger,
  config: ServeConfig,
  model: { source: string; path: string; sizeBytes: number },
  own: ModelSettings | undefined,
  host: ModelHost,
  mmproj: string | undefined,
): void {
  // Absent GPU backends: one phrase at info; the loader's messages (libcublas.so.13: cannot open …) at debug.
  const gpu = summariseSkippedBackends(host.placement.skipped);
  if (host.placement.skipped.length > 0)
    logger.debug(
      {
        model: host.id,
        gpuBackendsSkipped: host.placement.skipped.map((entry) => `${entry.backend}: ${entry.reason}`),
      },
      "GPU backends not used",
    );
  logger.info(
    {
      model: host.id,
      source: model.source,
      path: model.path,
      contextSize: host.contextSize,
      slots: own?.maxNumSeqs ?? config.maxNumSeqs,
      backend: host.placement.backend,
      ...(host.placement.devices.length > 0 ? { devices: host.placement.devices } : {}),
      offloadedLayers: `${host.placement.offloadedLayers}/${host.placement.layers + 1}`,
      ...(gpu !== undefined ? { gpu } : {}),
      threads: threadsFor(config, model.sizeBytes),
      cpuBackend: cpuBackendKind(),
      maxNumBatchedTokens: host.stepBudget,
      kvCache: {
        typeK: host.kvCache.typeK,
        typeV: host.kvCache.typeV,
        bytes: host.kvCache.kBytes + host.kvCache.vBytes,
        flashAttn: host.kvCache.flashAttn,
        unified: host.kvUnified,
      },
      task: host.task,
      ...(host.encoder
        ? {
            encoder: {
              pooling: host.pooling,
              window: host.contextSize,
              batchTokens: host.batchSize,
              sequences: host.sequences,
            },
          }
        : {}),
      ...(mmproj !== undefined ? { mmproj, vision: host.acceptsImages } : {}),
    },
    "model loaded",
  );
}

/**
 * Why `widths` (a model's Matryoshka widths) cannot apply to `host`: one line naming the widths wider
 * than its embeddings (`n_embd`), or undefined when all fit or the model serves no embeddings (a
 * reranker). `perModel`: the widths came from the model's own config-file entry, not the flag.
 */
function matryoshkaTooWide(
  host: ModelHost,
  widths: readonly number[] | undefined,
  perModel: boolean,
): string | undefined {
  if (widths === undefined || host.task === "rerank") return undefined;
  const width = host.info.nEmbd;
  const wider = widths.filter((value) => value > width);
  if (wider.length === 0) return undefined;
  const source = perModel ? `${host.id}'s matryoshka-dimensions (config file)` : "--matryoshka-dimensions";
  return `${source} ${wider.join(",")}: wider than ${host.id}'s embeddings (${width} dimensions); a Matryoshka width shortens the vector, so each must be at most ${width}.`;
}

import { type AddressInfo, createServer } from "node:net";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { type LoggerOptions, pino } from "pino";
import { ConfigError, type ServeConfig, threadsFor } from "./config/serveConfig.ts";
import { summariseSkippedBackends } from "./engine/devices.ts";
import { EncoderScheduler } from "./engine/EncoderScheduler.ts";
import { ModelHost } from "./engine/ModelHost.ts";
import { Scheduler } from "./engine/Scheduler.ts";
import { ModelFileWatch } from "./models/modelFileWatch.ts";
import { resolveServeModels } from "./resolveServeModels.ts";
import { buildApp } from "./server/app.ts";
import { chooseLogFormat, LOG_HOOKS, prettyLogStream } from "./server/logFormat.ts";
import { ServerMetrics } from "./server/metrics.ts";
import { drainServer } from "./server/shutdown.ts";
import { SeedSource } from "./serving/generationParams.ts";
import { ModelRegistry } from "./serving/ModelRegistry.ts";
import { sharedCompiler } from "./structured/compileService.ts";

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
 *   loaded (both with a one-line message).
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
  const registry = new ModelRegistry<Scheduler>();
  const metrics = new ServerMetrics();
  const seeds = new SeedSource(config.seed, config.batchInvariantSeeds);
  let ready = false;

  // A busy port fails at once, before minutes of downloading and loading (the real bind follows the load).
  await checkPortFree(config.host, config.port);

  const hosts: ModelHost[] = [];
  const watches: ModelFileWatch[] = [];
  try {
    // Local paths, hf: URIs and URLs become verified local files first (downloads show progress on stderr).
    for (const [index, model] of (await resolveServeModels(config, process.stderr)).entries()) {
      // A config file's `models` entry may set its own context, slots and template (each model has its own slot pool).
      const own = config.models[index];
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
      hosts.push(host);
      // A model file truncated or rewritten in place while mapped would kill the process (SIGBUS) on the
      // next read: the watch stops serving it instead, with one log line (see modelFileWatch.ts).
      const watch = new ModelFileWatch(model.path, {
        onChange: (reason) =>
          logger.error(
            { model: host.id, path: model.path, reason },
            "model file changed on disk: the model is no longer served and the server is not ready; restart it (replace model files by rename, never in place)",
          ),
      });
      watches.push(watch);
      registry.add(
        new (host.encoder ? EncoderScheduler : Scheduler)(host, {
          prefixCaching: config.prefixCaching,
          jumpForward: config.jumpForward,
          ...(config.maxWaiting !== undefined ? { maxWaiting: config.maxWaiting } : {}),
          ...(config.requestTimeout !== undefined ? { requestTimeoutSeconds: config.requestTimeout } : {}),
          events: metrics.eventsFor(host.id),
        }),
        {
          watch,
          chat: {
            template: chatTemplate ?? host.chatTemplate,
            ...(config.toolCallParser !== undefined ? { toolCallParser: config.toolCallParser } : {}),
            ...(config.reasoningParser !== undefined ? { reasoningParser: config.reasoningParser } : {}),
            trustRequestTemplate: config.trustRequestChatTemplate,
          },
          ...(matryoshkaDimensions !== undefined ? { matryoshkaDimensions } : {}),
        },
      );
      metrics.track(registry.all().at(-1) as Scheduler);
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
          maxNumBatchedTokens: host.stepBudget,
          kvCache: {
            typeK: host.kvCache.typeK,
            typeV: host.kvCache.typeV,
            bytes: host.kvCache.kBytes + host.kvCache.vBytes,
            flashAttn: host.kvCache.flashAttn,
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
  } catch (error) {
    for (const watch of watches) watch.stop();
    await Promise.all(hosts.map((host) => host.dispose()));
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
      bodyLimit: registry.all().some((scheduler) => scheduler.host.acceptsImages)
        ? Math.max(config.maxBodySize, Math.ceil((config.maxImageBytes * 4) / 3) + 1_000_000)
        : config.maxBodySize,
      operations: config,
    },
  );
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await Promise.all(hosts.map((host) => host.dispose()));
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError(`Cannot listen on ${config.host}:${config.port}: ${code}.`);
  }
  const address = app.server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger.info(
    {
      url,
      ...(config.ui ? { ui: `${url}/` } : {}),
      ...(config.defaultMaxTokens !== undefined ? { defaultMaxTokens: config.defaultMaxTokens } : {}),
    },
    "listening",
  );
  sharedCompiler().warm(); // in the background: the guided-decoding compiler's worker and its automata

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      ready = false;
      // Graceful: stop accepting, let in-flight requests finish up to --shutdown-timeout, then end them.
      const outcome = await drainServer(app, config.shutdownTimeout);
      for (const watch of watches) watch.stop();
      logger.info(outcome, "server closed");
      await Promise.all(registry.all().map((scheduler) => scheduler.close()));
    })();
    return closing;
  };
  if (options.handleSignals ?? true) {
    // A second signal while draining is not caught (process.once): it ends the process at once.
    const onSignal = (signal: NodeJS.Signals) => {
      logger.info({ signal, shutdownTimeout: config.shutdownTimeout }, "shutting down");
      close().then(
        () => process.exit(0),
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

import { stat } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { pino } from "pino";
import { type ServeConfig, threadsFor } from "./config.ts";
import { ModelHost } from "./engine/ModelHost.ts";
import { Scheduler } from "./engine/Scheduler.ts";
import { buildApp } from "./server/app.ts";
import { SeedSource } from "./serving/generationParams.ts";
import { ModelRegistry } from "./serving/ModelRegistry.ts";

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
 * Loads every configured model, then listens. Loading progress is shown on a TTY; on SIGTERM/SIGINT
 * the server stops listening and exits.
 * @throws ModelLoadError when a model cannot be loaded (one-line message).
 */
export async function startServer(
  config: ServeConfig,
  options: { handleSignals?: boolean } = {},
): Promise<RunningServer> {
  const logger = pino({ level: config.logLevel, base: { service: "lmserve" } });
  const registry = new ModelRegistry();
  const seeds = new SeedSource(config.seed);
  let ready = false;

  const hosts: ModelHost[] = [];
  try {
    for (const model of config.models) {
      const { size } = await stat(model.source).catch(() => ({ size: 0 }));
      const host = await ModelHost.load({
        modelPath: model.source,
        servedModelNames: model.servedModelNames,
        ...(config.maxModelLen !== undefined ? { maxModelLen: config.maxModelLen } : {}),
        sequences: config.maxNumSeqs,
        threads: threadsFor(config, size),
        ...(config.chatTemplate !== undefined ? { chatTemplate: config.chatTemplate } : {}),
        ...(process.stderr.isTTY ? { onProgress: progressBar(model.source) } : {}),
      });
      hosts.push(host);
      registry.add(
        new Scheduler(host, {
          prefixCaching: config.prefixCaching,
          ...(config.maxWaiting !== undefined ? { maxWaiting: config.maxWaiting } : {}),
        }),
      );
      logger.info(
        { model: host.id, path: model.source, contextSize: host.contextSize, slots: config.maxNumSeqs },
        "model loaded",
      );
    }
  } catch (error) {
    await Promise.all(hosts.map((host) => host.dispose()));
    throw error;
  }
  ready = true;

  const app = buildApp({ registry, seeds, isReady: () => ready }, { logger: logger as FastifyBaseLogger });
  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger.info({ url }, "listening");
  if (process.stderr.isTTY)
    process.stderr.write(
      `lmserve: serving ${registry
        .all()
        .map((s) => s.host.id)
        .join(", ")} at ${url}/v1\n`,
    );

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      ready = false;
      await app.close();
      await Promise.all(hosts.map((h) => h.dispose()));
    })();
    return closing;
  };
  if (options.handleSignals ?? true) {
    const onSignal = (signal: NodeJS.Signals) => {
      logger.info({ signal }, "shutting down");
      void close().then(() => process.exit(0));
    };
    process.once("SIGTERM", onSignal);
    process.once("SIGINT", onSignal);
  }
  return { app, registry, url, close };
}

/** A one-line progress bar on stderr for model loading. */
function progressBar(path: string): (fraction: number) => void {
  return (fraction) => {
    const width = 30;
    const filled = Math.round(fraction * width);
    process.stderr.write(
      `\rloading ${path} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${Math.round(fraction * 100)}%`,
    );
    if (fraction >= 1) process.stderr.write("\n");
  };
}

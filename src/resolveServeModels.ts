/**
 * The step of `lmserve serve` between configuration and loading: every `MODEL` argument (local path,
 * `hf:` URI or http(s) URL) becomes a verified local `.gguf` file, downloaded into the download folder
 * once and reused on later starts (see `models/resolveModel.ts`).
 */
import { ConfigError } from "./config/ConfigError.ts";
import type { ServeConfig } from "./config/serveConfig.ts";
import { classifyModelSource, type ProgressStream, pullModel, resolveModel } from "./models/index.ts";

/** A configured model resolved to a local file, ready for `ModelHost.load`. */
export type ServableModel = {
  /** The `MODEL` argument as given. */
  source: string;
  /** Absolute path of the local `.gguf` file. */
  path: string;
  /** Served names, first is the id: `--served-model-name`, else the source's id (file name without `.gguf`). */
  servedModelNames: string[];
  /** Size of the file in bytes. */
  sizeBytes: number;
  /** True when this start downloaded (part of) the file. */
  downloaded: boolean;
};

/**
 * Resolves the configured models in order. Remote sources show download progress on `stream` (a bar on
 * a terminal, plain `downloading X: 40% (…)` lines otherwise) and a one-line summary; local paths print
 * nothing.
 * @param stream Where progress goes; usually `process.stderr`.
 * @throws ModelSourceError (one-line message) for a missing, unreachable, refused or corrupt source;
 *   ConfigError when two models would be served under one name (`serve X.gguf X.gguf`, or two config
 *   entries with one name), naming it.
 */
export async function resolveServeModels(
  config: ServeConfig,
  stream: ProgressStream,
): Promise<ServableModel[]> {
  const options = {
    downloadDir: config.downloadDir,
    ...(config.hfEndpoint !== undefined ? { hfEndpoint: config.hfEndpoint } : {}),
    ...(config.hfToken !== undefined ? { hfToken: config.hfToken } : {}),
  };
  const resolved: ServableModel[] = [];
  for (const model of config.models) {
    const file =
      classifyModelSource(model.source) === "path"
        ? await resolveModel(model.source, options)
        : await pullModel(model.source, { ...options, stream });
    resolved.push({
      source: model.source,
      path: file.path,
      servedModelNames: model.servedModelNames.length > 0 ? [...model.servedModelNames] : [file.id],
      sizeBytes: file.sizeBytes,
      downloaded: file.downloaded,
    });
  }
  refuseDuplicateNames(resolved);
  return resolved;
}

/**
 * Refuses a name served by two models: requests could not tell them apart.
 * @throws ConfigError naming the name and both sources.
 */
function refuseDuplicateNames(models: readonly ServableModel[]): void {
  const owners = new Map<string, string>();
  for (const model of models) {
    for (const name of new Set(model.servedModelNames)) {
      const first = owners.get(name);
      if (first !== undefined) {
        throw new ConfigError(
          `Two models are served as '${name}' (${first} and ${model.source}); give each its own --served-model-name.`,
        );
      }
      owners.set(name, model.source);
    }
  }
}

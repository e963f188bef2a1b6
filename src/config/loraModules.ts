/**
 * `--lora NAME=PATH[:SCALE]` (repeatable; a config file's top-level or per-model `lora`, one value or a
 * list): the LoRA adapters a model serves, each under its own name (vLLM's `--lora-modules name=path`,
 * with llama-server's `--lora-scaled` scale).
 */
import { existsSync, statSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import { z } from "zod";
import { ConfigError } from "./ConfigError.ts";

/** One adapter to serve: its served name, its GGUF file and its scale. */
export const LoraModuleSchema = z.object({
  /** The served name: a request's `model`, an `id` of `/v1/models`. */
  name: z.string().min(1),
  /** Absolute path of the adapter GGUF. */
  path: z.string().min(1),
  /** llama.cpp's user scale (the effective factor is scale * alpha / rank). Defaults to 1. */
  scale: z.number().finite(),
});

/** One adapter to serve (see {@link LoraModuleSchema}). */
export type LoraModule = z.infer<typeof LoraModuleSchema>;

/**
 * Parses `NAME=PATH[:SCALE]`: SCALE is the text after the last `:` when it is a number (so a path may hold
 * `:` itself); the file must exist and is kept as an absolute path.
 * @throws ConfigError naming `flag` for a missing `=`, an empty name or path, a SCALE that is not a finite
 *   number, or a file that is not there.
 */
export function parseLoraModule(spec: string, flag: string): LoraModule {
  const equals = spec.indexOf("=");
  const name = spec.slice(0, equals).trim();
  let path = spec.slice(equals + 1);
  if (equals <= 0 || name.length === 0 || path.length === 0) {
    throw new ConfigError(`${flag} '${spec}' must be NAME=PATH or NAME=PATH:SCALE.`);
  }
  let scale = 1;
  const colon = path.lastIndexOf(":");
  if (colon > 0) {
    const tail = path.slice(colon + 1);
    if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(tail)) {
      scale = Number(tail);
      path = path.slice(0, colon);
      if (!Number.isFinite(scale))
        throw new ConfigError(`${flag} ${name}: SCALE ${tail} is not a finite number.`);
    } else if (!existsSync(resolvePath(path)) && isAFile(resolvePath(path.slice(0, colon)))) {
      throw new ConfigError(`${flag} ${name}: SCALE '${tail}' is not a number (NAME=PATH:SCALE, e.g. :0.5).`);
    }
  }
  const absolute = resolvePath(path);
  let isFile = false;
  try {
    isFile = statSync(absolute).isFile();
  } catch (error) {
    throw new ConfigError(
      `${flag} ${name}: cannot read the adapter file ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`,
    );
  }
  if (!isFile)
    throw new ConfigError(`${flag} ${name}: ${path} is not a file (expected a LoRA adapter GGUF).`);
  return { name, path: absolute, scale };
}

/**
 * Every `NAME=PATH[:SCALE]` of a flag or config key; undefined when not given.
 * @throws ConfigError as {@link parseLoraModule}, or when two adapters share a name.
 */
export function loraModules(
  specs: string | readonly string[] | undefined,
  flag: string,
): LoraModule[] | undefined {
  if (specs === undefined) return undefined;
  const modules = (typeof specs === "string" ? [specs] : specs).map((spec) => parseLoraModule(spec, flag));
  const names = new Set<string>();
  for (const { name } of modules) {
    if (names.has(name)) throw new ConfigError(`${flag}: two adapters are named '${name}'.`);
    names.add(name);
  }
  return modules;
}

/** Whether `path` is an existing regular file. */
function isAFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

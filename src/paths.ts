import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Absolute path of the project's root folder (the one holding package.json). */
export const projectRoot: string = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** `../shared/models` beside the project: the test and default models (never copied into git). */
export const sharedModelsDir: string = resolve(projectRoot, "../shared/models");

/** The embedded default model, stories260K (260K-parameter TinyStories Llama, MIT). */
export const defaultModelPath: string = resolve(sharedModelsDir, "stories260K.gguf");

/** True when the embedded default model is present beside the project. */
export function defaultModelAvailable(): boolean {
  return existsSync(defaultModelPath);
}

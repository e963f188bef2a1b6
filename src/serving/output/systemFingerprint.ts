/**
 * `system_fingerprint` of chat and completions responses: OpenAI's meaning ("the backend configuration
 * the model runs with"; it changes when that changes), here one string naming the lmserve version and
 * a short hash of the engine build (the llama.cpp release node-llama-cpp bundles), the backend the model
 * runs on (CPU/CUDA/Vulkan and the offloaded layers) and the model file (path, size, modification time).
 * Example: `lmserve-0.1.0-3f9a1c0e2b7d`.
 */
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { projectRoot } from "../../paths.ts";
import { serverVersion } from "../../version.ts";
import type { EngineHost } from "../engine.ts";

const fingerprints = new WeakMap<EngineHost, string>();

/** The llama.cpp release and node-llama-cpp version the engine was built against ("unknown" when unreadable). */
function engineBuild(): string {
  const read = (path: string) => {
    try {
      return readFileSync(resolve(projectRoot, "node_modules/node-llama-cpp", path), "utf8");
    } catch {
      return "unknown";
    }
  };
  return `${read("llama/llama.cpp.info.json")}|${read("package.json").match(/"version":\s*"([^"]+)"/)?.[1]}`;
}

let build: string | undefined;

/**
 * The fingerprint of a loaded model, computed once per model: `lmserve-<version>-<12 hex digits>`.
 */
export function systemFingerprint(host: EngineHost): string {
  let fingerprint = fingerprints.get(host);
  if (fingerprint !== undefined) return fingerprint;
  build ??= engineBuild();
  let file = host.modelPath;
  try {
    const stat = statSync(host.modelPath);
    file += `|${stat.size}|${stat.mtimeMs}`;
  } catch {
    // A file deleted while served keeps its mapping: the path alone names it.
  }
  const { backend, offloadedLayers } = host.placement;
  const hash = createHash("sha256")
    .update(`${build}\n${backend}|${offloadedLayers}\n${file}`)
    .digest("hex")
    .slice(0, 12);
  fingerprint = `lmserve-${serverVersion}-${hash}`;
  fingerprints.set(host, fingerprint);
  return fingerprint;
}

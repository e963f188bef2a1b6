/**
 * Choosing the compute device of a model (`--device`, `--n-gpu-layers`): llama.cpp's GPU backends from
 * node-llama-cpp's `-cuda` / `-vulkan` packages are loaded as ggml backend modules on demand; a backend
 * whose runtime libraries, driver or GPU are missing registers no device and the CPU serves alone.
 */
import { gpuBackendPath, type NativeDevice, nativeAddon } from "./native.ts";

/** `--device`: `auto` takes the first GPU backend with a device (CUDA, then Vulkan), else the CPU. */
export type DeviceKind = "auto" | "cpu" | "cuda" | "vulkan";

/** The device kinds `--device` accepts. */
export const DEVICE_KINDS: readonly DeviceKind[] = ["auto", "cpu", "cuda", "vulkan"];

/** Raised when the requested device is not there; its message is one line. */
export class DeviceUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DeviceUnavailableError";
  }
}

/** The devices a model runs on: GPUs of one backend (empty: CPU only). */
export type DevicePlan = {
  /** "CPU", "CUDA" or "Vulkan". */
  backend: string;
  gpus: readonly NativeDevice[];
  /** GPU backends tried and not used, with why (for the startup log). */
  skipped: readonly { backend: string; reason: string }[];
};

const BACKEND_NAMES: Record<"cuda" | "vulkan", string> = { cuda: "CUDA", vulkan: "Vulkan" };

/** Why each backend could not be loaded, once per process (loading is tried once). */
const loadFailures = new Map<"cuda" | "vulkan", string>();

function gpusOf(kind: "cuda" | "vulkan"): { gpus: NativeDevice[]; reason?: string } {
  const engine = nativeAddon();
  const path = gpuBackendPath(kind);
  const name = BACKEND_NAMES[kind];
  const registered = () =>
    engine.devices().filter((device) => device.backend === name && device.type !== "cpu");
  if (registered().length === 0 && path !== undefined && !loadFailures.has(kind)) {
    const failure = engine.loadBackend(path);
    if (failure !== null) loadFailures.set(kind, failure.split("\n").at(-1)?.trim() ?? failure);
  }
  const gpus = registered();
  const reason =
    gpus.length > 0
      ? undefined
      : (loadFailures.get(kind) ?? (path === undefined ? "not installed" : "the backend found no GPU"));
  return reason === undefined ? { gpus } : { gpus, reason };
}

/**
 * The devices for `--device`.
 * @throws DeviceUnavailableError when `cuda` or `vulkan` was asked for and no such device registers.
 */
export function planDevices(kind: DeviceKind): DevicePlan {
  nativeAddon();
  if (kind === "cpu") return { backend: "CPU", gpus: [], skipped: [] };
  const order: ("cuda" | "vulkan")[] = kind === "auto" ? ["cuda", "vulkan"] : [kind];
  const skipped: { backend: string; reason: string }[] = [];
  for (const candidate of order) {
    const { gpus, reason } = gpusOf(candidate);
    if (gpus.length > 0) return { backend: BACKEND_NAMES[candidate], gpus, skipped };
    skipped.push({ backend: BACKEND_NAMES[candidate], reason: reason ?? "no device" });
  }
  if (kind === "auto") return { backend: "CPU", gpus: [], skipped };
  const installed = gpuBackendPath(kind) !== undefined;
  throw new DeviceUnavailableError(
    installed
      ? `--device ${kind}: no ${BACKEND_NAMES[kind]} device found (${skipped[0]?.reason ?? "no device"}; check the driver and ${kind === "cuda" ? "the CUDA runtime" : "libvulkan.so.1"}).`
      : `--device ${kind}: node-llama-cpp's ${kind} build is not installed (@node-llama-cpp/${process.platform}-${process.arch}-${kind}).`,
  );
}

/**
 * One short phrase for the GPU backends tried and not used, for the startup log's info line (the
 * loader's full messages go to the debug level): e.g. "none found (CUDA runtime not installed, Vulkan
 * loader not installed)".
 * @param skipped `DevicePlan.skipped`.
 * @returns undefined when no backend was tried.
 */
export function summariseSkippedBackends(
  skipped: readonly { backend: string; reason: string }[],
): string | undefined {
  if (skipped.length === 0) return undefined;
  const why = skipped.map(({ backend, reason }) => {
    if (/lib(cublas|cudart|cuda)\S*\.so/.test(reason)) return `${backend} runtime not installed`;
    if (/libvulkan\S*\.so/.test(reason)) return `${backend} loader not installed`;
    if (reason === "not installed") return `${backend} backend not installed`;
    return `no ${backend} device`;
  });
  return `none found (${why.join(", ")})`;
}

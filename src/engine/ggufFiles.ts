/**
 * GGUF files through node-llama-cpp, the library the engine is built on: reading a file's header (local or
 * remote) and downloading model files into a folder. `models/` (the download cache, `serve`/`pull`) uses
 * these and nothing else of node-llama-cpp, so that node-llama-cpp is imported in `src/engine/` only.
 *
 * The functions pass node-llama-cpp 3.21's errors through unchanged (its messages and ipull's
 * `StatusCodeError` are what `models/resolveModel.ts` maps to one-line errors); they add no retries, probes
 * or checks of their own.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import type {
  readGgufFileInfo as ReadGgufFileInfo,
  resolveModelFile as ResolveModelFile,
} from "node-llama-cpp";

// node-llama-cpp is imported on first use, and only its GGUF reader where that is all a call needs: the
// package's index (its model downloader, ipull, the CLI's modules) costs ~40 MiB resident and ~1.7 s of
// CPU to import, its GGUF reader alone ~13 MiB; a server of local files never needs the rest
// (`npm run bench:rss`, docs/ARCHITECTURE.md#memory).
let ggufReader: Promise<typeof ReadGgufFileInfo> | undefined;

/**
 * node-llama-cpp 3.21's `readGgufFileInfo` (same arguments, result and errors), from its module
 * `dist/gguf/readGgufFileInfo.js` alone rather than the package's index, imported on the first call.
 */
export async function readGgufFileInfo(
  ...args: Parameters<typeof ReadGgufFileInfo>
): ReturnType<typeof ReadGgufFileInfo> {
  ggufReader ??= (async () => {
    // The package's `exports` name only its index: its folder is found from where the index resolves.
    const index = createRequire(import.meta.url).resolve("node-llama-cpp");
    const url = pathToFileURL(join(dirname(index), "gguf", "readGgufFileInfo.js")).href;
    return ((await import(url)) as { readGgufFileInfo: typeof ReadGgufFileInfo }).readGgufFileInfo;
  })();
  return (await ggufReader)(...args);
}

/** node-llama-cpp's `resolveModelFile`, from the package's index, imported on the first call. */
async function resolveModelFile(
  ...args: Parameters<typeof ResolveModelFile>
): ReturnType<typeof ResolveModelFile> {
  return (await import("node-llama-cpp")).resolveModelFile(...args);
}

/** ggml's type ids (`enum ggml_type`, `ggml.h`; node-llama-cpp's `GgmlType`) of {@link blockLayout}. */
const GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q2_K: 10,
  Q3_K: 11,
  Q4_K: 12,
  Q5_K: 13,
  Q6_K: 14,
  I8: 24,
  I16: 25,
  I32: 26,
  I64: 27,
  F64: 28,
  BF16: 30,
} as const;

/** Where a model file is looked up or downloaded to, and how Hugging Face is reached. */
export type ModelFileLocation = {
  /** The download folder (absolute). */
  directory: string;
  /** File name to store the download under; absent: node-llama-cpp's (`hf_<owner>_[<repo>_]<file>.gguf`). */
  fileName?: string | undefined;
  /** Hugging Face endpoint; absent: node-llama-cpp's lookup (`MODEL_ENDPOINT`, `HF_ENDPOINT`, huggingface.co). */
  hfEndpoint?: string | undefined;
  /** Hugging Face token; absent: node-llama-cpp's lookup (`HF_TOKEN`, `~/.cache/huggingface/token`). */
  hfToken?: string | undefined;
};

/** Hugging Face endpoint and token as node-llama-cpp's options spell them (absent: its own lookup). */
function huggingFaceOptions(location: { hfEndpoint?: string | undefined; hfToken?: string | undefined }) {
  return {
    ...(location.hfEndpoint !== undefined ? { endpoints: { huggingFace: location.hfEndpoint } } : {}),
    ...(location.hfToken !== undefined ? { tokens: { huggingFace: location.hfToken } } : {}),
  };
}

/** node-llama-cpp's `resolveModelFile` options common to a lookup and a download. */
function resolveOptions(location: ModelFileLocation) {
  return {
    directory: location.directory,
    cli: false,
    ...(location.fileName !== undefined ? { fileName: location.fileName } : {}),
    ...huggingFaceOptions(location),
  };
}

/**
 * The path a model source is (or would be) stored at in `location.directory`, found by name with no network
 * access (node-llama-cpp's `resolveModelFile` with `download: false`).
 * @param source An `hf:` URI or an http(s) URL.
 * @throws node-llama-cpp's error when the file is not there or the source cannot be parsed.
 */
export function findModelFile(source: string, location: ModelFileLocation): Promise<string> {
  return resolveModelFile(source, { ...resolveOptions(location), download: false });
}

/** Options of {@link downloadModelFile}. */
export type DownloadModelFileOptions = {
  /** Aborts the download; the partial `<file>.ipull` is kept so that the next download resumes it. */
  signal: AbortSignal;
  /** Byte counts while downloading (`totalSize` 0 when unknown). */
  onProgress?: ((status: { totalSize: number; downloadedSize: number }) => void) | undefined;
};

/**
 * Downloads a model source into `location.directory` (node-llama-cpp's `resolveModelFile` with
 * `download: "auto"`: ipull's ranged, resumable download; a file already there is returned as is). No
 * verification of the file (`verify: false`), and a cancelled download keeps its partial file.
 * @param source An `hf:` URI or an http(s) URL.
 * @returns The downloaded file's path (for split models, the first part).
 * @throws node-llama-cpp's or ipull's error (HTTP status in `statusCode`, fs errors with their `code`).
 */
export function downloadModelFile(
  source: string,
  location: ModelFileLocation,
  options: DownloadModelFileOptions,
): Promise<string> {
  return resolveModelFile(source, {
    ...resolveOptions(location),
    download: "auto",
    verify: false,
    deleteTempFileOnCancel: false,
    signal: options.signal,
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  });
}

/**
 * Reads the GGUF header of a remote model source without downloading it (node-llama-cpp's
 * `readGgufFileInfo`: the URI resolved exactly as {@link downloadModelFile} resolves it, the quant form's
 * manifest, the endpoint and token; ranged GETs retried twice).
 * @throws node-llama-cpp's error (a network failure, an HTTP status, `InvalidGgufMagicError`, ...).
 */
export async function readRemoteGgufHeader(
  source: string,
  options: { signal: AbortSignal; hfEndpoint?: string | undefined; hfToken?: string | undefined },
): Promise<void> {
  await readGgufFileInfo(source, {
    readTensorInfo: false,
    logWarnings: false,
    spliceSplitFiles: false,
    fetchRetryOptions: { retries: 2, factor: 2, minTimeout: 500, maxTimeout: 2000 },
    signal: options.signal,
    ...huggingFaceOptions(options),
  });
}

/** A tensor of a GGUF file, as far as where its data lies. */
export type GgufTensorExtent = {
  /** The tensor's name. */
  name: string;
  /** Byte offset of its data in the file. */
  fileOffset: number;
  /** Number of elements (the product of its dimensions). */
  elements: number;
  /** Bytes of its data, computed from the dimensions for the common ggml types; absent for the others. */
  dataBytes?: number | undefined;
};

/** What {@link readLocalGgufLayout} reads from a local GGUF file. */
export type GgufLayout = {
  /** `general.architecture`, when present. */
  architecture?: string | undefined;
  /** Every tensor's extent. */
  tensors: GgufTensorExtent[];
};

/** `[elements per block, bytes per block]` of the ggml types whose layout is fixed and well known. */
const blockLayout: Partial<Record<number, readonly [number, number]>> = {
  [GgmlType.F32]: [1, 4],
  [GgmlType.F16]: [1, 2],
  [GgmlType.BF16]: [1, 2],
  [GgmlType.F64]: [1, 8],
  [GgmlType.I8]: [1, 1],
  [GgmlType.I16]: [1, 2],
  [GgmlType.I32]: [1, 4],
  [GgmlType.I64]: [1, 8],
  [GgmlType.Q4_0]: [32, 18],
  [GgmlType.Q4_1]: [32, 20],
  [GgmlType.Q5_0]: [32, 22],
  [GgmlType.Q5_1]: [32, 24],
  [GgmlType.Q8_0]: [32, 34],
  [GgmlType.Q2_K]: [256, 84],
  [GgmlType.Q3_K]: [256, 110],
  [GgmlType.Q4_K]: [256, 144],
  [GgmlType.Q5_K]: [256, 176],
  [GgmlType.Q6_K]: [256, 210],
};

/**
 * Parses a local GGUF file's header, metadata and tensor infos (node-llama-cpp's `readGgufFileInfo`, split
 * files not spliced) and returns the architecture and where each tensor's data lies (block sizes from
 * ggml's `ggml_type_traits`).
 * @throws node-llama-cpp's parse error, or `signal`'s reason when aborted.
 */
export async function readLocalGgufLayout(
  path: string,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<GgufLayout> {
  const fileInfo = await readGgufFileInfo(path, {
    sourceType: "filesystem",
    logWarnings: false,
    spliceSplitFiles: false,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const tensors = (fileInfo.tensorInfo ?? []).map((tensor): GgufTensorExtent => {
    const elements = tensor.dimensions.reduce<number>((product, dim) => product * Number(dim), 1);
    const layout = blockLayout[tensor.ggmlType];
    return {
      name: tensor.name,
      fileOffset: Number(tensor.fileOffset),
      elements,
      ...(layout !== undefined ? { dataBytes: Math.ceil(elements / layout[0]) * layout[1] } : {}),
    };
  });
  const architecture = fileInfo.metadata?.general?.architecture;
  return { tensors, ...(typeof architecture === "string" ? { architecture } : {}) };
}

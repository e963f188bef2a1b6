/**
 * CLI: writes a random-weight GGUF of a given transformer shape, with the tokenizer and chat
 * template copied from a llama.cpp vocabulary GGUF. Default: Qwen2.5-0.5B's shape as Q8_0 (~530 MB)
 * into `bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf` (git-ignored).
 *
 * Usage:
 *   npx tsx bench/make-model.ts [--out FILE] [--vocab FILE] [--arch qwen2|llama] [--hidden 896]
 *     [--layers 24] [--heads 14] [--kv-heads 2] [--ffn 4864] [--type q8_0|f32|f16] [--context 32768]
 *     [--seed N] [--untied] [--quiet] [--help]
 *   npx tsx bench/make-model.ts --mmproj-for TEXT_MODEL.gguf [--out FILE] [--seed N]
 *   npx tsx bench/make-model.ts --lora-for BASE_MODEL.gguf [--rank 8] [--out FILE] [--seed N]
 *
 * With `--mmproj-for`, writes a tiny random-weight vision projector (an mmproj for llama.cpp's `mtmd`)
 * whose output width is that text model's `*.embedding_length` (see `gguf/syntheticProjector.ts`);
 * the shape flags do not apply to it. With `--lora-for`, writes a random-weight LoRA adapter of rank
 * `--rank` on the base's attn_q and attn_v (see `gguf/syntheticLora.ts`).
 *
 * Relative paths are resolved against the current directory; the defaults against the project root
 * (`--vocab` defaults to `../shared/models/ggml-vocab-qwen2.gguf`, or `ggml-vocab-llama-bpe.gguf`
 * for `--arch llama`). Exit code 0 on success, 1 on a bad argument or a failure (message on stderr).
 */
import { mkdirSync } from "node:fs";
import { basename, dirname, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { projectRoot, sharedModelsDir } from "../src/paths.ts";
import { writeSyntheticLora } from "./gguf/syntheticLora.ts";
import {
  ARCH_DEFAULTS,
  type ModelArch,
  type ModelShape,
  QWEN25_05B_SHAPE,
  type SyntheticModelResult,
  type WeightType,
  writeSyntheticModel,
} from "./gguf/syntheticModel.ts";
import {
  type SyntheticProjectorResult,
  TINY_PROJECTOR_SHAPE,
  textEmbeddingLength,
  writeSyntheticProjector,
} from "./gguf/syntheticProjector.ts";

/** Folder (git-ignored) where generated models go by default. */
export const benchModelsDir: string = resolve(projectRoot, "bench/models");

/** Parsed command line of {@link main}. */
export interface MakeModelArgs {
  /** Model shape. */
  shape: ModelShape;
  /** Weight matrix storage type. */
  weightType: WeightType;
  /** Absolute output path. */
  outPath: string;
  /** Absolute vocabulary GGUF path. */
  vocabPath: string;
  /** PRNG seed. */
  seed: number;
  /** Whether the output head reuses the token embedding. */
  tied: boolean;
  /** Suppress progress output. */
  quiet: boolean;
  /** Print usage and exit without writing anything. */
  help: boolean;
  /** `--mmproj-for`: absolute path of the text model to write a vision projector for, instead of a model. */
  mmprojFor?: string;
  /** `--lora-for`: absolute path of the base model to write a LoRA adapter for, instead of a model. */
  loraFor?: string;
  /** `--rank`: the adapter's rank. Defaults to 8. */
  rank: number;
}

/** Usage text printed by `--help`. */
export const USAGE = `Usage: npx tsx bench/make-model.ts [options]
  --out FILE        output GGUF (default bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf for the default shape)
  --vocab FILE      GGUF to copy tokenizer.* from (default ../shared/models/ggml-vocab-qwen2.gguf,
                    or ggml-vocab-llama-bpe.gguf with --arch llama)
  --arch A          qwen2 (default) or llama
  --hidden N        hidden size (896)          --layers N     blocks (24)
  --heads N         attention heads (14)       --kv-heads N   key/value heads (2)
  --ffn N           feed-forward size (4864)   --context N    trained context length (32768)
  --type T          q8_0 (default), f16 or f32 --seed N       PRNG seed (1234)
  --untied          write a separate output.weight instead of reusing token_embd.weight
  --quiet           no progress on stderr
  --mmproj-for FILE instead of a model, write a tiny random-weight vision projector (mmproj, "mlp" type:
                    32 px images in 8 px patches, 16 image tokens each) for the text model FILE,
                    sized to its embedding width (default --out bench/models/<FILE's name>-mmproj.gguf)
  --lora-for FILE   instead of a model, write a random-weight LoRA adapter (attn_q, attn_v) for the model
                    FILE (default --out bench/models/<FILE's name>-lora-<seed>.gguf)
  --rank N          the adapter's rank (8)
`;

/** Default file name: the spec's name for the default shape, otherwise one describing the shape. */
export function defaultFileName(shape: ModelShape, weightType: WeightType, tied: boolean): string {
  const isDefault = (Object.keys(QWEN25_05B_SHAPE) as (keyof ModelShape)[]).every(
    (k) => k === "context" || shape[k] === QWEN25_05B_SHAPE[k],
  );
  if (isDefault && tied) return `qwen2.5-0.5b-synthetic-${weightType}.gguf`;
  const s = shape;
  return `synthetic-${s.arch}-h${s.hidden}-l${s.layers}-a${s.heads}-kv${s.kvHeads}-ff${s.ffn}${tied ? "" : "-untied"}-${weightType}.gguf`;
}

/**
 * Parses `argv` (without node and script) into {@link MakeModelArgs}.
 *
 * @throws {Error} for unknown options, non-integer sizes, an unknown `--arch` or `--type`.
 */
export function parseMakeModelArgs(argv: string[]): MakeModelArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      out: { type: "string" },
      vocab: { type: "string" },
      arch: { type: "string", default: QWEN25_05B_SHAPE.arch },
      hidden: { type: "string", default: String(QWEN25_05B_SHAPE.hidden) },
      layers: { type: "string", default: String(QWEN25_05B_SHAPE.layers) },
      heads: { type: "string", default: String(QWEN25_05B_SHAPE.heads) },
      "kv-heads": { type: "string", default: String(QWEN25_05B_SHAPE.kvHeads) },
      ffn: { type: "string", default: String(QWEN25_05B_SHAPE.ffn) },
      context: { type: "string", default: String(QWEN25_05B_SHAPE.context) },
      type: { type: "string", default: "q8_0" },
      seed: { type: "string", default: "1234" },
      untied: { type: "boolean", default: false },
      quiet: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
      "mmproj-for": { type: "string" },
      "lora-for": { type: "string" },
      rank: { type: "string", default: "8" },
    },
  });
  const int = (name: string, text: string): number => {
    if (!/^-?\d+$/.test(text)) throw new Error(`--${name} must be an integer, got "${text}"`);
    return Number.parseInt(text, 10);
  };
  const arch = values.arch;
  if (arch !== "qwen2" && arch !== "llama") throw new Error(`--arch must be qwen2 or llama, got "${arch}"`);
  const weightType = values.type.toLowerCase();
  if (weightType !== "q8_0" && weightType !== "f16" && weightType !== "f32") {
    throw new Error(`--type must be q8_0, f16 or f32, got "${values.type}"`);
  }
  const shape: ModelShape = {
    arch: arch satisfies ModelArch,
    hidden: int("hidden", values.hidden),
    layers: int("layers", values.layers),
    heads: int("heads", values.heads),
    kvHeads: int("kv-heads", values["kv-heads"]),
    ffn: int("ffn", values.ffn),
    context: int("context", values.context),
  };
  const tied = !values.untied;
  const mmprojFor = values["mmproj-for"] === undefined ? undefined : resolve(values["mmproj-for"]);
  const loraFor = values["lora-for"] === undefined ? undefined : resolve(values["lora-for"]);
  return {
    shape,
    weightType,
    outPath: values.out
      ? resolve(values.out)
      : values["mmproj-for"] !== undefined
        ? resolve(benchModelsDir, `${basename(values["mmproj-for"], ".gguf")}-mmproj.gguf`)
        : values["lora-for"] !== undefined
          ? resolve(benchModelsDir, `${basename(values["lora-for"], ".gguf")}-lora-${values.seed}.gguf`)
          : resolve(benchModelsDir, defaultFileName(shape, weightType, tied)),
    vocabPath: values.vocab ? resolve(values.vocab) : resolve(sharedModelsDir, ARCH_DEFAULTS[arch].vocab),
    seed: int("seed", values.seed),
    tied,
    quiet: values.quiet,
    help: values.help,
    ...(mmprojFor === undefined ? {} : { mmprojFor }),
    ...(loraFor === undefined ? {} : { loraFor }),
    rank: int("rank", values.rank),
  };
}

/**
 * Runs the CLI: parses arguments, writes the model (or, with `--mmproj-for`, the projector), prints
 * progress to stderr and a summary line (path, size in MB, tensors, parameters, seconds) to stdout.
 * With `--help`, prints {@link USAGE}.
 *
 * @returns The written file's summary, or undefined for `--help` and `--lora-for`.
 * @throws {Error} as {@link parseMakeModelArgs}, `writeSyntheticModel` and `writeSyntheticProjector`.
 */
export async function main(
  argv: string[],
): Promise<SyntheticModelResult | SyntheticProjectorResult | undefined> {
  const args = parseMakeModelArgs(argv);
  if (args.help) {
    process.stdout.write(USAGE);
    return undefined;
  }
  mkdirSync(dirname(args.outPath), { recursive: true });
  if (args.mmprojFor !== undefined) return makeProjector(args.mmprojFor, args.outPath, args.seed);
  if (args.loraFor !== undefined) {
    const adapter = await writeSyntheticLora({
      basePath: args.loraFor,
      outPath: args.outPath,
      seed: args.seed,
      rank: args.rank,
    });
    process.stdout.write(
      `${shownPath(args.outPath)}: ${(adapter.bytes / 1e6).toFixed(2)} MB, ${adapter.tensors.length} tensors, rank ${args.rank}\n`,
    );
    return undefined;
  }
  const started = performance.now();
  let lastReport = 0;
  const result = await writeSyntheticModel({
    shape: args.shape,
    vocabPath: args.vocabPath,
    outPath: args.outPath,
    weightType: args.weightType,
    seed: args.seed,
    tiedEmbeddings: args.tied,
    onProgress: (done, total, name) => {
      const now = performance.now();
      if (args.quiet || (now - lastReport < 1000 && done < total)) return;
      lastReport = now;
      process.stderr.write(`[${done}/${total}] ${name} (${((now - started) / 1000).toFixed(1)} s)\n`);
    },
  });
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(
    `${shownPath(result.path)}: ${(result.bytes / 1e6).toFixed(1)} MB, ${result.tensorCount} tensors, ` +
      `${(result.parameterCount / 1e6).toFixed(1)}M parameters, vocab ${result.vocabSize}, ${seconds.toFixed(1)} s\n`,
  );
  return result;
}

/** The `--mmproj-for` mode of {@link main}: a projector sized to `textModel`'s embedding width. */
async function makeProjector(
  textModel: string,
  outPath: string,
  seed: number,
): Promise<SyntheticProjectorResult> {
  const started = performance.now();
  const projectionDim = textEmbeddingLength(textModel);
  const result = await writeSyntheticProjector({
    shape: { ...TINY_PROJECTOR_SHAPE, projectionDim },
    outPath,
    seed,
  });
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(
    `${shownPath(result.path)}: ${(result.bytes / 1e6).toFixed(2)} MB, ${result.tensorCount} tensors, ` +
      `${result.parameterCount} parameters, output width ${projectionDim}, ` +
      `${result.imageTokens} tokens per image, ${seconds.toFixed(1)} s\n`,
  );
  return result;
}

/** `path` relative to the working directory when it lies under it, else absolute. */
function shownPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel.startsWith("..") ? path : rel;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    process.stderr.write(`make-model: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}

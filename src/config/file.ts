/**
 * The `--config FILE` YAML file of `lmserve serve` (as `vllm serve --config`): every flag is a key named
 * by its long form without `--` (kebab-case, or snake_case), plus `model` / `models`. Flags given on the
 * command line override the file's values. Example:
 *
 * ```yaml
 * host: 0.0.0.0
 * api-key: [key-one, key-two]
 * rate-limit: 60/min
 * prefix-caching: false          # or: no-prefix-caching: true
 * models:
 *   - model: /models/a.gguf
 *     served-model-name: [a, alias-of-a]
 *     max-model-len: 4096
 *     max-num-seqs: 4
 *   - model: /models/b.gguf
 *     chat-template: /templates/b.jinja
 *     mmproj: /models/b-mmproj.gguf
 *     cache-type-k: q8_0
 *     cache-type-v: q8_0
 *     flash-attn: on
 *     max-num-batched-tokens: 1024
 *     lora: [sql=/adapters/b-sql.gguf, chat=/adapters/b-chat.gguf:0.5]
 * ```
 *
 * Paths (models, chat templates) are taken as on the command line: relative to the working directory.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { ConfigError } from "./ConfigError.ts";

// yaml is loaded on the first --config file (synchronously, its CommonJS build): a server without one
// does not hold it (~4 MiB resident, `npm run bench:rss`).
let yaml: typeof import("yaml") | undefined;

/** A flag value as the file gives it: scalars become strings (booleans stay booleans), lists string lists. */
export type FileFlagValue = string | string[] | boolean;

/** One entry of the file's `models` list; its settings override the top-level ones for that model. */
export type ModelFileEntry = {
  /** The model source (path, `hf:` URI or URL), the entry's `model` key. */
  source: string;
  /** `served-model-name`: one name or a list; the first is the id. */
  servedModelNames?: string[];
  /** `max-model-len`, as text (parsed with the flags). */
  maxModelLen?: string;
  /** `max-num-seqs`, as text. */
  maxNumSeqs?: string;
  /** `chat-template`: a Jinja file path. */
  chatTemplate?: string;
  /** `mmproj`: the model's multimodal projector GGUF path. */
  mmproj?: string;
  /** `cache-type-k`: the K cache's type, as text. */
  cacheTypeK?: string;
  /** `cache-type-v`: the V cache's type, as text. */
  cacheTypeV?: string;
  /** `flash-attn`: auto, on or off (a YAML boolean too). */
  flashAttn?: string;
  /** `max-num-batched-tokens`, as text. */
  maxNumBatchedTokens?: string;
  /** `matryoshka-dimensions`: comma-separated widths, as text (or a YAML list). */
  matryoshkaDimensions?: string;
  /** `lora`: the model's LoRA adapters, `NAME=PATH[:SCALE]` each (one value or a list). */
  lora?: string[];
};

/** What a config file holds, keyed like the CLI parser's option attributes (`maxNumSeqs`). */
export type ConfigFileContents = {
  flags: Record<string, FileFlagValue>;
  /** The `model` / `models` entries, or undefined when the file names no model. */
  models: ModelFileEntry[] | undefined;
};

/** Flags that take a list of values (a single value in the file becomes a one-item list). */
const LIST_FLAGS = new Set(["servedModelName", "apiKey", "allowedOrigins", "lora"]);

const MODEL_ENTRY_KEYS: Record<string, keyof ModelFileEntry> = {
  model: "source",
  "served-model-name": "servedModelNames",
  "max-model-len": "maxModelLen",
  "max-num-seqs": "maxNumSeqs",
  "chat-template": "chatTemplate",
  mmproj: "mmproj",
  "cache-type-k": "cacheTypeK",
  "cache-type-v": "cacheTypeV",
  "flash-attn": "flashAttn",
  "max-num-batched-tokens": "maxNumBatchedTokens",
  "matryoshka-dimensions": "matryoshkaDimensions",
  lora: "lora",
};

/**
 * Reads and checks a config file.
 * @param knownFlags the option attributes of `lmserve serve` (e.g. `maxNumSeqs`); a key outside them is
 *   an error. Undefined accepts any key.
 * @throws ConfigError for an unreadable file, invalid YAML, a top level that is not a mapping, an
 *   unknown key, or a value of the wrong shape (each message names the file and the key).
 */
export function readConfigFile(path: string, knownFlags?: ReadonlySet<string>): ConfigFileContents {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError(
      `Cannot read the config file ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`,
    );
  }
  yaml ??= createRequire(import.meta.url)("yaml") as typeof import("yaml");
  const document = yaml.parseDocument(text);
  const firstError = document.errors[0];
  if (firstError) throw new ConfigError(`${path} is not valid YAML: ${firstError.message.split("\n")[0]}`);
  const root: unknown = document.toJS();
  if (root === null || root === undefined) return { flags: {}, models: undefined };
  if (!isRecord(root)) throw new ConfigError(`${path} must be a mapping of flag names to values.`);

  const flags: Record<string, FileFlagValue> = {};
  let models: ModelFileEntry[] | undefined;
  for (const [rawKey, value] of Object.entries(root)) {
    const key = rawKey.replaceAll("_", "-");
    if (value === null || value === undefined) continue;
    if (key === "model" || key === "models") {
      models = [...(models ?? []), ...modelEntries(path, key, value)];
      continue;
    }
    const negated = key.startsWith("no-") && typeof value === "boolean";
    const attribute = camelCase(negated ? key.slice(3) : key);
    if (knownFlags && !knownFlags.has(attribute) && !knownFlags.has(camelCase(key))) {
      throw new ConfigError(`${path}: unknown key '${rawKey}' (keys are the flags of 'lmserve serve').`);
    }
    flags[attribute] = negated ? !value : flagValue(path, rawKey, value, LIST_FLAGS.has(attribute));
  }
  return { flags, models };
}

/**
 * Merges a config file's flags under the command line's: a flag given on the command line wins; a
 * flag the parser only filled with its default takes the file's value.
 * @param defaulted the attributes whose command-line value is the parser's default.
 */
export function mergeFileFlags<Flags extends object>(
  cliFlags: Flags,
  fileFlags: Record<string, FileFlagValue>,
  defaulted: ReadonlySet<string>,
): Flags {
  const merged: Record<string, unknown> = { ...(cliFlags as Record<string, unknown>) };
  for (const [key, value] of Object.entries(fileFlags)) {
    if (merged[key] === undefined || defaulted.has(key)) merged[key] = value;
  }
  return merged as Flags;
}

function modelEntries(path: string, key: string, value: unknown): ModelFileEntry[] {
  const items = Array.isArray(value) ? value : [value];
  return items.map((item, index) => {
    const where = `${path}: ${key}${Array.isArray(value) ? `[${index}]` : ""}`;
    if (typeof item === "string" && item.length > 0) return { source: item };
    if (!isRecord(item)) throw new ConfigError(`${where} must be a model path or a mapping with 'model'.`);
    const entry: Record<string, unknown> = {};
    for (const [rawField, fieldValue] of Object.entries(item)) {
      const field = MODEL_ENTRY_KEYS[rawField.replaceAll("_", "-")];
      if (field === undefined) {
        throw new ConfigError(
          `${where}: unknown key '${rawField}' (allowed: ${Object.keys(MODEL_ENTRY_KEYS).join(", ")}).`,
        );
      }
      if (fieldValue === null || fieldValue === undefined) continue;
      entry[field] = flagValue(
        path,
        `${key}.${rawField}`,
        fieldValue,
        field === "servedModelNames" || field === "lora",
      );
    }
    if (typeof entry.source !== "string" || entry.source.length === 0) {
      throw new ConfigError(`${where} has no 'model' (the model path, hf: URI or URL).`);
    }
    return entry as ModelFileEntry;
  });
}

function flagValue(path: string, key: string, value: unknown, list: boolean): FileFlagValue {
  const scalar = (item: unknown): string => {
    if (typeof item === "string") return item;
    if (typeof item === "number" && Number.isFinite(item)) return String(item);
    throw new ConfigError(`${path}: '${key}' must be a string or a number, got ${JSON.stringify(item)}.`);
  };
  if (Array.isArray(value)) {
    if (!list) throw new ConfigError(`${path}: '${key}' takes one value, not a list.`);
    return value.map(scalar);
  }
  if (typeof value === "boolean") {
    if (list) throw new ConfigError(`${path}: '${key}' must be a value or a list of values.`);
    return value;
  }
  return list ? [scalar(value)] : scalar(value);
}

function camelCase(key: string): string {
  return key.replace(/-([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

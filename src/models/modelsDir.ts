/**
 * The models of `--models-dir DIR`, laid out as llama-server's router reads them: each `NAME.gguf` at
 * the top is the model `NAME`; a subfolder `NAME/` holding a model GGUF (and optionally a projector
 * whose file name starts with `mmproj`, and the shards `-00001-of-0000N.gguf` of one model) is the
 * model `NAME`. Projector files and shards after the first are not models of their own. Symbolic links
 * count as what they point to; broken ones are skipped. Reads only folder listings and `stat`s; never
 * parses models.
 */
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";

/** A model found in the folder. */
export type DirectoryModel = {
  /** Its served name: the file name without `.gguf`, or the subfolder's name. */
  id: string;
  /** Absolute path of its GGUF (the first shard for a split model). */
  path: string;
  /** Absolute path of its projector (`mmproj*.gguf` in its subfolder), or absent. */
  mmproj?: string;
  /** Bytes of its files on disk (every shard and the projector). */
  sizeBytes: number;
};

const GGUF = /\.gguf$/i;
const SHARD = /-(\d{5})-of-(\d{5})\.gguf$/i;

/**
 * Lists the models of `dir`, sorted by id. Unreadable entries are skipped.
 * @throws Error (ENOENT, ENOTDIR) when `dir` itself cannot be read.
 */
export async function listModelsDir(dir: string): Promise<DirectoryModel[]> {
  const found: DirectoryModel[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    // A symbolic link counts as what it points to (models are often linked in, e.g. from a download cache).
    const kind = entry.isSymbolicLink() ? await linkTarget(path) : entry;
    if (kind === undefined) continue;
    if (kind.isFile() && GGUF.test(entry.name) && !isProjector(entry.name)) {
      const shard = SHARD.exec(entry.name);
      if (shard && shard[1] !== "00001") continue;
      const size = await sizeOf(path);
      if (size === undefined) continue;
      const id = entry.name.replace(shard ? SHARD : GGUF, "");
      let sizeBytes = size;
      // A split model's size is every shard's: NAME-00002-of-0000N.gguf and on.
      for (let index = 2; shard && index <= Number(shard[2]); index++) {
        const next = `${id}-${String(index).padStart(5, "0")}-of-${shard[2]}.gguf`;
        sizeBytes += (await sizeOf(join(dir, next))) ?? 0;
      }
      found.push({ id, path, sizeBytes });
    } else if (kind.isDirectory()) {
      const model = await folderModel(entry.name, path);
      if (model) found.push(model);
    }
  }
  return found.sort((a, b) => a.id.localeCompare(b.id));
}

/** What a symbolic link points to (a file or a folder), or undefined when it is broken. */
async function linkTarget(path: string): Promise<{ isFile(): boolean; isDirectory(): boolean } | undefined> {
  try {
    return await stat(path);
  } catch {
    return undefined;
  }
}

function isProjector(name: string): boolean {
  return name.toLowerCase().startsWith("mmproj");
}

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    const info = await stat(path);
    return info.isFile() ? info.size : undefined;
  } catch {
    return undefined;
  }
}

/** The model of a subfolder: its first (or only) model GGUF and its projector; undefined when none. */
async function folderModel(id: string, folder: string): Promise<DirectoryModel | undefined> {
  let names: string[];
  try {
    names = (await readdir(folder)).filter((name) => GGUF.test(name)).sort();
  } catch {
    return undefined;
  }
  const projector = names.find(isProjector);
  const models = names.filter((name) => !isProjector(name));
  const first = models.find((name) => SHARD.exec(name)?.[1] === "00001") ?? models[0];
  if (first === undefined) return undefined;
  let sizeBytes = 0;
  for (const name of [...models, ...(projector ? [projector] : [])])
    sizeBytes += (await sizeOf(join(folder, name))) ?? 0;
  return {
    id,
    path: join(folder, first),
    ...(projector ? { mmproj: join(folder, projector) } : {}),
    sizeBytes,
  };
}

/**
 * Facts a benchmark report records about its run (revision, package versions, machine) and the
 * default synthetic model, shared by `bench/serve.ts` and `bench/peer.ts`.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import { relative, resolve } from "node:path";
import { projectRoot } from "../../src/paths.ts";
import { main as makeModel } from "../make-model.ts";

/** The synthetic Qwen2.5-0.5B Q8_0 model `bench/make-model.ts` writes by default (git-ignored). */
export const DEFAULT_MODEL: string = resolve(projectRoot, "bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf");

/**
 * Makes sure `modelPath` exists: the default model is generated (make-model's `main`) when missing.
 * @throws Error when another missing model is asked for, or generation fails.
 */
export async function ensureModel(modelPath: string, log: (line: string) => void): Promise<void> {
  if (existsSync(modelPath)) return;
  if (modelPath !== DEFAULT_MODEL) throw new Error(`model not found: ${modelPath}`);
  log(`model ${relative(projectRoot, DEFAULT_MODEL)} is missing: generating it (bench/make-model.ts)`);
  await makeModel(["--out", DEFAULT_MODEL]);
  if (!existsSync(DEFAULT_MODEL)) throw new Error("bench/make-model.ts wrote no model");
}

/** The short commit of the checkout, "(with uncommitted changes)" when tracked files differ; "unknown" off git. */
export function gitRevision(): string {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: projectRoot })
      .toString()
      .trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: projectRoot })
      .toString()
      .trim();
    return dirty ? `${head} (with uncommitted changes)` : head;
  } catch {
    return "unknown";
  }
}

/** The installed version of an npm package (from its `node_modules/NAME/package.json`). */
export function packageVersion(name: string): string {
  const path = resolve(projectRoot, "node_modules", name, "package.json");
  return (JSON.parse(readFileSync(path, "utf8")) as { version: string }).version;
}

/** Writes `path` atomically (through `path.tmp`, git-ignored). */
export function writeAtomic(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

/** "CPU: MODEL, N logical cores (availableParallelism P), G GiB RAM". */
export function cpuFacts(): string {
  const cpu = cpus();
  return `CPU: ${cpu[0]?.model ?? "unknown"}, ${cpu.length} logical cores (availableParallelism ${availableParallelism()}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM`;
}

/** The 1/5/15-minute load averages as "a / b / c". */
export function loadFacts(load: readonly number[] = loadavg()): string {
  return load.map((value) => value.toFixed(2)).join(" / ");
}

/**
 * Builds the peer of `bench/peer.ts` once: `llama-server` and `llama-batched-bench` from the exact
 * llama.cpp source node-llama-cpp ships (`node_modules/node-llama-cpp/llama/gitRelease.bundle`), in
 * the git-ignored `bench/.peer/`. CMake Release, `-march=native`, AMX off (its kernels SIGILL on the
 * benchmark machine), no OpenSSL (no downloads), no web UI, static. A stamp file holding the bundle's
 * commit and the CMake flags makes later runs skip the build; delete `bench/.peer/` to rebuild.
 */
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { projectRoot } from "../../src/paths.ts";

/** The git-ignored folder holding the clone, the build and the stamp. */
export const PEER_DIR: string = resolve(projectRoot, "bench/.peer");
const BUNDLE = resolve(projectRoot, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
const TARGETS = ["llama-server", "llama-batched-bench"] as const;

/**
 * The main worktree's `bench/.peer` when this checkout is a linked git worktree (its git common dir
 * is the main checkout's `.git`), else undefined: worktrees share one peer build instead of each
 * building its own (11 minutes on 2 cores).
 */
export function mainWorktreePeerDir(): string | undefined {
  try {
    const common = execFileSync("git", [
      "-C",
      projectRoot,
      "rev-parse",
      "--path-format=absolute",
      "--git-common-dir",
    ])
      .toString()
      .trim();
    const main = dirname(common);
    return main === projectRoot ? undefined : resolve(main, "bench/.peer");
  } catch {
    return undefined;
  }
}

/** CMake cache options of the peer build. */
export const CMAKE_FLAGS: readonly string[] = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=OFF",
  "-DGGML_NATIVE=ON",
  "-DGGML_AMX_TILE=OFF",
  "-DGGML_AMX_INT8=OFF",
  "-DGGML_AMX_BF16=OFF",
  // This llama.cpp has no CURL option any more (LLAMA_CURL is deprecated); HTTPS goes through OpenSSL.
  "-DLLAMA_OPENSSL=OFF",
  "-DLLAMA_BUILD_UI=OFF",
  "-DLLAMA_USE_PREBUILT_UI=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
];

/** The built peer. */
export type PeerBinaries = {
  server: string;
  batchedBench: string;
  /** The llama.cpp commit built (short hash). */
  commit: string;
  /** Seconds the build took in this run; null when the stamp said it was built before. */
  buildSeconds: number | null;
  /** Seconds the build took when it was made (from the stamp). */
  stampedSeconds: number;
  /** The folder the binaries are in (shown relative to the project when inside it). */
  dir: string;
};

type Stamp = { commit: string; flags: readonly string[]; seconds: number };

function bundleCommit(): string {
  if (!existsSync(BUNDLE)) throw new Error(`no llama.cpp bundle at ${BUNDLE} (npm ci first)`);
  const heads = execFileSync("git", ["bundle", "list-heads", BUNDLE]).toString().trim().split("\n");
  const hash = heads[0]?.split(" ")[0];
  if (!hash) throw new Error(`${BUNDLE} lists no head`);
  return hash.slice(0, 7);
}

async function run(command: string, args: string[], log: (line: string) => void): Promise<void> {
  log(`  $ ${command} ${args.join(" ")}`);
  // nice 19: the machine is shared; the build must not slow other people's work down.
  const child = spawn("nice", ["-n", "19", command, ...args], { stdio: ["ignore", "inherit", "inherit"] });
  const [code] = (await once(child, "exit")) as [number | null];
  if (code !== 0) throw new Error(`${command} ${args[0] ?? ""} failed (exit code ${code})`);
}

/** The binaries of a peer folder when its stamp says this commit and these flags were built and both exist. */
function builtIn(dir: string, commit: string): PeerBinaries | null {
  const server = resolve(dir, "build", "bin", TARGETS[0]);
  const batchedBench = resolve(dir, "build", "bin", TARGETS[1]);
  const stampPath = resolve(dir, "stamp.json");
  const stamp = existsSync(stampPath) ? (JSON.parse(readFileSync(stampPath, "utf8")) as Stamp) : null;
  const built =
    stamp?.commit === commit &&
    stamp.flags.join(" ") === CMAKE_FLAGS.join(" ") &&
    existsSync(server) &&
    existsSync(batchedBench);
  return built
    ? { server, batchedBench, commit, buildSeconds: null, stampedSeconds: stamp.seconds, dir }
    : null;
}

/**
 * Returns the peer binaries from `dir` (default: this checkout's {@link PEER_DIR}, else
 * {@link mainWorktreePeerDir} when built there), building them into `dir` (default {@link PEER_DIR})
 * first unless a stamp says this commit and these flags were built and both binaries exist. The build
 * uses `jobs` parallel compile jobs (default 2).
 * @throws Error when the bundle is missing or a build step fails.
 */
export async function ensurePeerBinaries(
  log: (line: string) => void,
  jobs = 2,
  dir?: string,
): Promise<PeerBinaries> {
  const commit = bundleCommit();
  const candidates =
    dir !== undefined ? [dir] : [PEER_DIR, mainWorktreePeerDir()].filter((entry) => entry !== undefined);
  for (const candidate of candidates) {
    const found = builtIn(candidate, commit);
    if (found) return found;
  }
  const target = dir ?? PEER_DIR;
  const SOURCE = resolve(target, "llama.cpp");
  const BUILD = resolve(target, "build");
  const STAMP = resolve(target, "stamp.json");
  const server = resolve(BUILD, "bin", TARGETS[0]);
  const batchedBench = resolve(BUILD, "bin", TARGETS[1]);
  log(`building llama.cpp ${commit} (${TARGETS.join(", ")}) in ${target}: about 11 minutes on 2 cores`);
  const started = performance.now();
  mkdirSync(target, { recursive: true });
  if (!existsSync(resolve(SOURCE, ".git"))) await run("git", ["clone", "--quiet", BUNDLE, SOURCE], log);
  await run("git", ["-C", SOURCE, "checkout", "--quiet", commit], log);
  await run("cmake", ["-S", SOURCE, "-B", BUILD, ...CMAKE_FLAGS], log);
  await run("cmake", ["--build", BUILD, "--config", "Release", "--target", ...TARGETS, `-j${jobs}`], log);
  const seconds = Math.round((performance.now() - started) / 1000);
  writeFileSync(STAMP, `${JSON.stringify({ commit, flags: CMAKE_FLAGS, seconds } satisfies Stamp)}\n`);
  return { server, batchedBench, commit, buildSeconds: seconds, stampedSeconds: seconds, dir: target };
}

#!/usr/bin/env node
// Builds lmserve's native engine (native/src/*.cpp) into native/build/lmserve_engine.node: compiled with
// g++ against the headers of the exact llama.cpp commit node-llama-cpp ships (its llama/gitRelease.bundle,
// cloned once into native/build/llama.cpp) and linked to node-llama-cpp's prebuilt shared libraries for
// this platform. Runs from `npm ci` (the root project's postinstall) and at first start when the addon is
// missing; does nothing when the addon is up to date. Needs git and a C++17 compiler (g++ or $CXX); with
// cmake it also compiles ggml's CPU backend for this processor (buildCpuBackend; LMSERVE_CPU_BACKEND=prebuilt
// skips it).
// Usage: node scripts/build-native.mjs [--force] [--quiet]
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const buildDir = join(root, "native", "build");
const output = join(buildDir, "lmserve_engine.node");
// Every .cpp of native/src is one translation unit of the addon (engine.cpp, the largest, first).
const sources = readdirSync(join(root, "native", "src"))
  .filter((name) => name.endsWith(".cpp"))
  .sort((a, b) => (a === "engine.cpp" ? -1 : b === "engine.cpp" ? 1 : a.localeCompare(b)))
  .map((name) => join(root, "native", "src", name));
const headers = readdirSync(join(root, "native", "src"))
  .filter((name) => name.endsWith(".h"))
  .map((name) => join(root, "native", "src", name));
const force = process.argv.includes("--force");
const quiet = process.argv.includes("--quiet");

/** Prints one line and exits 1: every failure of this script is a one-line message. */
function fail(message) {
  console.error(`lmserve: native engine build failed: ${message}`);
  process.exit(1);
}

const say = (message) => {
  if (!quiet) console.error(`lmserve: ${message}`);
};

/** The folder holding package `name`, searched as Node's resolver would from `fromDir`, or undefined. */
function packageDir(name, fromDir) {
  const require = createRequire(join(fromDir, "package.json"));
  for (const base of require.resolve.paths(name) ?? []) {
    if (existsSync(join(base, name, "package.json"))) return join(base, name);
  }
  return undefined;
}

/** The folder of node-llama-cpp's prebuilt libraries for this platform (CPU build). */
function prebuiltBinsDir() {
  const nlcDir = packageDir("node-llama-cpp", root);
  if (!nlcDir) fail("node-llama-cpp is not installed (run npm ci first)");
  const platform = `${process.platform}-${process.arch}`;
  const platformDir = packageDir(`@node-llama-cpp/${platform}`, nlcDir);
  if (!platformDir) {
    fail(`node-llama-cpp ships no prebuilt llama.cpp for ${platform} (package @node-llama-cpp/${platform})`);
  }
  const bins = join(platformDir, "bins", platform);
  if (!existsSync(join(bins, "libllama.v0.4.0.so"))) fail(`no libllama.v0.4.0.so in ${bins}`);
  // GPU builds of the same llama.cpp commit, loaded at run time as ggml backend modules when present.
  const gpu = {};
  for (const [name, file] of [
    ["cuda", "libggml-cuda.so"],
    ["vulkan", "libggml-vulkan.so"],
  ]) {
    const dir = packageDir(`@node-llama-cpp/${platform}-${name}`, nlcDir);
    const path = dir && join(dir, "bins", `${platform}-${name}`, file);
    if (path && existsSync(path)) gpu[name] = path;
  }
  return { nlcDir, bins, gpu };
}

/** The compiler to use: $CXX, else g++; a missing one is a one-line error naming the package. */
function compiler() {
  const cxx = process.env.CXX || "g++";
  const probe = spawnSync(cxx, ["--version"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) {
    fail(
      `no C++ compiler found (${cxx}): install one, e.g. on Debian/Ubuntu "apt-get install g++" (or build-essential)`,
    );
  }
  return cxx;
}

/** Clones the llama.cpp bundle once (headers for the build; tools/ sources for later targets). */
function llamaSource(nlcDir) {
  const bundle = join(nlcDir, "llama", "gitRelease.bundle");
  const source = join(buildDir, "llama.cpp");
  if (existsSync(join(source, "include", "llama.h"))) return source;
  if (!existsSync(bundle)) fail(`llama.cpp bundle not found: ${bundle}`);
  say("extracting llama.cpp headers from node-llama-cpp's bundle");
  mkdirSync(buildDir, { recursive: true });
  const result = spawnSync("git", ["clone", "-q", bundle, source], { encoding: "utf8" });
  if (result.error || result.status !== 0) {
    fail(`git clone of ${bundle} failed: ${(result.stderr || String(result.error)).trim().split("\n")[0]}`);
  }
  return source;
}

/**
 * llama.cpp's `mtmd` library (images for vision-language models; not in node-llama-cpp's prebuilt
 * libraries) compiled from the bundle's sources into native/build/mtmd/, once: its objects are kept and
 * reused by later builds (about 150 CPU-seconds the first time).
 * @returns the object files.
 */
async function buildMtmd(cxx, source, flags) {
  const tool = join(source, "tools", "mtmd");
  const vendor = join(source, "vendor");
  const units = [
    ...[
      "mtmd.cpp",
      "mtmd-audio.cpp",
      "mtmd-image.cpp",
      "mtmd-helper.cpp",
      "mtmd-helper-gen.cpp",
      "clip.cpp",
    ].map((name) => join(tool, name)),
    ...readdirSync(join(tool, "models"))
      .filter((name) => name.endsWith(".cpp"))
      .sort()
      .map((name) => join(tool, "models", name)),
    join(vendor, "hash", "hash.cpp"),
    join(vendor, "hash", "xxhash", "xxhash.c"),
    join(vendor, "hash", "sha1", "sha1.c"),
    join(vendor, "hash", "sha256", "sha256.c"),
  ];
  const outDir = join(buildDir, "mtmd");
  mkdirSync(outDir, { recursive: true });
  const objectOf = (path) => join(outDir, `${relative(source, path).replaceAll("/", "_")}.o`);
  const missing = units.filter((path) => !existsSync(objectOf(path)));
  if (missing.length > 0) say(`compiling llama.cpp's mtmd (images): ${missing.length} files, once`);
  const base = flags.filter((flag) => !flag.startsWith("-DNAPI") && flag !== "-fexceptions");
  const include = [`-I${tool}`, `-I${vendor}`, `-I${join(vendor, "hash")}`];
  await pool(
    missing.map((path) => () => {
      const c = path.endsWith(".c") && !path.endsWith("sha1.c");
      const language = c ? ["-x", "c", "-std=c11"] : path.endsWith(".c") ? ["-x", "c++"] : [];
      const args = [...base.filter((flag) => !(c && flag === "-std=c++17")), ...include, "-w", ...language];
      return run(c ? process.env.CC || "gcc" : cxx, [
        ...args,
        "-c",
        path,
        "-o",
        `${objectOf(path)}.tmp`,
      ]).then(() => renameSync(`${objectOf(path)}.tmp`, objectOf(path)));
    }),
    2,
  );
  return units.map(objectOf);
}

/** ggml's x86 instruction-set options (its CMake `GGML_*` switches) by the /proc/cpuinfo flag that enables each. */
const X86_FEATURES = [
  ["sse4_2", "GGML_SSE42"],
  ["avx", "GGML_AVX"],
  ["avx2", "GGML_AVX2"],
  ["bmi2", "GGML_BMI2"],
  ["fma", "GGML_FMA"],
  ["f16c", "GGML_F16C"],
  ["avx_vnni", "GGML_AVX_VNNI"],
  ["avx512f", "GGML_AVX512"],
  ["avx512vbmi", "GGML_AVX512_VBMI"],
  ["avx512_vnni", "GGML_AVX512_VNNI"],
  ["avx512_bf16", "GGML_AVX512_BF16"],
  ["amx_tile", "GGML_AMX_TILE"],
  ["amx_int8", "GGML_AMX_INT8"],
  ["amx_bf16", "GGML_AMX_BF16"],
];

/** This processor's x86 flags as ggml CMake switches (`-DGGML_AVX2=ON`, ...), every one set ON or OFF. */
function x86FeatureOptions() {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const line = cpuinfo.split("\n").find((entry) => entry.startsWith("flags")) ?? "";
  const flags = new Set(line.split(":")[1]?.trim().split(/\s+/) ?? []);
  return X86_FEATURES.map(([flag, option]) => `-D${option}=${flags.has(flag) ? "ON" : "OFF"}`);
}

/**
 * ggml's CPU backend compiled here, once, from the bundle's own sources (the same llama.cpp commit as
 * node-llama-cpp's libraries) for this processor's instruction set, as llama-server is when built from
 * source, into native/build/ggml-cpu/libggml-cpu.so, linked to the prebuilt libggml-base.so. On this
 * project's machines node-llama-cpp's prebuilt CPU variants compute F32 weights at about half the speed
 * of the same source compiled here (BERT-base F32 embeddings: 2.5 against 1.2 ms a token; Q8_0 decode is
 * level); see docs/ARCHITECTURE.md. The library's `ggml_backend_score` checks the instruction set at
 * load, so on a processor without it (a Docker image built elsewhere) the engine takes the prebuilt
 * variants instead. Needs cmake; on Linux x86-64 only. Best effort: without cmake, or when the build
 * fails, says so in one line and returns undefined (the prebuilt variants serve).
 * @returns the library's path, or undefined.
 */
async function buildCpuBackend(source, bins) {
  if (process.platform !== "linux" || process.arch !== "x64") return undefined;
  if (process.env.LMSERVE_CPU_BACKEND === "prebuilt") return undefined;
  const outDir = join(buildDir, "ggml-cpu");
  const library = join(outDir, "libggml-cpu.so");
  const options = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DGGML_BACKEND_DL=ON",
    "-DGGML_NATIVE=OFF",
    // The engine drives ggml's own threadpool (llama_attach_threadpool), as the prebuilt variants do.
    "-DGGML_OPENMP=OFF",
    ...x86FeatureOptions(),
    "-DLLAMA_BUILD_COMMON=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_CURL=OFF",
    "-DGGML_BUILD_TESTS=OFF",
    "-DGGML_BUILD_EXAMPLES=OFF",
  ];
  const stampPath = join(outDir, "stamp.json");
  const inputs = { options, bins: relative(root, bins) };
  const stamp = JSON.stringify(inputs);
  const previous = existsSync(stampPath) ? readFileSync(stampPath, "utf8") : "";
  if (existsSync(library) && previous === stamp) return library;
  // A build that could not be done is not tried again at every start (--force tries again).
  const failedStamp = JSON.stringify({ failed: true, ...inputs });
  if (!force && previous === failedStamp) return undefined;
  const giveUp = (message) => {
    say(`${message}: using node-llama-cpp's prebuilt CPU backend`);
    mkdirSync(outDir, { recursive: true });
    writeFileSync(stampPath, failedStamp);
    return undefined;
  };
  const cmake = spawnSync("cmake", ["--version"], { encoding: "utf8" });
  if (cmake.error || cmake.status !== 0)
    return giveUp(
      "cmake not found (install it, then `npm run build:native`, for ggml's CPU backend built here)",
    );
  const started = performance.now();
  say("compiling ggml's CPU backend for this processor, once (about a minute)");
  const cmakeDir = join(outDir, "cmake");
  try {
    mkdirSync(outDir, { recursive: true });
    await run("cmake", ["-S", source, "-B", cmakeDir, ...options], true);
    await run("cmake", ["--build", cmakeDir, "--target", "ggml-cpu", "-j", "2"], true);
    // CMake links it to the libggml-base.so it built; relink the same objects to the prebuilt one, the
    // copy the engine and llama.cpp already use (one ggml-base in the process).
    const objectDir = join(cmakeDir, "ggml", "src");
    const linkLine = readFileSync(join(objectDir, "CMakeFiles", "ggml-cpu.dir", "link.txt"), "utf8");
    const objects = linkLine
      .split(/\s+/)
      .map((word) => word.replace(/^"|"$/g, ""))
      .filter((word) => word.endsWith(".o"))
      .map((path) => resolve(objectDir, path));
    if (objects.length === 0) throw new Error("no object files in CMake's link line of ggml-cpu");
    await run(process.env.CXX || "g++", [
      "-shared",
      "-o",
      `${library}.tmp`,
      ...objects,
      `-L${bins}`,
      "-l:libggml-base.so",
      "-pthread",
      `-Wl,-rpath,$ORIGIN/${relative(outDir, bins)}`,
    ]);
    renameSync(`${library}.tmp`, library);
  } catch (error) {
    return giveUp(`ggml's CPU backend did not build (${String(error.message).split("\n")[0]})`);
  }
  writeFileSync(stampPath, stamp);
  say(
    `ggml's CPU backend built in ${((performance.now() - started) / 1000).toFixed(1)} s: ${relative(root, library)}`,
  );
  return library;
}

/** Runs the tasks, at most `limit` at a time; rejects with the first failure. */
async function pool(tasks, limit) {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]();
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
}

function newestMtime(paths) {
  return Math.max(...paths.map((path) => statSync(path).mtimeMs));
}

/** Runs `cxx args`, its stdout shown unless `quiet`; rejects with its stderr. */
function run(cxx, args, quiet = false) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cxx, args, { stdio: ["ignore", quiet ? "ignore" : "inherit", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolvePromise();
      else reject(new Error(stderr.trim() || `${cxx} exited with ${code}`));
    });
  });
}

async function main() {
  const { nlcDir, bins, gpu } = prebuiltBinsDir();
  const nodeInclude = join(dirname(dirname(process.execPath)), "include", "node");
  if (!existsSync(join(nodeInclude, "node_api.h"))) fail(`Node.js headers not found in ${nodeInclude}`);
  const addonApi = packageDir("node-addon-api", root);
  if (!addonApi) fail("node-addon-api is not installed (run npm ci first)");
  const stampPath = join(buildDir, "stamp.json");
  // Where the runtime finds the prebuilt backends (src/engine/native.ts reads it), relative to the project.
  const paths = {
    cpuBinsDir: relative(root, bins),
    gpuBackends: Object.fromEntries(Object.entries(gpu).map(([name, path]) => [name, relative(root, path)])),
  };
  const stamp = JSON.stringify({ ...paths, node: process.versions.modules });
  const source = llamaSource(nlcDir);
  const cpuBackend = await buildCpuBackend(source, bins);
  // The CPU backend built here, when there is one (it does not change the addon's build).
  const writePaths = () =>
    writeFileSync(
      join(buildDir, "paths.json"),
      `${JSON.stringify({ ...paths, ...(cpuBackend ? { cpuBackend: relative(root, cpuBackend) } : {}) }, null, 2)}\n`,
    );
  if (
    !force &&
    existsSync(output) &&
    existsSync(stampPath) &&
    readFileSync(stampPath, "utf8") === stamp &&
    statSync(output).mtimeMs >= newestMtime([...sources, ...headers, fileURLToPath(import.meta.url)])
  ) {
    writePaths();
    return;
  }
  const cxx = compiler();
  const started = performance.now();
  say(`building the native engine (${cxx}, llama.cpp from node-llama-cpp ${readPackageVersion(nlcDir)})`);
  const flags = [
    "-O2",
    "-std=c++17",
    "-fPIC",
    "-fexceptions",
    "-fvisibility=hidden",
    "-DNAPI_VERSION=8",
    "-DNAPI_CPP_EXCEPTIONS",
    `-I${nodeInclude}`,
    `-I${addonApi}`,
    `-I${join(source, "include")}`,
    `-I${join(source, "ggml", "include")}`,
  ];
  mkdirSync(buildDir, { recursive: true });
  const objects = sources.map((path) => join(buildDir, `${path.split("/").pop()}.o`));
  try {
    const mtmdObjects = await buildMtmd(cxx, source, flags);
    await pool(
      sources.map(
        (path, index) => () =>
          run(cxx, [
            ...flags,
            `-I${join(source, "tools", "mtmd")}`,
            `-I${join(source, "src")}`,
            "-c",
            path,
            "-o",
            objects[index],
          ]),
      ),
      2,
    );
    objects.push(...mtmdObjects);
    const rpath = `$ORIGIN/${relative(buildDir, bins)}`;
    await run(cxx, [
      "-shared",
      "-o",
      output,
      ...objects,
      `-L${bins}`,
      "-l:libllama.v0.4.0.so",
      "-l:libggml.v0.4.0.so",
      "-l:libggml-base.so",
      "-pthread",
      `-Wl,-rpath,${rpath}`,
    ]);
  } catch (error) {
    fail(String(error.message).split("\n").slice(0, 20).join("\n"));
  }
  writePaths();
  writeFileSync(stampPath, stamp);
  say(
    `native engine built in ${((performance.now() - started) / 1000).toFixed(1)} s: ${relative(root, output)}`,
  );
}

function readPackageVersion(dir) {
  try {
    return JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
  } catch {
    return "?";
  }
}

await main();

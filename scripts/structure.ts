#!/usr/bin/env -S npx tsx
// The layout rules of src/, measured from the import statements (docs/ARCHITECTURE.md, "Layers"):
// import circles, which files import node-llama-cpp or the native addon, loose files at the top of src/,
// base names shared across folders, which folder imports which, and which native files are Node-API
// bindings over pure C++ (from their #include lines). `test/unit/structure.test.ts` holds the rules; run
// this file to see the figures: `npx tsx scripts/structure.ts`.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** One source file's imports: `local` are files of the tree (relative to the root), `external` package names. */
export interface FileImports {
  /** Imported files of the tree, as paths relative to the root with `/` separators. */
  local: string[];
  /** Imported packages and `node:` modules, as written. */
  external: string[];
}

/** Import graph of a source tree: each file (relative path) to what it imports. */
export type ImportGraph = Map<string, FileImports>;

const SOURCE_EXTENSIONS = [".ts", ".mts", ".mjs", ".js"];

/** Every module specifier of `source`: static `import`/`export … from`, side-effect imports, `import("…")`. */
export function moduleSpecifiers(source: string): string[] {
  const withoutComments = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const patterns = [
    /^\s*(?:import|export)\b[^;'"]*?\bfrom\s*["']([^"']+)["']/gm,
    /^\s*import\s*["']([^"']+)["']/gm,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  ];
  return patterns.flatMap((pattern) => [...withoutComments.matchAll(pattern)].map((match) => match[1]!));
}

/** Lists the source files below `dir` (recursively), as absolute paths. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return sourceFiles(path);
      return SOURCE_EXTENSIONS.some((ext) => name.endsWith(ext)) ? [path] : [];
    });
}

/** Builds the import graph of every source file below `dir`, paths relative to `root`. */
export function importGraph(root: string, dir = "src"): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const file of sourceFiles(join(root, dir))) {
    const imports: FileImports = { local: [], external: [] };
    for (const specifier of moduleSpecifiers(readFileSync(file, "utf8"))) {
      if (specifier.startsWith(".")) {
        imports.local.push(
          relative(root, resolve(dirname(file), specifier))
            .split("\\")
            .join("/"),
        );
      } else {
        imports.external.push(specifier);
      }
    }
    graph.set(relative(root, file).split("\\").join("/"), imports);
  }
  return graph;
}

/** The import circles of `graph`: its strongly connected components of more than one file (or a file importing itself). */
export function importCircles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let next = 0;
  const visit = (file: string): void => {
    index.set(file, next);
    low.set(file, next);
    next += 1;
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file)?.local ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file)!.local.includes(file)) circles.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return circles;
}

/** Files outside `src/engine/` that import node-llama-cpp (or one of its packages) or the native addon. */
export function engineLeaks(graph: ImportGraph): string[] {
  return [...graph.entries()]
    .filter(([file]) => !file.startsWith("src/engine/"))
    .filter(
      ([, imports]) =>
        imports.external.some((name) => name === "node-llama-cpp" || name.startsWith("@node-llama-cpp/")) ||
        imports.local.some((path) => path.startsWith("native/") || path.endsWith(".node")),
    )
    .map(([file]) => file);
}

/**
 * The base names (a file's name without its extension, e.g. `chat` for `src/serving/chat.ts`) that files of
 * `graph` in more than one folder share, each to those files sorted; `index` (a folder's entry) is left out.
 * `test/unit/structure.test.ts` allows only the listed same-thing-at-two-layers groups.
 */
export function baseNameCollisions(graph: ImportGraph): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  for (const file of graph.keys()) {
    const name = file.slice(file.lastIndexOf("/") + 1).replace(/\.[^.]+$/, "");
    if (name === "index") continue;
    byName.set(name, [...(byName.get(name) ?? []), file]);
  }
  return new Map(
    [...byName]
      .filter(([, files]) => files.length > 1)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, files]) => [name, files.sort()]),
  );
}

/** The files directly in `src/` (not in a folder). */
export function looseFiles(graph: ImportGraph): string[] {
  return [...graph.keys()].filter((file) => file.split("/").length === 2);
}

/** The folder of `src/` a file belongs to (`src/server/routes/chat.ts` → `server`); a loose file is its own name. */
export function layerOf(file: string): string {
  const parts = file.split("/");
  return parts.length === 2 ? parts[1]!.replace(/\.[^.]+$/, "") : parts[1]!;
}

/** Which layers each layer imports (files of its own layer left out), sorted. */
export function layerImports(graph: ImportGraph): Map<string, string[]> {
  const layers = new Map<string, Set<string>>();
  for (const [file, imports] of graph) {
    const from = layerOf(file);
    const targets = layers.get(from) ?? new Set<string>();
    for (const path of imports.local)
      if (path.startsWith("src/") && layerOf(path) !== from) targets.add(layerOf(path));
    layers.set(from, targets);
  }
  return new Map(
    [...layers].sort(([a], [b]) => a.localeCompare(b)).map(([layer, set]) => [layer, [...set].sort()]),
  );
}

/** The sub-folders ("rooms") of `src/structured/`: the guided-decoding compiler's four parts. */
export const STRUCTURED_ROOMS = ["gbnf", "jsonSchema", "regex", "worker"] as const;

/** The files directly in `src/structured/` (its entry points, not in a room). */
export const STRUCTURED_ENTRY_FILES = ["compile.ts", "errors.ts", "index.ts"] as const;

/** The files of `src/structured/` grouped by room (sub-folder), loose files under `""`, sorted. */
export function structuredRooms(graph: ImportGraph): Map<string, string[]> {
  const rooms = new Map<string, string[]>();
  for (const file of [...graph.keys()].sort()) {
    if (!file.startsWith("src/structured/")) continue;
    const rest = file.slice("src/structured/".length).split("/");
    const room = rest.length === 1 ? "" : rest[0]!;
    rooms.set(room, [...(rooms.get(room) ?? []), rest.slice(rest.length === 1 ? 0 : 1).join("/")]);
  }
  return rooms;
}

/** Files of `src/structured/` that import `src/errors.ts` (the API's errors): the compiler raises its own. */
export function structuredHttpErrors(graph: ImportGraph): string[] {
  return [...graph]
    .filter(
      ([file, imports]) => file.startsWith("src/structured/") && imports.local.includes("src/errors.ts"),
    )
    .map(([file]) => file);
}

/** The Node-API files of `native/src/` (bindings); every other native file is pure C++. */
export const NATIVE_BINDING_FILES = [
  "binding.cpp",
  "binding.h",
  "engine.cpp",
  "projector.cpp",
  "projector.h",
  "testEntryPoints.cpp",
] as const;

/**
 * The files of `<root>/native/src/` (.cpp and .h, sorted) split by whether they reach Node-API: `bindings`
 * include `napi.h` themselves or through a local `#include "…"` (transitively), `pure` never do.
 */
export function nativeLayers(root: string): { bindings: string[]; pure: string[] } {
  const dir = join(root, "native", "src");
  const files = readdirSync(dir)
    .filter((name) => name.endsWith(".cpp") || name.endsWith(".h"))
    .sort();
  const includes = new Map<string, string[]>();
  for (const file of files) {
    const source = readFileSync(join(dir, file), "utf8");
    includes.set(
      file,
      [...source.matchAll(/^\s*#\s*include\s*[<"]([^>"]+)[>"]/gm)].map((match) => match[1] as string),
    );
  }
  const reachesNapi = (file: string, seen = new Set<string>()): boolean => {
    if (seen.has(file)) return false;
    seen.add(file);
    return (includes.get(file) ?? []).some(
      (target) => target === "napi.h" || (includes.has(target) && reachesNapi(target, seen)),
    );
  };
  return {
    bindings: files.filter((file) => reachesNapi(file)),
    pure: files.filter((file) => !reachesNapi(file)),
  };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // Piped into `head`: stop quietly once the reader has gone.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(0);
  });
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  const graph = importGraph(root);
  const circles = importCircles(graph);
  console.log(`${graph.size} files under src/`);
  console.log(`${circles.length} import circles`);
  for (const circle of circles) console.log(`  ${circle.join(" ⇄ ")}`);
  const leaks = engineLeaks(graph);
  console.log(`${leaks.length} files outside src/engine/ importing node-llama-cpp or the addon`);
  for (const file of leaks) console.log(`  ${file}`);
  const loose = looseFiles(graph);
  console.log(`${loose.length} loose files in src/: ${loose.join(", ")}`);
  const collisions = baseNameCollisions(graph);
  console.log(`${collisions.size} base names shared across folders:`);
  for (const [name, files] of collisions) console.log(`  ${name}: ${files.join(", ")}`);
  console.log("structured/ rooms:");
  for (const [room, files] of structuredRooms(graph))
    console.log(`  ${room === "" ? "(entry)" : `${room}/`}: ${files.join(", ")}`);
  const httpErrors = structuredHttpErrors(graph);
  console.log(`${httpErrors.length} files of structured/ importing src/errors.ts`);
  for (const file of httpErrors) console.log(`  ${file}`);
  const native = nativeLayers(root);
  console.log(`native/src: Node-API bindings ${native.bindings.join(", ")}`);
  console.log(`  over pure C++ ${native.pure.join(", ")}`);
  console.log("layer imports:");
  for (const [layer, targets] of layerImports(graph))
    console.log(`  ${layer} -> ${targets.join(", ") || "(none)"}`);
}

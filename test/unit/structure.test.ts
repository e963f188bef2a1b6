import assert from "node:assert/strict";
import { dirname, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
  engineLeaks,
  importCircles,
  importGraph,
  layerImports,
  looseFiles,
  STRUCTURED_ENTRY_FILES,
  STRUCTURED_ROOMS,
  structuredHttpErrors,
  structuredRooms,
} from "../../scripts/structure.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const graph = importGraph(root);

describe("source layout (docs/ARCHITECTURE.md)", () => {
  it("reads the import graph of src/", () => {
    assert.ok(graph.size > 100, `only ${graph.size} files found under src/`);
    assert.ok(graph.get("src/startServer.ts")?.local.includes("src/server/app.ts"));
  });

  it("has no import circles", () => {
    assert.deepEqual(importCircles(graph), []);
  });

  it("imports node-llama-cpp and the native addon only in src/engine/", () => {
    // models/ downloads and reads GGUF files through engine/ggufFiles.ts.
    assert.deepEqual(engineLeaks(graph), []);
    assert.ok(graph.get("src/models/resolveModel.ts")?.local.includes("src/engine/ggufFiles.ts"));
    const addonImports = [...graph]
      .filter(([, imports]) =>
        imports.local.some((path) => path.startsWith("native/") || path.endsWith(".node")),
      )
      .map(([file]) => file);
    assert.deepEqual(addonImports, []);
  });

  it("keeps at most 5 loose files in src/", () => {
    const loose = looseFiles(graph);
    assert.ok(loose.length <= 5, `loose files: ${loose.join(", ")}`);
  });

  it("keeps protocol/ free of our imports, and the lower layers free of the upper ones", () => {
    const layers = layerImports(graph);
    assert.deepEqual(layers.get("protocol"), []);
    // workers/ (the supervisor of the template sandbox's and the constraint compiler's threads) is
    // below chat/ and structured/, and imports nothing of ours.
    assert.deepEqual(layers.get("workers"), []);
    // errors.ts maps the engine's and the compiler's own error classes (engine/errors.ts,
    // structured/errors.ts, which import nothing) to ApiErrors.
    assert.deepEqual(graph.get("src/errors.ts")?.local, ["src/engine/errors.ts", "src/structured/errors.ts"]);
    assert.deepEqual(graph.get("src/engine/errors.ts")?.local, []);
    assert.deepEqual(graph.get("src/structured/errors.ts")?.local, []);
    for (const layer of ["chat", "structured", "engine", "models", "protocol", "workers"]) {
      const upward = (layers.get(layer) ?? []).filter((target) =>
        ["server", "serving", "cli", "config", "startServer"].includes(target),
      );
      assert.deepEqual(upward, [], `${layer} imports ${upward.join(", ")}`);
    }
  });
});

describe("structured/ (issue 30)", () => {
  it("is four rooms (gbnf/, jsonSchema/, regex/, worker/) below its entry files", () => {
    const rooms = structuredRooms(graph);
    assert.deepEqual([...rooms.keys()].filter((room) => room !== "").sort(), [...STRUCTURED_ROOMS]);
    assert.deepEqual(rooms.get(""), [...STRUCTURED_ENTRY_FILES]);
    for (const room of STRUCTURED_ROOMS) assert.ok((rooms.get(room)?.length ?? 0) > 0, `${room}/ is empty`);
  });

  it("raises its own errors: no file of it imports src/errors.ts (ApiError)", () => {
    assert.deepEqual(structuredHttpErrors(graph), []);
  });
});

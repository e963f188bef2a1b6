import assert from "node:assert/strict";
import { dirname, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
  baseNameCollisions,
  engineLeaks,
  importCircles,
  importGraph,
  layerImports,
  looseFiles,
  NATIVE_BINDING_FILES,
  nativeLayers,
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

/**
 * The files allowed to share a base name: each group is one thing at two or three layers. A new module
 * whose name is taken by a different thing elsewhere gets a name of its own instead (e.g. the Anthropic
 * API's `anthropicMessages.ts`, not a second `messages.ts` beside the chat messages).
 */
const SAME_THING_AT_LAYERS: Record<string, string[]> = {
  // An endpoint: its schema (protocol/), its serving (serving/), its route (server/routes/).
  anthropicMessages: [
    "src/protocol/anthropicMessages.ts",
    "src/server/routes/anthropicMessages.ts",
    "src/serving/adapters/anthropicMessages.ts",
  ],
  chat: ["src/protocol/chat.ts", "src/server/routes/chat.ts", "src/serving/chat.ts"],
  completions: [
    "src/protocol/completions.ts",
    "src/server/routes/completions.ts",
    "src/serving/completions.ts",
  ],
  embeddings: ["src/protocol/embeddings.ts", "src/server/routes/embeddings.ts", "src/serving/embeddings.ts"],
  loraAdapters: ["src/protocol/loraAdapters.ts", "src/server/routes/loraAdapters.ts"],
  models: ["src/protocol/models.ts", "src/server/routes/models.ts"],
  openaiResponses: [
    "src/protocol/openaiResponses.ts",
    "src/server/routes/openaiResponses.ts",
    "src/serving/adapters/openaiResponses.ts",
  ],
  rerank: ["src/protocol/rerank.ts", "src/server/routes/rerank.ts", "src/serving/rerank.ts"],
  tokenize: ["src/protocol/tokenize.ts", "src/server/routes/tokenize.ts"],
  // Each layer's own error classes, and errors.ts, which maps them to ApiErrors.
  errors: ["src/engine/errors.ts", "src/errors.ts", "src/structured/errors.ts"],
  // Chat messages: their wire schema (protocol/) and their normalisation for the templates (chat/).
  messages: ["src/chat/messages.ts", "src/protocol/messages.ts"],
  // The dashboard's metrics history: the series (shared/, also run by the UI) and its server-side sampler.
  metricsHistory: ["src/server/metricsHistory.ts", "src/shared/metricsHistory.ts"],
  // Production operations: their configuration (config/) and the hooks that apply them (server/).
  operations: ["src/config/operations.ts", "src/server/operations.ts"],
  // The peers' fields we cannot honour: declared (protocol/) and refused (serving/).
  peerFields: ["src/protocol/peerFields.ts", "src/serving/request/peerFields.ts"],
};

describe("names (issue 30)", () => {
  it("gives no two modules one base name unless they are the same thing at two layers", () => {
    assert.deepEqual(Object.fromEntries(baseNameCollisions(graph)), SAME_THING_AT_LAYERS);
  });

  it("keeps serving/'s endpoint modules at its top and the rest in five rooms", () => {
    const serving = [...graph.keys()].filter((file) => file.startsWith("src/serving/"));
    const rooms = new Set(
      serving
        .map((file) => file.split("/"))
        .filter((parts) => parts.length > 3)
        .map((parts) => parts[2]),
    );
    assert.deepEqual([...rooms].sort(), ["adapters", "guided", "images", "output", "request"]);
    const top = serving.filter((file) => file.split("/").length === 3);
    assert.ok(top.length <= 10, `serving/ top: ${top.join(", ")}`);
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

describe("native/ (issue 30)", () => {
  it("is Node-API bindings over pure C++: only the binding files reach napi.h", () => {
    const { bindings, pure } = nativeLayers(root);
    assert.deepEqual(bindings, [...NATIVE_BINDING_FILES]);
    for (const file of ["context.h", "context.cpp", "step.h", "sampler.h", "constraint.h", "parallel.h"]) {
      assert.ok(pure.includes(file), `${file} is not pure C++`);
    }
  });
});

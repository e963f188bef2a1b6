import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { summariseSkippedBackends } from "../../src/engine/devices.ts";
import { chooseLogFormat, formatLogLine } from "../../src/server/logFormat.ts";

describe("log format", () => {
  it("defaults to pretty on a terminal, JSON elsewhere; --log-format wins", () => {
    assert.equal(chooseLogFormat(undefined, true), "pretty");
    assert.equal(chooseLogFormat(undefined, undefined), "json");
    assert.equal(chooseLogFormat("json", true), "json");
  });

  it("writes the listening and model lines as sentences, other fields as key=value", () => {
    const time = Date.UTC(2026, 0, 1, 12, 34, 56);
    assert.equal(
      formatLogLine(
        JSON.stringify({
          level: 30,
          time,
          service: "lmserve",
          url: "http://127.0.0.1:8000",
          ui: "http://127.0.0.1:8000/",
          msg: "listening",
        }),
      ),
      "12:34:56 INFO  listening on http://127.0.0.1:8000 (API at http://127.0.0.1:8000/v1, UI at /)",
    );
    const loaded = formatLogLine(
      JSON.stringify({
        level: 30,
        time,
        model: "m",
        path: "/m.gguf",
        contextSize: 2048,
        slots: 4,
        backend: "CPU",
        offloadedLayers: "0/6",
        gpu: "none found (CUDA runtime not installed)",
        threads: 1,
        msg: "model loaded",
      }),
    );
    assert.equal(
      loaded,
      "12:34:56 INFO  model loaded: m (2048-token context, 4 slots, CPU, GPU: none found (CUDA runtime not installed)) from /m.gguf threads=1",
    );
    assert.equal(formatLogLine("not json"), "not json");
  });

  it("summarises absent GPU backends in one phrase", () => {
    assert.equal(
      summariseSkippedBackends([
        {
          backend: "CUDA",
          reason:
            "load_backend: failed to load x.so: libcublas.so.13: cannot open shared object file: No such file or directory",
        },
        { backend: "Vulkan", reason: "libvulkan.so.1: cannot open shared object file" },
      ]),
      "none found (CUDA runtime not installed, Vulkan loader not installed)",
    );
    assert.equal(summariseSkippedBackends([]), undefined);
  });
});

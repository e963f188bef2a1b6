import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatBytes, formatExpiry, residencyRows } from "../../../ui/src/modelResidency.ts";

describe("the dashboard's model residency table", () => {
  const now = Date.parse("2026-12-04T12:00:00Z");

  it("writes sizes in binary units", () => {
    assert.equal(formatBytes(512), "512 B");
    assert.equal(formatBytes(1536), "1.50 KiB");
    assert.equal(formatBytes(3.5 * 1024 ** 2), "3.50 MiB");
    assert.equal(formatBytes(12.25 * 1024 ** 3), "12.3 GiB");
    assert.equal(formatBytes(undefined), "–");
    assert.equal(formatBytes(Number.NaN), "–");
  });

  it("says when an idle model unloads, relative to now", () => {
    assert.equal(formatExpiry(null, now), "never");
    assert.equal(formatExpiry(undefined, now), "–");
    assert.equal(formatExpiry("2026-12-04T12:00:42Z", now), "in 42 s");
    assert.equal(formatExpiry("2026-12-04T12:04:10Z", now), "in 4 min 10 s");
    assert.equal(formatExpiry("2026-12-04T14:30:00Z", now), "in 2 h 30 min");
    assert.equal(formatExpiry("2026-12-04T11:59:00Z", now), "now");
    assert.equal(formatExpiry("not a time", now), "–");
  });

  it("reads every state of /v1/models' status, adapters with their base", () => {
    const rows = residencyRows(
      [
        {
          id: "qwen",
          status: {
            value: "loaded",
            memory_bytes: 2 * 1024 ** 3,
            in_flight: 3,
            expires_at: "2026-12-04T12:05:00Z",
          },
        },
        { id: "kept", status: { value: "loaded", memory_bytes: 1024, in_flight: 0, expires_at: null } },
        { id: "llama", status: { value: "unloaded" } },
        { id: "broken", status: { value: "failed", reason: "not a GGUF file" } },
        { id: "sql-lora", parent: "qwen", status: { value: "loaded", in_flight: 1 } },
        { id: "plain" },
      ],
      now,
    );
    assert.deepEqual(rows, [
      {
        id: "qwen",
        state: "loaded",
        memory: "2.00 GiB",
        inFlight: "3",
        expires: "in 5 min 0 s",
        parent: undefined,
      },
      { id: "kept", state: "loaded", memory: "1.00 KiB", inFlight: "0", expires: "never", parent: undefined },
      { id: "llama", state: "unloaded", memory: "–", inFlight: "–", expires: "–", parent: undefined },
      {
        id: "broken",
        state: "failed: not a GGUF file",
        memory: "–",
        inFlight: "–",
        expires: "–",
        parent: undefined,
      },
      { id: "sql-lora", state: "loaded", memory: "–", inFlight: "1", expires: "–", parent: "qwen" },
      { id: "plain", state: "–", memory: "–", inFlight: "–", expires: "–", parent: undefined },
    ]);
  });
});

/**
 * Small wrong answers of issue 31, on a real server: each error names the field the client sent, in
 * the spelling it sent it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

describe("errors name the client's spelling", () => {
  const server = useTestServer([], { exitCode: 0 });

  it("a bad whitespace pattern names the field it came in", async () => {
    const spellings: [string, Record<string, unknown>][] = [
      ["guided_whitespace_pattern", { guided_whitespace_pattern: "x+" }],
      ["nvext.guided_whitespace_pattern", { nvext: { guided_whitespace_pattern: "x+" } }],
      ["structured_outputs.whitespace_pattern", { structured_outputs: { whitespace_pattern: "x+" } }],
    ];
    for (const [param, fields] of spellings) {
      for (const path of ["/v1/completions", "/v1/chat/completions"]) {
        const response = await server.post(path, {
          model: TEST_MODEL,
          ...(path === "/v1/completions"
            ? { prompt: "Hi" }
            : { messages: [{ role: "user", content: "Hi" }] }),
          max_tokens: 2,
          guided_json: { type: "object" },
          ...fields,
        });
        const text = await response.text();
        assert.equal(response.status, 400, `${path} ${param}: ${text}`);
        const error = (JSON.parse(text) as { error: { param: string; message: string } }).error;
        assert.equal(error.param, param, text);
        assert.match(error.message, new RegExp(`^${param.replace(".", "\\.")} `), text);
      }
    }
  });
});

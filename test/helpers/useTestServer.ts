import assert from "node:assert/strict";
import { after, before } from "node:test";
import { startTestServer, type TestServer } from "./testServer.ts";

/** Options of {@link useTestServer}. */
export type UseTestServerOptions = {
  /** Assert this exit code when the server stops in `after`. Defaults to none (any exit is accepted). */
  exitCode?: number;
  /** How long the server may take to listen, in milliseconds. Defaults to startTestServer's 60 s. */
  timeoutMs?: number;
};

/**
 * The one set-up of the end-to-end files: starts a real server for the enclosing `describe` (or file) in
 * its `before` hook and stops it in `after`. Inside a `describe`, hooks run in the order they are
 * registered, so a `before` written after this call sees the server started (and an `after` written
 * before it runs before the server stops). At the top level of a file, Node 20 runs the `before` hooks
 * side by side: there, use no other hook, or move the set-up into a `describe`.
 * @param args startTestServer's arguments, or a function returning them when the hook runs (for paths
 *   an earlier `before` hook creates). Defaults to none: stories260K with the default flags.
 * @returns a TestServer whose members read the started server.
 * @throws (from a member) when used before the hook ran, i.e. outside a test or a later hook.
 */
export function useTestServer(
  args: readonly string[] | (() => string[]) = [],
  options: UseTestServerOptions = {},
): TestServer {
  let started: TestServer | undefined;
  before(async () => {
    started = await startTestServer(typeof args === "function" ? args() : [...args], options.timeoutMs);
  });
  after(async () => {
    if (!started) return;
    const code = await started.stop();
    if (options.exitCode !== undefined) assert.equal(code, options.exitCode, "the server's exit code");
  });
  const server = (): TestServer => {
    if (!started)
      throw new Error("useTestServer: the server starts in `before`; use it in a test or a later hook");
    return started;
  };
  return {
    get url() {
      return server().url;
    },
    get client() {
      return server().client;
    },
    get logs() {
      return server().logs;
    },
    get process() {
      return server().process;
    },
    stderr: () => server().stderr(),
    post: (path, body, headers) => server().post(path, body, headers),
    stop: () => server().stop(),
  };
}

#!/usr/bin/env node
// The image's HEALTHCHECK: GET /v1/health/ready on the port the server was started with, read from the
// server's arguments (/proc/1/cmdline: `--port N` or `--port=N`), else LMSERVE_PORT, else 8000. Exit 0: ready.
import { readFileSync } from "node:fs";

/** The port given to the server process (pid 1 in the container). Defaults to LMSERVE_PORT, then 8000. */
function serverPort() {
  try {
    const args = readFileSync("/proc/1/cmdline", "utf8").split("\0");
    for (const [index, arg] of args.entries()) {
      if (arg === "--port" && args[index + 1]) return args[index + 1];
      if (arg.startsWith("--port=")) return arg.slice("--port=".length);
    }
  } catch {}
  return process.env.LMSERVE_PORT ?? "8000";
}

fetch(`http://127.0.0.1:${serverPort()}/v1/health/ready`, { signal: AbortSignal.timeout(2500) }).then(
  (response) => process.exit(response.ok ? 0 : 1),
  () => process.exit(1),
);

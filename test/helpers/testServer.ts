import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import OpenAI from "openai";
import { defaultModelPath, projectRoot } from "../../src/paths.ts";
import { sseData } from "../../ui/src/sse.ts";

/** A real `lmserve serve` process on a free loopback port, for end-to-end tests. */
export type TestServer = {
  /** `http://127.0.0.1:PORT` */
  url: string;
  /** An official OpenAI client pointed at the server. */
  client: OpenAI;
  /** Every JSON log line the server has printed so far. */
  logs: Record<string, unknown>[];
  process: ChildProcess;
  /** Everything the server has written to stderr so far. */
  stderr(): string;
  /** POSTs JSON (or a raw string body) and returns the fetch Response. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  /** Stops the server (SIGTERM) and waits for it to exit; returns its exit code. */
  stop(): Promise<number | null>;
};

/** The test model, stories260K, served as `stories260K`. */
export const TEST_MODEL = "stories260K";

/**
 * Starts `node bin/lmserve.js serve` on port 0 with the given extra arguments (default model:
 * ../shared/models/stories260K.gguf, unless `args` start with a model or hold `--config` or `--model`) and resolves
 * once it listens.
 * @throws when the process exits before listening, or does not listen within `timeoutMs`.
 */
export async function startTestServer(args: string[] = [], timeoutMs = 60_000): Promise<TestServer> {
  // A config file (`--config`) names its own models; so do `--model` / `-m`.
  const hasModel =
    (args.length > 0 && !args[0]?.startsWith("-")) ||
    ["--config", "--model", "-m"].some((flag) => args.includes(flag));
  const child = spawn(
    process.execPath,
    [
      resolve(projectRoot, "bin/lmserve.js"),
      "serve",
      ...(hasModel ? [] : [defaultModelPath]),
      ...args,
      "--port",
      "0",
    ],
    { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] },
  );
  const logs: Record<string, unknown>[] = [];
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const url = await new Promise<string>((resolvePromise, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server did not start in ${timeoutMs} ms: ${stderr}`)),
      timeoutMs,
    );
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening: ${stderr}`));
    });
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        logs.push(entry);
        if (entry.msg === "listening" && typeof entry.url === "string") {
          clearTimeout(timer);
          resolvePromise(entry.url);
        }
      } catch {
        // not a log line
      }
    });
  });
  child.removeAllListeners("exit");
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "test-key", maxRetries: 0 });
  return {
    url,
    client,
    logs,
    process: child,
    stderr: () => stderr,
    post: (path, body, headers = {}) =>
      fetch(`${url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    stop: async () => {
      if (child.exitCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const [code] = (await once(child, "exit")) as [number | null];
      return code;
    },
  };
}

/**
 * Reads an SSE response into its `data:` payloads (JSON-parsed, `[DONE]` kept as the string), with the
 * web UI's event-stream parser (`ui/src/sse.ts`).
 */
export async function readSse(response: Response): Promise<unknown[]> {
  const events: unknown[] = [];
  for await (const data of sseData(response.body as ReadableStream<Uint8Array>)) {
    events.push(data === "[DONE]" ? data : JSON.parse(data));
  }
  return events;
}

/**
 * The server's one log line for request `reqId` (`msg: "request completed"`), once written: it comes
 * when the response has ended, possibly just after the client has read it.
 * @throws when no such line appears within `attempts` x 10 ms.
 */
export async function waitForRequestLog(
  server: TestServer,
  reqId: string,
  attempts = 300,
): Promise<Record<string, unknown>> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const line = server.logs.find((entry) => entry.reqId === reqId && entry.msg === "request completed");
    if (line) return line;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no request log line for ${reqId}`);
}

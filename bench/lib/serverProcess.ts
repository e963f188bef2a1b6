/**
 * Shared by the benchmarks' server wrappers (`serverTarget.ts`, `structuredServer.ts`, `peerServer.ts`):
 * waiting for a spawned `lmserve serve ... --port 0` to listen, and stopping a server process.
 */
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";

/**
 * Resolves with the server's URL (from its `listening` JSON log line on stdout) and the id of the first
 * model `/v1/models` lists.
 * @param stderr the tail of the process's stderr so far, for error messages.
 * @throws Error when the process exits first, does not listen within `timeoutMs`, or lists no model.
 */
export async function awaitListening(
  child: ChildProcess,
  stderr: () => string,
  timeoutMs: number,
): Promise<{ url: string; modelId: string }> {
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server not listening in ${timeoutMs} ms: ${stderr()}`)),
      timeoutMs,
    );
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening: ${stderr().trim()}`));
    });
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      try {
        const entry = JSON.parse(line) as { msg?: unknown; url?: unknown };
        if (entry.msg === "listening" && typeof entry.url === "string") {
          clearTimeout(timer);
          resolveUrl(entry.url);
        }
      } catch {
        // not a JSON log line
      }
    });
  });
  child.removeAllListeners("exit");
  const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
  const modelId = models.data[0]?.id;
  if (!modelId) throw new Error("the server lists no model");
  return { url, modelId };
}

/** Stops a server process (SIGTERM, SIGKILL after 30 s) and waits for it to exit; no-op when it has. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  await exited;
  clearTimeout(timer);
}

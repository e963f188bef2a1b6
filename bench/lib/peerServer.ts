/**
 * The two servers of `bench/peer.ts` behind one shape: lmserve (started through {@link ServerTarget})
 * and llama.cpp's `llama-server` (spawned directly, ready when `GET /health` answers 200), plus the
 * resident memory of a server process and one `llama-batched-bench` run.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { runProcess } from "../../test/helpers/runProcess.ts";
import { stopProcess } from "./serverProcess.ts";
import { ServerTarget } from "./serverTarget.ts";

/** Which server. */
export type PeerName = "lmserve" | "llama-server";

/** A running server under test. */
export type PeerServer = {
  name: PeerName;
  /** `http://127.0.0.1:PORT` */
  url: string;
  /** The model id to put in requests. */
  modelId: string;
  /** The server process itself (no wrapper in between). */
  pid: number;
  /** The exact command line. */
  command: string[];
  stop: () => Promise<void>;
};

/**
 * Starts `node bin/lmserve.js serve MODEL FLAGS --port 0` (no batch probe), with environment `env`
 * (default: this process's).
 * @throws Error when it exits or does not listen within 300 s.
 */
export async function startLmserve(
  modelPath: string,
  flags: string[],
  env?: NodeJS.ProcessEnv,
): Promise<PeerServer> {
  const target = await ServerTarget.start({ modelPath, flags, probe: false, ...(env ? { env } : {}) });
  return {
    name: "lmserve",
    url: target.url,
    modelId: target.modelId,
    pid: target.pid,
    command: target.command,
    stop: () => target.stop(),
  };
}

/** A free TCP port on 127.0.0.1 (bound, then released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  server.close();
  await once(server, "close");
  return port;
}

/**
 * Spawns `command` and polls `ready` every 250 ms until it gives a value; resolves with the process and
 * that value. The tail of the process's output goes into the errors.
 * @throws Error when the process exits first or `ready` gives nothing within `timeoutMs` (it is stopped).
 */
export async function spawnUntilReady<T>(
  command: readonly string[],
  ready: () => Promise<T | undefined>,
  timeoutMs: number,
): Promise<{ child: ChildProcess; value: T }> {
  const child = spawn(command[0] as string, command.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (bytes: Buffer) => {
    output = `${output}${bytes.toString()}`.slice(-4000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${command[0]} exited with ${child.exitCode ?? child.signalCode}: ${output.trim()}`);
    const value = await ready();
    if (value !== undefined) return { child, value };
    if (performance.now() > deadline) {
      await stopProcess(child);
      throw new Error(`${command[0]} not ready in ${timeoutMs} ms: ${output.trim()}`);
    }
    await new Promise((wake) => setTimeout(wake, 250));
  }
}

/**
 * Starts `llama-server -m MODEL --host 127.0.0.1 --port P ARGS` on a free port and resolves once
 * `/health` answers 200 (it answers 503 while the model loads).
 * @throws Error when it exits first or is not ready within `timeoutMs` (default 300 s).
 */
export async function startLlamaServer(
  binary: string,
  modelPath: string,
  args: string[],
  timeoutMs = 300_000,
): Promise<PeerServer> {
  const port = await freePort();
  const command = [binary, "-m", modelPath, "--host", "127.0.0.1", "--port", String(port), ...args];
  const url = `http://127.0.0.1:${port}`;
  const healthy = async () =>
    (await fetch(`${url}/health`).then(
      (response) => response.status === 200,
      () => false,
    ))
      ? true
      : undefined;
  const { child } = await spawnUntilReady(command, healthy, timeoutMs);
  const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
  return {
    name: "llama-server",
    url,
    modelId: models.data[0]?.id ?? "model",
    pid: child.pid ?? 0,
    command,
    stop: () => stopProcess(child),
  };
}

/**
 * Resident memory of process `pid` in MiB, from `/proc/PID/status`: `rss` (`VmRSS`), its anonymous
 * part `anon` (`RssAnon`: heaps, KV cache, compute buffers) and its file-backed part `file` (`RssFile`:
 * code, shared libraries, the memory-mapped model's touched pages); NaN off Linux.
 */
export function residentBreakdown(pid: number): { rss: number; anon: number; file: number } {
  let status = "";
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    // not Linux, or the process has gone
  }
  const field = (name: string) => {
    const match = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status);
    return match ? Number(match[1]) / 1024 : Number.NaN;
  };
  return { rss: field("VmRSS"), anon: field("RssAnon"), file: field("RssFile") };
}

/** Resident set size of process `pid` in MiB (`VmRSS` of `/proc/PID/status`); NaN off Linux. */
export function residentMiB(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** One row of `llama-batched-bench --output-format jsonl`. */
export type BatchedBenchRow = { pp: number; tg: number; pl: number; speed_pp: number; speed_tg: number };

/**
 * Runs `llama-batched-bench -m MODEL ARGS --output-format jsonl` and returns its rows.
 * @throws Error when it fails or prints no row.
 */
export async function runBatchedBench(
  binary: string,
  modelPath: string,
  args: string[],
): Promise<{ rows: BatchedBenchRow[]; command: string[] }> {
  const command = [binary, "-m", modelPath, ...args, "--output-format", "jsonl"];
  const { status: code, stdout, stderr } = await runProcess(command[0] as string, command.slice(1));
  const output = `${stdout}\n${stderr}`;
  const rows = output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as BatchedBenchRow);
  if (code !== 0 || rows.length === 0)
    throw new Error(`llama-batched-bench failed (exit code ${code}): ${output.slice(-2000).trim()}`);
  return { rows, command };
}

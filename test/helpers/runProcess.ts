import { type SpawnOptions, spawn } from "node:child_process";
import { once } from "node:events";
import { projectRoot } from "../../src/paths.ts";

/** What a finished process printed, and its exit status (null when a signal ended it). */
export type ProcessOutput = { status: number | null; stdout: string; stderr: string };

/**
 * Runs `command args` to completion asynchronously (so servers living in the test process keep
 * answering it), in the project root unless `options.cwd` says otherwise, collecting its output.
 */
export async function runProcess(
  command: string,
  args: readonly string[],
  options: Omit<SpawnOptions, "stdio"> = {},
): Promise<ProcessOutput> {
  const child = spawn(command, args, { cwd: projectRoot, ...options, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [status] = (await once(child, "close")) as [number | null];
  return { status, stdout, stderr };
}

/**
 * How busy the machine is, from Linux's `/proc/stat` and `/proc/PID/stat`, so a benchmark on a shared
 * machine can wait for a quiet moment and say how much CPU other processes took while it measured.
 * Two llama.cpp processes of 2 threads each on 2 cores slow each other down by 10x or more (their
 * threads spin-wait for each other), so this matters more than the load average suggests.
 * Elsewhere than Linux every reading is null and nothing waits.
 */
import { readFileSync } from "node:fs";

/** CPU use over a window, in percent of all cores (100 = every core busy all the time). */
export type CpuShare = {
  /** All processes. */
  machine: number;
  /** The given processes (the benchmark's own). */
  ours: number;
  /** The rest: other users' work during the window. */
  others: number;
};

type Snapshot = { busy: number; total: number; ours: number };

/** Busy and total jiffies of all cores together, or null without `/proc/stat`. */
function machineJiffies(): { busy: number; total: number } | null {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0] ?? "";
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((sum, value) => sum + value, 0);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/** User + system jiffies of one process (all its threads), 0 when it is gone. */
function processJiffies(pid: number): number {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return 0;
  }
}

function snapshot(pids: readonly number[]): Snapshot | null {
  const machine = machineJiffies();
  if (!machine) return null;
  return { ...machine, ours: pids.reduce((sum, pid) => sum + processJiffies(pid), 0) };
}

/**
 * Starts a measuring window over the processes `pids`; call the returned function to end it.
 * The result is null where `/proc` is not available.
 */
export function cpuWindow(pids: readonly number[]): () => CpuShare | null {
  const start = snapshot(pids);
  return () => {
    const end = snapshot(pids);
    if (!start || !end || end.total <= start.total) return null;
    const total = end.total - start.total;
    const machine = (100 * (end.busy - start.busy)) / total;
    // Process jiffies are per core; the machine's total counts every core.
    const ours = Math.min(machine, (100 * (end.ours - start.ours)) / total);
    return { machine, ours, others: Math.max(0, machine - ours) };
  };
}

/**
 * Waits until other processes use less than `thresholdPercent` of the machine over a 2-second sample,
 * for at most `maxWaitMs`; `onWait` is told the busy share each time it waits.
 * @returns the last sample's share taken by others (null without `/proc`).
 */
export async function waitForQuiet(
  pids: readonly number[],
  maxWaitMs: number,
  thresholdPercent: number,
  onWait: (othersPercent: number) => void,
): Promise<number | null> {
  const deadline = Date.now() + maxWaitMs;
  while (true) {
    const end = cpuWindow(pids);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const share = end();
    if (!share) return null;
    if (share.others < thresholdPercent || Date.now() >= deadline) return share.others;
    onWait(share.others);
    await new Promise((resolve) => setTimeout(resolve, 3000));
  }
}

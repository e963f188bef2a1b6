/**
 * `npm run bench:rss` (issue 29): the server's resident memory after warm-up, with the TypeScript sources
 * run through tsx (`LMSERVE_FROM_SOURCE=1`) against the compiled build (`dist/`, what `npm start`, the
 * `lmserve` command and the Docker image run), in one run: each server starts alone (`serve MODEL
 * --max-num-seqs 8 --max-model-len 1280 --threads 2`, the slots and context of `bench/peer.ts`), answers
 * the warm-up requests of `bench/peer.ts` (a short streamed completion and a short streamed chat request)
 * `--requests` times, and its `VmRSS`, `RssAnon` and `RssFile` (`/proc/PID/status`) are read once it
 * listens and after the warm-up. An idle `node` process is measured beside them (the runtime's own share).
 * Rounds alternate the order (ABBA); figures are medians over rounds.
 *
 * Usage:
 *   npx tsx bench/rss.ts [--model FILE] [--rounds N] [--requests N] [--lmserve-args "..."] [--help]
 *
 * Builds `dist/` first (`scripts/build-server.mjs`). Prints the table and ratios (compiled / sources).
 * Exit code 0 on success, 1 on a failure. Linux only (`/proc`).
 */
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { defaultModelPath, projectRoot } from "../src/paths.ts";
import { streamRequest } from "./lib/peerClient.ts";
import { residentBreakdown, startLmserve } from "./lib/peerServer.ts";

/** How the server runs: the TypeScript sources through tsx, or the compiled build. */
type Variant = "sources (tsx)" | "compiled (dist/)";
const VARIANTS: Record<Variant, string> = { "sources (tsx)": "1", "compiled (dist/)": "0" };

/** Resident memory in MiB (see {@link residentBreakdown}). */
type Resident = { rss: number; anon: number; file: number };

/** One variant's figures in one round. */
type Sample = { variant: Variant; listening: Resident; warm: Resident };

const USAGE = `Usage: npx tsx bench/rss.ts [--model FILE] [--rounds N] [--requests N] [--lmserve-args "..."]
  --model FILE          GGUF model (default ../shared/models/stories260K.gguf)
  --rounds N            rounds, alternating the order (default 2)
  --requests N          warm-up pairs (completion + chat) per server (default 3)
  --lmserve-args "..."  serve flags (default "--max-num-seqs 8 --max-model-len 1280 --threads 2")`;

/** Median of `values` (NaN when empty). */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Resident memory of an idle `node` process (the runtime alone), in MiB. */
async function idleNode(): Promise<Resident> {
  const child = spawn(process.execPath, ["-e", "console.log('up'); setInterval(() => {}, 1e6)"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await once(child.stdout, "data");
  const resident = residentBreakdown(child.pid ?? 0);
  child.kill("SIGTERM");
  await once(child, "exit");
  return resident;
}

/** Starts one server, warms it with `requests` completion + chat pairs, and reads its memory. */
async function measure(variant: Variant, modelPath: string, flags: string[], requests: number) {
  const server = await startLmserve(modelPath, flags, {
    ...process.env,
    LMSERVE_FROM_SOURCE: VARIANTS[variant],
  });
  try {
    // The compiler worker starts in the background once the server listens (startServer.ts): let it.
    await new Promise((wake) => setTimeout(wake, 2000));
    const listening = residentBreakdown(server.pid);
    const base = { max_tokens: 8, temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05 };
    for (let index = 0; index < requests; index++) {
      await streamRequest(server, "completions", { prompt: "Once upon a time", ...base });
      await streamRequest(server, "chat", { messages: [{ role: "user", content: "Hello" }], ...base });
    }
    return { variant, listening, warm: residentBreakdown(server.pid) };
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      rounds: { type: "string", default: "2" },
      requests: { type: "string", default: "3" },
      "lmserve-args": { type: "string" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const modelPath = values.model ? resolve(values.model) : defaultModelPath;
  const rounds = Number(values.rounds);
  const requests = Number(values.requests);
  if (!Number.isInteger(rounds) || rounds < 1 || !Number.isInteger(requests) || requests < 1)
    throw new Error("--rounds and --requests take positive integers");
  const flags = (values["lmserve-args"] ?? "--max-num-seqs 8 --max-model-len 1280 --threads 2")
    .split(/\s+/)
    .filter(Boolean);

  console.log("building dist/ (scripts/build-server.mjs)");
  const build = spawnSync(process.execPath, [resolve(projectRoot, "scripts/build-server.mjs")], {
    stdio: "inherit",
  });
  if (build.status !== 0) throw new Error("the build failed");

  const samples: Sample[] = [];
  const node: Resident[] = [];
  for (let round = 1; round <= rounds; round++) {
    node.push(await idleNode());
    const order = Object.keys(VARIANTS) as Variant[];
    if (round % 2 === 0) order.reverse();
    for (const variant of order) {
      const sample = await measure(variant, modelPath, flags, requests);
      samples.push(sample);
      console.log(
        `round ${round}: ${variant}: RSS ${sample.warm.rss.toFixed(1)} MiB after warm-up (anon ${sample.warm.anon.toFixed(1)}, file ${sample.warm.file.toFixed(1)})`,
      );
    }
  }

  const pick = (variant: Variant, at: "listening" | "warm", key: keyof Resident) =>
    median(samples.filter((sample) => sample.variant === variant).map((sample) => sample[at][key]));
  const mib = (value: number) => value.toFixed(1);
  console.log(
    `\nLMSERVE_FROM_SOURCE=1|0 node bin/lmserve.js serve ${relative(projectRoot, modelPath)} ${flags.join(" ")} --port 0; ${rounds} round(s), ${requests} warm-up pair(s); medians, MiB (VmRSS = RssAnon + RssFile + RssShmem)`,
  );
  console.log("| process | RSS listening | RSS after warm-up | anon | file |");
  console.log("|---|---|---|---|---|");
  console.log(
    `| idle node ${process.version} | ${mib(median(node.map((entry) => entry.rss)))} | | ${mib(median(node.map((entry) => entry.anon)))} | ${mib(median(node.map((entry) => entry.file)))} |`,
  );
  for (const variant of Object.keys(VARIANTS) as Variant[])
    console.log(
      `| ${variant} | ${mib(pick(variant, "listening", "rss"))} | ${mib(pick(variant, "warm", "rss"))} | ${mib(pick(variant, "warm", "anon"))} | ${mib(pick(variant, "warm", "file"))} |`,
    );
  const ratio = (key: keyof Resident, at: "listening" | "warm" = "warm") =>
    (pick("compiled (dist/)", at, key) / pick("sources (tsx)", at, key)).toFixed(3);
  const saved = pick("sources (tsx)", "warm", "rss") - pick("compiled (dist/)", "warm", "rss");
  console.log(
    `compiled / sources: RSS after warm-up ${ratio("rss")}x (${mib(saved)} MiB less), listening ${ratio("rss", "listening")}x, anon ${ratio("anon")}x, file ${ratio("file")}x`,
  );
}

main().catch((error: unknown) => {
  console.error(`bench/rss: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});

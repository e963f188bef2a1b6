/**
 * CLI: cold load to first token, lmserve's `--models-dir` against llama-server's router mode
 * (`llama-server --models-dir`, which spawns one llama-server per model) on the same GGUF, in one run.
 *
 * Each server runs alone, in router mode over a directory holding only the model. A cycle is: a
 * one-token completion naming the unloaded model (the autoload, the prefill and one token: "cold"),
 * the same request again ("warm"), then `POST /models/unload` and a wait until the server lists the
 * model as unloaded. `--rounds` rounds alternate which server goes first; each runs `--cycles` cycles.
 * Prints the medians, the ratios lmserve / llama-server, and the load itself (cold - warm). The file
 * stays in the page cache after the first load for both servers: this measures the servers' own load
 * path (mapping, context and KV cache, warm-up, a router's process spawn), not the disk.
 *
 * Usage: npx tsx bench/coldLoad.ts [--model FILE] [--rounds 2] [--cycles 3] [--threads 2] [--ctx 2048]
 *   (default model: bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf, made if missing; llama-server from
 *   bench/.peer, built if missing: about 11 minutes on 2 cores)
 */
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { projectRoot } from "../src/paths.ts";
import { ensurePeerBinaries } from "./lib/peerBuild.ts";
import { freePort, spawnUntilReady } from "./lib/peerServer.ts";
import { cpuFacts, DEFAULT_MODEL, ensureModel, gitRevision, loadFacts } from "./lib/runInfo.ts";
import { stopProcess } from "./lib/serverProcess.ts";
import { quantile } from "./lib/stats.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: DEFAULT_MODEL },
    rounds: { type: "string", default: "2" },
    cycles: { type: "string", default: "3" },
    threads: { type: "string", default: "2" },
    ctx: { type: "string", default: "2048" },
  },
});
const rounds = Number(values.rounds);
const cycles = Number(values.cycles);
const log = (line: string) => process.stderr.write(`${line}\n`);

type Server = { url: string; modelId: string; stop: () => Promise<void> };
type Cycle = { coldMs: number; warmMs: number };
type Kind = "lmserve" | "llama-server";

/** Spawns the router `command` on `port`; resolves once its `GET /models` lists the model of `modelFile`. */
async function startRouter(command: string[], port: number, modelFile: string): Promise<Server> {
  const url = `http://127.0.0.1:${port}`;
  const stem = basename(modelFile).replace(/\.gguf$/, "");
  const listed = async () => {
    const models = await fetch(`${url}/models`).then(
      async (response) => (response.ok ? ((await response.json()) as { data: { id: string }[] }).data : []),
      () => [],
    );
    return models.find((model) => model.id === stem || model.id.includes(stem))?.id;
  };
  const { child, value: modelId } = await spawnUntilReady(command, listed, 300_000);
  return { url, modelId, stop: () => stopProcess(child) };
}

/** The milliseconds of one non-streamed one-token completion of `model`. */
async function oneToken(server: Server): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: server.modelId,
      prompt: "Once upon a time",
      max_tokens: 1,
      temperature: 0,
    }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`completion: ${response.status} ${text}`);
  return performance.now() - started;
}

/** Unloads the model and waits until `/models` says it is unloaded. */
async function unload(server: Server): Promise<void> {
  const response = await fetch(`${server.url}/models/unload`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: server.modelId }),
  });
  if (!response.ok) throw new Error(`unload: ${response.status} ${await response.text()}`);
  const deadline = performance.now() + 60_000;
  for (;;) {
    const listed = (await (await fetch(`${server.url}/models`)).json()) as {
      data: { id: string; status?: { value?: string } }[];
    };
    const state = listed.data.find((model) => model.id === server.modelId)?.status?.value;
    if (state === "unloaded") return;
    if (performance.now() > deadline) throw new Error(`still ${state} 60 s after the unload`);
    await new Promise((wake) => setTimeout(wake, 100));
  }
}

const median = (values: readonly number[]) => quantile(values, 0.5);

async function run(kind: Kind, dir: string, modelFile: string, llamaServer: string): Promise<Cycle[]> {
  const port = await freePort();
  const threads = values.threads as string;
  const ctx = values.ctx as string;
  const command =
    kind === "lmserve"
      ? [
          process.execPath,
          resolve(projectRoot, "bin/lmserve.js"),
          "serve",
          "--models-dir",
          dir,
          "--port",
          String(port),
          "--threads",
          threads,
          "--max-num-seqs",
          "1",
          "--max-model-len",
          ctx,
          "--log-level",
          "warn",
        ]
      : [
          llamaServer,
          "--models-dir",
          dir,
          "--host",
          "127.0.0.1",
          "--port",
          String(port),
          "-t",
          threads,
          "-np",
          "1",
          "-c",
          ctx,
          "--no-webui",
        ];
  const server = await startRouter(command, port, modelFile);
  const result: Cycle[] = [];
  try {
    for (let cycle = 0; cycle < cycles; cycle++) {
      const coldMs = await oneToken(server);
      const warmMs = await oneToken(server);
      result.push({ coldMs, warmMs });
      log(`${kind}: cold ${coldMs.toFixed(0)} ms, warm ${warmMs.toFixed(0)} ms`);
      await unload(server);
    }
  } finally {
    await server.stop();
  }
  return result;
}

async function main(): Promise<void> {
  const modelFile = resolve(values.model as string);
  await ensureModel(modelFile, log);
  const peer = await ensurePeerBinaries(log);
  const dir = mkdtempSync(join(tmpdir(), "lmserve-cold-"));
  symlinkSync(modelFile, join(dir, basename(modelFile)));
  const loadAtStart = loadFacts();
  const all: Record<Kind, Cycle[]> = { lmserve: [], "llama-server": [] };
  try {
    for (let round = 0; round < rounds; round++) {
      const order: Kind[] = round % 2 === 0 ? ["lmserve", "llama-server"] : ["llama-server", "lmserve"];
      for (const kind of order) all[kind].push(...(await run(kind, dir, modelFile, peer.server)));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const stats = (kind: Kind) => {
    const cycles = all[kind];
    const cold = median(cycles.map((cycle) => cycle.coldMs));
    const warm = median(cycles.map((cycle) => cycle.warmMs));
    const load = median(cycles.map((cycle) => cycle.coldMs - cycle.warmMs));
    return { cold, warm, load, n: cycles.length };
  };
  const ours = stats("lmserve");
  const theirs = stats("llama-server");
  const lines = [
    `# Cold load to first token: lmserve --models-dir vs llama-server router mode (bench/coldLoad.ts)`,
    "",
    `- ${cpuFacts()}; load average at start ${loadAtStart}, at end ${loadFacts()}`,
    `- lmserve ${gitRevision()}, llama.cpp ${peer.commit}; model ${basename(modelFile)}; ${values.threads} threads, 1 slot, ${values.ctx}-token context`,
    `- ${rounds} rounds (alternating which server runs first) x ${cycles} cycles of: a one-token completion of the unloaded model (cold), the same again (warm), POST /models/unload`,
    "",
    "| measure (median) | lmserve | llama-server | lmserve / llama-server |",
    "| --- | --- | --- | --- |",
    `| cold: load + prompt + 1 token, ms | ${ours.cold.toFixed(0)} | ${theirs.cold.toFixed(0)} | ${(ours.cold / theirs.cold).toFixed(2)} |`,
    `| warm: prompt + 1 token, ms | ${ours.warm.toFixed(0)} | ${theirs.warm.toFixed(0)} | ${(ours.warm / theirs.warm).toFixed(2)} |`,
    `| load (cold - warm), ms | ${ours.load.toFixed(0)} | ${theirs.load.toFixed(0)} | ${(ours.load / theirs.load).toFixed(2)} |`,
    "",
    `Target (issue 28): cold ≤ 1.2x llama-server's router mode: ${ours.cold / theirs.cold <= 1.2 ? "met" : "missed"}.`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();

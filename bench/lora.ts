/**
 * LoRA adapters mixed in one server (issue 28's target): requests alternating between two adapters at
 * concurrency 4 against the same requests on the base model alone, on the real server over HTTP.
 * llama.cpp applies adapters per context, so lmserve runs one adapter set per step and the sets take
 * turns (see docs/ARCHITECTURE.md, "LoRA adapters"); this measures what that costs.
 *
 * Workload: closed loop, 4 workers, each request a 32-token prompt and 64 completion tokens
 * (`ignore_eos`, greedy). Phases in ABBA order (base, mixed, mixed, base) after one warm-up request per
 * model: `base` sends every request to the base model; `mixed` sends worker i's requests to adapter
 * `a` (i even) or `b` (i odd), so two of the four running sequences are under each adapter. Prints each
 * phase's aggregate completion tokens per second and the ratio mixed / base (target >= 0.8).
 *
 * Usage: node --import tsx bench/lora.ts [--model FILE] [--requests N] [--rank R] [--threads T]
 * Default model: bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf (made when missing); adapters of rank 8 on
 * attn_q and attn_v (PEFT's default), written to a temporary folder by bench/gguf/syntheticLora.ts.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { projectRoot } from "../src/paths.ts";
import { writeSyntheticLora } from "./gguf/syntheticLora.ts";
import { cpuFacts, DEFAULT_MODEL, ensureModel, gitRevision, loadFacts } from "./lib/runInfo.ts";
import { awaitListening, stopProcess } from "./lib/serverProcess.ts";

const CONCURRENCY = 4;
const PROMPT_TOKENS = 32;
const COMPLETION_TOKENS = 64;

const log = (line: string) => process.stderr.write(`${line}\n`);

/** One phase's figures: completion tokens in all, wall seconds. */
type Phase = { tokens: number; seconds: number };

/** Runs `requests` requests per worker at concurrency 4; worker i sends to `modelOf(i)`. */
async function runPhase(
  url: string,
  prompt: number[],
  requests: number,
  modelOf: (worker: number) => string,
): Promise<Phase> {
  let tokens = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, worker) => {
      for (let index = 0; index < requests; index++) {
        const response = await fetch(`${url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: modelOf(worker),
            prompt,
            max_tokens: COMPLETION_TOKENS,
            temperature: 0,
            ignore_eos: true,
          }),
        });
        if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
        const body = (await response.json()) as { usage: { completion_tokens: number } };
        tokens += body.usage.completion_tokens;
      }
    }),
  );
  return { tokens, seconds: (performance.now() - started) / 1000 };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      requests: { type: "string", default: "4" },
      rank: { type: "string", default: "8" },
      threads: { type: "string", default: "2" },
    },
  });
  const model = resolve(values.model ?? DEFAULT_MODEL);
  if (values.model === undefined) await ensureModel(model, log);
  const requests = Number(values.requests);
  const dir = await mkdtemp(join(tmpdir(), "lmserve-bench-lora-"));
  for (const [name, seed] of [
    ["a", 1],
    ["b", 2],
  ] as const) {
    await writeSyntheticLora({
      basePath: model,
      outPath: join(dir, `${name}.gguf`),
      seed,
      rank: Number(values.rank),
    });
  }
  const child = spawn(
    process.execPath,
    [
      resolve(projectRoot, "bin/lmserve.js"),
      "serve",
      model,
      ...["--lora", `a=${join(dir, "a.gguf")}`, "--lora", `b=${join(dir, "b.gguf")}`],
      ...["--max-num-seqs", String(CONCURRENCY), "--threads", values.threads, "--max-model-len", "256"],
      ...["--port", "0"],
    ],
    { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] },
  );
  try {
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const { url, modelId } = await awaitListening(child, () => stderr, 300_000);
    const tokenized = (await (
      await fetch(`${url}/tokenize`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: modelId, prompt: "Once upon a time ".repeat(PROMPT_TOKENS) }),
      })
    ).json()) as { tokens: number[] };
    const prompt = tokenized.tokens.slice(0, PROMPT_TOKENS);
    for (const name of [modelId, "a", "b"]) await runPhase(url, prompt, 1, () => name);
    const base = () => runPhase(url, prompt, requests, () => modelId);
    const mixed = () => runPhase(url, prompt, requests, (worker) => (worker % 2 === 0 ? "a" : "b"));
    const phases = { base: [] as Phase[], mixed: [] as Phase[] };
    phases.base.push(await base());
    phases.mixed.push(await mixed());
    phases.mixed.push(await mixed());
    phases.base.push(await base());
    const rate = (list: Phase[]) =>
      list.reduce((sum, phase) => sum + phase.tokens, 0) /
      list.reduce((sum, phase) => sum + phase.seconds, 0);
    const baseRate = rate(phases.base);
    const mixedRate = rate(phases.mixed);
    const ratio = mixedRate / baseRate;
    console.log(`# LoRA adapters mixed at concurrency ${CONCURRENCY} (${basename(model)})`);
    console.log("");
    console.log(`${gitRevision()}; ${cpuFacts()}; ${loadFacts(loadavg())}; threads ${values.threads}`);
    console.log(
      `${requests} requests per worker per phase, ${PROMPT_TOKENS}-token prompts, ${COMPLETION_TOKENS} tokens each, greedy; rank ${values.rank} adapters on attn_q and attn_v`,
    );
    console.log("");
    console.log("| phase | completion tok/s |");
    console.log("|---|---|");
    console.log(`| base model alone | ${baseRate.toFixed(1)} |`);
    console.log(`| adapters a and b mixed | ${mixedRate.toFixed(1)} |`);
    console.log("");
    console.log(`ratio mixed / base: ${ratio.toFixed(2)}x (target >= 0.8x)`);
    return 0;
  } finally {
    await stopProcess(child);
    await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(`bench/lora: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);

/**
 * The guided-decoding benchmark of issue 5 (`npm run bench:structured`).
 *
 * 1. Compile time: every accepting schema of `test/fixtures/schemas`, `compileConstraint` with the cache
 *    cleared (median of `--compile-runs` per schema), then our GBNF check plus llama.cpp's native parse
 *    (`validateGbnf`); p50 / p90 / max over the corpus.
 * 2. Throughput over HTTP: the real server (`node bin/lmserve.js serve MODEL --threads 2
 *    --max-model-len 1024 --port 0`), one streamed `/v1/completions` request at a time, unconstrained
 *    (`ignore_eos`, exactly `--max-tokens` tokens) against the same request constrained by the order
 *    schema (`test/fixtures/schemas/api-order.json`, which cannot use `ignore_eos`: tok/s is over what it
 *    generated), pairs interleaved, after one warm-up of each. Decode tok/s = (tokens - 1) / (last token
 *    - first token); end-to-end tok/s = tokens / request time.
 * 3. Where the time goes (`--no-probe` skips it): per-step decode times in-process with node-llama-cpp
 *    (see `bench/lib/structuredProbe.ts`), after the server has stopped.
 *
 * Usage:
 *   npm run bench:structured -- [--model FILE] [--max-tokens 64] [--threads 2] [--requests 6]
 *     [--compile-runs 20] [--probe-runs 3] [--no-probe] [--out FILE] [--help]
 *
 * Without `--model` it uses `bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf`, generating it first
 * (`bench/make-model.ts`'s `main`) when missing. Prints a Markdown report and writes it to `--out`
 * (default `bench/results/structured.md`). Exit code 0 on success, 1 on a failure.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel, type LlamaModel } from "node-llama-cpp";
import { projectRoot } from "../src/paths.ts";
import { compileConstraint } from "../src/structured/index.ts";
import { DEFAULT_MODEL, ensureModel } from "./lib/runInfo.ts";
import { corpusSchemas, measureCompileTimes, percentile } from "./lib/structuredCompile.ts";
import { probeStepTimes } from "./lib/structuredProbe.ts";
import { compileTable, probeTable, type ThroughputPair, throughputTable } from "./lib/structuredReport.ts";
import { StructuredServer } from "./lib/structuredServer.ts";

/** Threads of the server and the probe unless `--threads` says otherwise (issue 5: 2). */
const DEFAULT_THREADS = 2;
const MAX_MODEL_LEN = 1024;
const PROMPT = "Here is the customer's order as JSON:\n";
/** Sampling of both sides (the serving benchmark's settings). No seed: seeded requests run batch-invariant. */
const SAMPLING = { temperature: 0.7, topK: 40, topP: 0.95, minP: 0.05 };
const ORDER_SCHEMA = corpusSchemas().find((entry) => entry.name === "api-order")?.schema;

const startedAt = performance.now();
const log = (line: string) =>
  process.stderr.write(`[${((performance.now() - startedAt) / 1000).toFixed(0)} s] ${line}\n`);

function parseCli() {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      "max-tokens": { type: "string", default: "64" },
      threads: { type: "string", default: String(DEFAULT_THREADS) },
      requests: { type: "string", default: "6" },
      "compile-runs": { type: "string", default: "20" },
      "probe-runs": { type: "string", default: "3" },
      "no-probe": { type: "boolean", default: false },
      out: { type: "string" },
      help: { type: "boolean", default: false },
    },
  });
  const count = (name: string, text: string) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name}: a positive integer`);
    return value;
  };
  return {
    help: values.help,
    modelPath: values.model ? resolve(values.model) : DEFAULT_MODEL,
    maxTokens: count("max-tokens", values["max-tokens"]),
    threads: count("threads", values.threads),
    requests: count("requests", values.requests),
    compileRuns: count("compile-runs", values["compile-runs"]),
    probeRuns: count("probe-runs", values["probe-runs"]),
    probe: !values["no-probe"],
    out: resolve(values.out ?? resolve(projectRoot, "bench/results/structured.md")),
  };
}

/** Interleaved unconstrained / constrained streamed requests, after one warm-up of each. */
async function measureThroughput(server: StructuredServer, maxTokens: number, requests: number) {
  const common = {
    prompt: PROMPT,
    max_tokens: maxTokens,
    temperature: SAMPLING.temperature,
    top_k: SAMPLING.topK,
    top_p: SAMPLING.topP,
    min_p: SAMPLING.minP,
  };
  const free = () => server.stream({ ...common, ignore_eos: true });
  const constrained = () => server.stream({ ...common, guided_json: ORDER_SCHEMA });
  await free();
  await constrained();
  const pairs: ThroughputPair[] = [];
  for (let i = 0; i < requests; i++) {
    // Alternate which side goes first, so that neither always runs right after the other.
    let pair: ThroughputPair;
    if (i % 2 === 0) pair = { free: await free(), constrained: await constrained() };
    else {
      const second = await constrained();
      pair = { free: await free(), constrained: second };
    }
    pairs.push(pair);
    log(
      `pair ${i + 1}/${requests}: free ${pair.free.tokens} tokens, constrained ${pair.constrained.tokens} (${pair.constrained.finishReason})`,
    );
  }
  return pairs;
}

/** The number of tokens in the model's vocabulary (GGUF `tokenizer.ggml.tokens`). */
function vocabularySize(model: LlamaModel): number {
  const metadata = model.fileInfo.metadata as unknown as { tokenizer?: { ggml?: { tokens?: unknown[] } } };
  return metadata.tokenizer?.ggml?.tokens?.length ?? 0;
}

async function main(): Promise<number> {
  const options = parseCli();
  if (options.help) {
    process.stdout.write(
      "Usage: npm run bench:structured -- [--model FILE] [--max-tokens 64] [--threads 2] [--requests 6] [--compile-runs 20] [--probe-runs 3] [--no-probe] [--out FILE]\n",
    );
    return 0;
  }
  if (!ORDER_SCHEMA) throw new Error("test/fixtures/schemas/api-order.json is missing");
  await ensureModel(options.modelPath, log);
  const started = new Date();
  const load = loadavg()[0]?.toFixed(1);
  const sections: string[] = [
    `# Guided decoding benchmark (${started.toISOString().slice(0, 16).replace("T", " ")} UTC)`,
    "",
    `Command: \`npm run bench:structured -- ${process.argv.slice(2).join(" ")}\`. Model \`${relative(projectRoot, options.modelPath)}\`, ${options.threads} threads, load average ${load} at the start.`,
    "",
  ];

  log("compile times over the corpus...");
  const pure = await measureCompileTimes(options.compileRuns);
  log("compile times with llama.cpp's parse...");
  const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error, build: "never" });
  const native = await measureCompileTimes(Math.max(3, Math.floor(options.compileRuns / 4)), true);
  sections.push(compileTable(pure, native), "");

  log(`server: ${options.modelPath} --threads ${options.threads} --max-model-len ${MAX_MODEL_LEN}`);
  const server = await StructuredServer.start(options.modelPath, [
    "--threads",
    String(options.threads),
    "--max-model-len",
    String(MAX_MODEL_LEN),
  ]);
  try {
    const pairs = await measureThroughput(server, options.maxTokens, options.requests);
    sections.push(throughputTable(pairs, options.maxTokens), "");
  } finally {
    await server.stop();
  }

  if (options.probe) {
    log("in-process probe of per-step times...");
    const model = await llama.loadModel({ modelPath: options.modelPath });
    const context = await model.createContext({
      contextSize: MAX_MODEL_LEN,
      threads: options.threads,
      batchSize: 512,
    });
    try {
      const gbnf = compileConstraint("json_schema", ORDER_SCHEMA).gbnf;
      const results = await probeStepTimes({
        model,
        sequence: context.getSequence(),
        grammar: await llama.createGrammar({ grammar: gbnf }),
        anyGrammar: await llama.createGrammar({ grammar: "root ::= [^\\x00]*" }),
        prompt: model.tokenize(PROMPT),
        maxTokens: options.maxTokens,
        runs: options.probeRuns,
        sampling: SAMPLING,
        onRun: log,
      });
      sections.push(probeTable(results, vocabularySize(model)), "");
    } finally {
      await context.dispose();
      await model.dispose();
    }
  }
  sections.push(
    `Load average ${loadavg()[0]?.toFixed(1)} at the end; ${((performance.now() - startedAt) / 1000).toFixed(0)} s in all.`,
  );
  const report = sections.join("\n");
  process.stdout.write(`${report}\n`);
  writeFileSync(options.out, `${report}\n`);
  log(
    `written to ${relative(projectRoot, options.out)}; compile p50 ${percentile(
      pure.map((r) => r.compileMs),
      50,
    ).toFixed(3)} ms`,
  );
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exit(1);
  },
);

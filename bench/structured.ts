/**
 * The guided-decoding benchmark of issues 5 and 18 (`npm run bench:structured`).
 *
 * 1. Compile time: every accepting schema of `test/fixtures/schemas`, `compileConstraint` with the cache
 *    cleared (median of `--compile-runs` per schema), then our GBNF check plus llama.cpp's native parse
 *    (`validateGbnf`); p50 / p90 / max over the corpus.
 * 2. Throughput over HTTP against the real server (`node bin/lmserve.js serve MODEL --threads 2
 *    --max-model-len 1024 --port 0`), for each constraint kind of `bench/lib/structuredKinds.ts`:
 *    `json_schema` (api-order, chat `response_format`), `json_object`, regex, choice and GBNF
 *    (completions `guided_*`), a forced tool call (chat, `tool_choice: "required"`), and a schema with
 *    long fixed keys on the default server and on a second one started with `--jump-forward`. Each
 *    constrained request is compared with the same request of the same endpoint without the constraint
 *    (`ignore_eos`, same max_tokens), with the sampling (temperature 0.7, top_k 40, top_p 0.95,
 *    min_p 0.05): one warm-up of each side, then at concurrency 1 `--requests` interleaved pairs
 *    (alternating which side goes first), and at concurrency 4 `--rounds` rounds of 4 concurrent
 *    unconstrained and 4 concurrent constrained requests (alternating which batch goes first).
 *    Decode tok/s = (tokens - 1) / (last token - first token), tokens from the server's usage counts;
 *    the ratio is the median constrained rate over the median unconstrained rate, against issue 18's
 *    targets (json_schema >= 0.9x at c=1 and c=4, long keys with jump-forward >= 1.0x, the others >=
 *    0.85x).
 * 3. From the server's `/metrics`, read around every batch: mask-cache hits and misses, jump-forward
 *    tokens, and the decode / sample step-time means (`lmserve:step_seconds{phase}`), per side.
 * 4. Validity of every constrained output that finished (`stop`, or `tool_calls`): JSON.parse and ajv
 *    for schemas and tool arguments, JSON.parse for `json_object`, a full regex match for the regex and
 *    the chess GBNF, membership for the choice. Invalid outputs are listed in full; they make the exit code 1.
 *
 * Usage:
 *   npm run bench:structured -- [--model FILE] [--max-tokens 64] [--threads 2] [--requests 4] [--rounds 2]
 *     [--only json_schema,json_object,regex,choice,gbnf,tool_call,long_keys,long_keys_jf]
 *     [--compile-runs 20] [--quick] [--out FILE] [--help]
 *
 * `--quick`: 1 pair at c=1, 1 round at c=4, 4 compile runs. Without `--model` it uses
 * `bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf`, generating it first (`bench/make-model.ts`'s `main`)
 * when missing. Prints a Markdown report and writes it to `--out` (default `bench/results/structured.md`),
 * also after each kind (marked partial), so that a stopped run leaves the kinds it finished.
 * Exit code 0 on success, 1 on a failure or an invalid output.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { projectRoot } from "../src/paths.ts";
import { DEFAULT_MODEL, ensureModel } from "./lib/runInfo.ts";
import { measureCompileTimes, percentile } from "./lib/structuredCompile.ts";
import { type ConstraintKind, constraintKinds, KIND_NAMES, type KindName } from "./lib/structuredKinds.ts";
import { compileTable, kindSection, summaryTable, validitySection } from "./lib/structuredReport.ts";
import { type KindResult, measureKind } from "./lib/structuredRun.ts";
import { StructuredServer } from "./lib/structuredServer.ts";

/** Threads of the server unless `--threads` says otherwise (issue 5: 2). */
const DEFAULT_THREADS = 2;
const MAX_MODEL_LEN = 1024;
/** Concurrency of the batched level. */
const CONCURRENCY = 4;
const COMPLETIONS_PROMPT = "Here is the customer's order as JSON:\n";
const CHAT_PROMPT = "Write the customer's order as JSON.";
/** Sampling of both sides (issue 18). No seed: seeded requests run batch-invariant. */
const SAMPLING = { temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05 };
const USAGE =
  "Usage: npm run bench:structured -- [--model FILE] [--max-tokens 64] [--threads 2] [--requests 4] [--rounds 2] [--only LIST] [--compile-runs 20] [--quick] [--out FILE]\n" +
  `  --only: comma-separated, of ${KIND_NAMES.join(", ")}\n`;

const startedAt = performance.now();
const log = (line: string) =>
  process.stderr.write(`[${((performance.now() - startedAt) / 1000).toFixed(0)} s] ${line}\n`);

function parseCli() {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      "max-tokens": { type: "string", default: "64" },
      threads: { type: "string", default: String(DEFAULT_THREADS) },
      requests: { type: "string" },
      rounds: { type: "string" },
      only: { type: "string" },
      "compile-runs": { type: "string" },
      quick: { type: "boolean", default: false },
      out: { type: "string" },
      help: { type: "boolean", default: false },
    },
  });
  const count = (name: string, text: string, min = 1) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < min) throw new Error(`--${name}: an integer >= ${min}`);
    return value;
  };
  const quick = values.quick;
  const only = (values.only ?? KIND_NAMES.join(",")).split(",").map((name) => name.trim());
  for (const name of only)
    if (!(KIND_NAMES as readonly string[]).includes(name))
      throw new Error(`--only: unknown kind ${name} (one of ${KIND_NAMES.join(", ")})`);
  return {
    help: values.help,
    modelPath: values.model ? resolve(values.model) : DEFAULT_MODEL,
    maxTokens: count("max-tokens", values["max-tokens"]),
    threads: count("threads", values.threads),
    requests: count("requests", values.requests ?? (quick ? "1" : "4")),
    rounds: count("rounds", values.rounds ?? (quick ? "1" : "2"), 0),
    compileRuns: count("compile-runs", values["compile-runs"] ?? (quick ? "4" : "20")),
    only: new Set(only as KindName[]),
    out: resolve(values.out ?? resolve(projectRoot, "bench/results/structured.md")),
  };
}

/** Runs `kinds` on one server started with `flags`, stopping it afterwards; `onResult` after each kind. */
async function runOnServer(
  modelPath: string,
  flags: string[],
  kinds: ConstraintKind[],
  options: ReturnType<typeof parseCli>,
  onResult: (result: KindResult) => void,
): Promise<void> {
  log(`server: ${relative(projectRoot, modelPath)} ${flags.join(" ")}`);
  const server = await StructuredServer.start(modelPath, flags);
  try {
    for (const kind of kinds) {
      log(`${kind.name}: ${kind.label}`);
      onResult(
        await measureKind(server, kind, {
          maxTokens: options.maxTokens,
          requests: options.requests,
          rounds: options.rounds,
          concurrency: CONCURRENCY,
          sampling: SAMPLING,
          completionsPrompt: COMPLETIONS_PROMPT,
          chatPrompt: CHAT_PROMPT,
          log,
        }),
      );
    }
  } finally {
    await server.stop();
  }
}

async function main(): Promise<number> {
  const options = parseCli();
  if (options.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  await ensureModel(options.modelPath, log);
  const started = new Date();
  const load = loadavg()[0]?.toFixed(1);
  const flags = ["--threads", String(options.threads), "--max-model-len", String(MAX_MODEL_LEN)];
  const sections: string[] = [
    `# Guided decoding benchmark (${started.toISOString().slice(0, 16).replace("T", " ")} UTC)`,
    "",
    `Command: \`npm run bench:structured -- ${process.argv.slice(2).join(" ")}\`. Model \`${relative(projectRoot, options.modelPath)}\`, server flags \`${flags.join(" ")}\`, max_tokens ${options.maxTokens}, temperature ${SAMPLING.temperature}, top_k ${SAMPLING.top_k}, top_p ${SAMPLING.top_p}, min_p ${SAMPLING.min_p}; ${options.requests} pair(s) at concurrency 1, ${options.rounds} round(s) of ${CONCURRENCY} + ${CONCURRENCY} at concurrency ${CONCURRENCY}, after one warm-up of each side. Load average ${load} at the start.`,
    "",
  ];

  log("compile times over the corpus...");
  const pure = await measureCompileTimes(options.compileRuns);
  log("compile times with llama.cpp's parse...");
  const native = await measureCompileTimes(Math.max(3, Math.floor(options.compileRuns / 4)), true);

  const kinds = constraintKinds().filter((kind) => options.only.has(kind.name));
  const results: KindResult[] = [];
  /** The report of the kinds measured so far (written after each kind, so that a stopped run leaves one). */
  const report = () => {
    const body = [...sections];
    if (results.length < kinds.length)
      body.push(`**Partial: ${results.length} of ${kinds.length} kinds so far.**`, "");
    if (results.length > 0) body.push(summaryTable(results), "");
    body.push(compileTable(pure, native), "");
    for (const result of results) body.push(kindSection(result, options.maxTokens), "");
    if (results.length > 0) body.push(validitySection(results), "");
    body.push(
      `Load average ${loadavg()[0]?.toFixed(1)} at the end; ${((performance.now() - startedAt) / 1000).toFixed(0)} s in all.`,
    );
    return body.join("\n");
  };
  const onResult = (result: KindResult) => {
    results.push(result);
    writeFileSync(options.out, `${report()}\n`);
  };
  const plain = kinds.filter((kind) => kind.server === "default");
  const jumping = kinds.filter((kind) => kind.server === "jump-forward");
  if (plain.length > 0) await runOnServer(options.modelPath, flags, plain, options, onResult);
  if (jumping.length > 0)
    await runOnServer(options.modelPath, [...flags, "--jump-forward"], jumping, options, onResult);

  const text = report();
  process.stdout.write(`${text}\n`);
  writeFileSync(options.out, `${text}\n`);
  log(
    `written to ${relative(projectRoot, options.out)}; compile p50 ${percentile(
      pure.map((r) => r.compileMs),
      50,
    ).toFixed(3)} ms`,
  );
  return results.some((result) => result.invalid.length > 0) ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exit(1);
  },
);

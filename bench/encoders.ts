/**
 * CLI: embeddings and rerank throughput of lmserve against llama-server on one encoder GGUF pair, each
 * server already running: `inputs` inputs of 32..256 random words per `/v1/embeddings` request at
 * concurrency 1 and 4 (inputs/s), and 1 query x 32 documents per `/v1/rerank` request (documents/s), plus
 * the cosine of the two servers' vectors for the same inputs.
 *
 * Usage: npx tsx bench/encoders.ts --lmserve URL --peer URL [--peer-rerank URL] [--lmserve-model NAME]
 *   [--rerank-model NAME] [--inputs 64] [--requests 2]
 */
import { request as httpRequest } from "node:http";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    lmserve: { type: "string" },
    peer: { type: "string" },
    "peer-rerank": { type: "string" },
    "lmserve-model": { type: "string" },
    "rerank-model": { type: "string" },
    inputs: { type: "string", default: "64" },
    requests: { type: "string", default: "2" },
  },
});

const WORDS =
  "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split(
    " ",
  );

/** A text of `count` words, seeded by `seed`. */
function text(count: number, seed: number): string {
  const words: string[] = [];
  for (let i = 0; i < count; i++)
    words.push(WORDS[(seed * 7 + i * 13 + ((i * seed) % 5)) % WORDS.length] as string);
  return words.join(" ");
}

/**
 * POSTs `body` as JSON and resolves with the JSON answer. Plain `node:http`, without fetch's 300 s
 * headers timeout: a request of 64 long inputs queued behind three others can take longer on 2 cores.
 * @throws Error for a non-2xx status or a connection error.
 */
function post(url: string, body: unknown): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      url,
      { method: "POST", headers: { "content-type": "application/json" } },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          text += chunk;
        });
        response.on("end", () => {
          const status = response.statusCode ?? 0;
          if (status < 200 || status >= 300) reject(new Error(`${url}: ${status} ${text}`));
          else resolve(JSON.parse(text) as Record<string, unknown>);
        });
        response.on("error", reject);
      },
    );
    request.on("error", reject);
    request.end(JSON.stringify(body));
  });
}

/** Items per second over `requests` requests per worker, `concurrency` workers. */
async function rate(
  run: (index: number) => Promise<unknown>,
  items: number,
  requests: number,
  concurrency: number,
): Promise<number> {
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let r = 0; r < requests; r++) await run(worker * requests + r);
    }),
  );
  return (items * requests * concurrency) / ((performance.now() - started) / 1000);
}

const inputs = Number(values.inputs);
const requests = Number(values.requests);
const batch = (seed: number) =>
  Array.from({ length: inputs }, (_, i) => text(32 + ((i * 37 + seed) % 225), seed + i));
const report: Record<string, number> = {};
if (values.lmserve && values.peer) {
  const ours = (seed: number) =>
    post(`${values.lmserve}/v1/embeddings`, { model: values["lmserve-model"], input: batch(seed) });
  const theirs = (seed: number) => post(`${values.peer}/v1/embeddings`, { input: batch(seed) });
  const a = (await ours(0)) as { data: { embedding: number[] }[] };
  const b = (await theirs(0)) as { data: { embedding: number[] }[] };
  let worst = 1;
  a.data.forEach((entry, i) => {
    const other = b.data[i]?.embedding as number[];
    let dot = 0;
    let na = 0;
    let nb = 0;
    entry.embedding.forEach((value, k) => {
      dot += value * (other[k] as number);
      na += value * value;
      nb += (other[k] as number) ** 2;
    });
    worst = Math.min(worst, dot / Math.sqrt(na * nb));
  });
  report.minCosine = worst;
  for (const concurrency of [1, 4]) {
    report[`lmserve_inputs_per_s_c${concurrency}`] = await rate(ours, inputs, requests, concurrency);
    report[`llama_server_inputs_per_s_c${concurrency}`] = await rate(theirs, inputs, requests, concurrency);
    report[`ratio_c${concurrency}`] =
      (report[`lmserve_inputs_per_s_c${concurrency}`] as number) /
      (report[`llama_server_inputs_per_s_c${concurrency}`] as number);
  }
}
if (values.lmserve && values["peer-rerank"]) {
  const documents = Array.from({ length: 32 }, (_, i) => text(20 + (i % 40), i));
  const ours = () =>
    post(`${values.lmserve}/v1/rerank`, { model: values["rerank-model"], query: text(8, 99), documents });
  const theirs = () => post(`${values["peer-rerank"]}/v1/rerank`, { query: text(8, 99), documents });
  report.lmserve_docs_per_s = await rate(ours, 32, requests, 1);
  report.llama_server_docs_per_s = await rate(theirs, 32, requests, 1);
  report.rerank_ratio = report.lmserve_docs_per_s / report.llama_server_docs_per_s;
}
console.log(JSON.stringify(report, null, 2));

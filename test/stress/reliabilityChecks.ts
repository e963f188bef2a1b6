/**
 * The reliability suite's drivers and checks, shared by the short form (`test/e2e/reliability.test.ts`,
 * in `npm test`) and the full form (`test/stress/`, `npm run test:stress`): fuzzing, client
 * disconnects, overload, API-key refusal, idle-slot and RSS measurements.
 */
import { readFileSync } from "node:fs";
import { createConnection } from "node:net";
import type { FuzzCase } from "./fuzzCases.ts";

/** What a fuzz run saw. */
export type FuzzStats = {
  tried: number;
  /** Answers by HTTP status. */
  byStatus: Record<number, number>;
  /** 5xx answers (each a failure), with the case that caused it. */
  serverErrors: string[];
  /** Answers that were neither a well-formed error body nor a valid response. */
  malformed: string[];
};

/** Runs `items` through `work` with at most `concurrency` at a time. */
export async function pool<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await work(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** Sends every case and checks every answer; never throws for a bad answer (it is counted). */
export async function runFuzz(
  url: string,
  cases: readonly FuzzCase[],
  concurrency: number,
): Promise<FuzzStats> {
  const stats: FuzzStats = { tried: 0, byStatus: {}, serverErrors: [], malformed: [] };
  await pool(cases, concurrency, async (fuzzCase) => {
    stats.tried++;
    let response: Response;
    try {
      response = await fetch(`${url}${fuzzCase.path}`, {
        method: fuzzCase.method,
        headers: fuzzCase.headers,
        ...(fuzzCase.body !== undefined ? { body: fuzzCase.body } : {}),
      });
    } catch (error) {
      stats.malformed.push(`${fuzzCase.name}: no answer (${(error as Error).cause ?? error})`);
      return;
    }
    stats.byStatus[response.status] = (stats.byStatus[response.status] ?? 0) + 1;
    const problem = await checkAnswer(fuzzCase, response);
    if (response.status >= 500)
      stats.serverErrors.push(`${fuzzCase.name}: ${response.status} ${problem ?? ""}`);
    else if (problem) stats.malformed.push(`${fuzzCase.name}: ${problem}`);
  });
  return stats;
}

/**
 * Checks one answer: a 4xx/5xx must be the documented error body (`object: "error"`, `code` = the
 * status, OpenAI's `error` object); a 200 must be a valid response of its endpoint, and a stream must
 * end with `[DONE]`, an error event only as the last event before it. Returns the problem, if any.
 */
export async function checkAnswer(
  fuzzCase: Pick<FuzzCase, "method" | "path">,
  response: Response,
): Promise<string | undefined> {
  const text = await response.text();
  if (!response.headers.get("x-request-id")) return "no x-request-id header";
  if (fuzzCase.method === "HEAD" || response.status === 204) return undefined;
  const contentType = response.headers.get("content-type") ?? "";
  if (response.status >= 400) return checkErrorBody(text, response.status);
  if (response.status !== 200) return `unexpected status ${response.status}`;
  if (contentType.startsWith("text/event-stream")) return checkStream(text);
  if (!contentType.includes("json"))
    return fuzzCase.method === "GET" ? undefined : `content-type ${contentType}`;
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return `200 with invalid JSON: ${text.slice(0, 100)}`;
  }
  const path = fuzzCase.path.split("?")[0];
  if (fuzzCase.method !== "POST") return undefined;
  if (path === "/v1/completions" && (body.object !== "text_completion" || !Array.isArray(body.choices)))
    return `not a completion: ${text.slice(0, 120)}`;
  if (path === "/v1/chat/completions" && (body.object !== "chat.completion" || !Array.isArray(body.choices)))
    return `not a chat completion: ${text.slice(0, 120)}`;
  if (
    path === "/tokenize" &&
    (!Array.isArray(body.tokens) || body.count !== (body.tokens as unknown[]).length)
  )
    return `not a tokenize response: ${text.slice(0, 120)}`;
  if (path === "/detokenize" && typeof body.prompt !== "string")
    return `not a detokenize response: ${text.slice(0, 120)}`;
  return undefined;
}

function checkErrorBody(text: string, status: number): string | undefined {
  let body: {
    object?: unknown;
    code?: unknown;
    message?: unknown;
    error?: { message?: unknown; type?: unknown; code?: unknown };
  };
  try {
    body = JSON.parse(text);
  } catch {
    return `error ${status} without a JSON body: ${text.slice(0, 100)}`;
  }
  const error = body.error;
  if (body.object !== "error" || body.code !== status || typeof body.message !== "string")
    return `malformed error body: ${text.slice(0, 160)}`;
  if (
    !error ||
    typeof error.message !== "string" ||
    error.message === "" ||
    typeof error.type !== "string" ||
    typeof error.code !== "string"
  )
    return `malformed error object: ${text.slice(0, 160)}`;
  if (/\bat .+:\d+:\d+/.test(text)) return `stack trace in the error: ${text.slice(0, 160)}`;
  return undefined;
}

function checkStream(text: string): string | undefined {
  const events = text.split("\n\n").filter((block) => block.length > 0);
  if (events.at(-1) !== "data: [DONE]") return `stream does not end with [DONE]: ...${text.slice(-120)}`;
  for (const [index, event] of events.slice(0, -1).entries()) {
    if (!event.startsWith("data: ")) return `not a data event: ${event.slice(0, 80)}`;
    let payload: { object?: unknown; code?: unknown };
    try {
      payload = JSON.parse(event.slice(6));
    } catch {
      return `event is not JSON: ${event.slice(0, 80)}`;
    }
    if (payload.object === "error") {
      if (index !== events.length - 2) return "error event before the end of the stream";
      if (typeof payload.code !== "number" || payload.code >= 500)
        return `stream failed with ${payload.code}: ${event.slice(0, 160)}`;
    }
  }
  return undefined;
}

/** Requests running and waiting, summed over the models, from `/metrics` (vLLM's gauges). */
export async function slotUsage(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ running: number; waiting: number }> {
  const text = await (await fetch(`${url}/metrics`, { headers })).text();
  const sum = (name: string) =>
    [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, "gm"))].reduce(
      (total, match) => total + Number(match[1]),
      0,
    );
  return { running: sum("vllm:num_requests_running"), waiting: sum("vllm:num_requests_waiting") };
}

/** Generations the server counted as aborted (`vllm:request_success_total{finished_reason="abort"}`, all models). */
export async function serverAborts(url: string, headers: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers })).text();
  return [
    ...text.matchAll(/^vllm:request_success_total\{[^}]*finished_reason="abort"[^}]*\} ([0-9.e+-]+)$/gm),
  ].reduce((total, match) => total + Number(match[1]), 0);
}

/**
 * Waits (polling `/metrics`, at most `attempts` x 50 ms) until no request runs or waits; returns the
 * requests still running or waiting then: the leaked slots.
 */
export async function leakedSlots(
  url: string,
  headers: Record<string, string> = {},
  attempts = 400,
): Promise<number> {
  let usage = await slotUsage(url, headers);
  for (let attempt = 0; attempt < attempts && usage.running + usage.waiting > 0; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    usage = await slotUsage(url, headers);
  }
  return usage.running + usage.waiting;
}

/** Resident set size of a process in bytes (Linux `/proc`). */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kilobytes = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  if (kilobytes === undefined) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kilobytes) * 1024;
}

/** What a disconnect run did. */
export type DisconnectStats = {
  tried: number;
  /** Dropped before the response headers arrived (waiting in the queue, or a non-streamed request). */
  abortedBeforeHeaders: number;
  /** Streams dropped after some chunks. */
  abortedMidStream: number;
  /** Finished before the drop came. */
  completed: number;
};

/**
 * Starts `count` generations (four in five streamed, 400 tokens with `ignore_eos`, so none ends
 * early). A streamed one is dropped after a random number (1-5) of network reads, mid-stream, unless
 * a timer of up to 800 ms drops it first (in the queue or during prefill); a non-streamed one by that
 * timer. A read can hold many tokens, so a fast model may still finish before the drop ("completed");
 * the server's own count of aborted generations is the measure of what was cut mid-way.
 */
export async function runDisconnects(
  url: string,
  headers: Record<string, string>,
  model: string,
  count: number,
  random: () => number,
  concurrency = 6,
): Promise<DisconnectStats> {
  const stats: DisconnectStats = { tried: 0, abortedBeforeHeaders: 0, abortedMidStream: 0, completed: 0 };
  await pool(
    Array.from({ length: count }, (_, i) => i),
    concurrency,
    async (index) => {
      stats.tried++;
      const controller = new AbortController();
      const stream = index % 5 !== 0;
      const chat = index % 2 === 0;
      const common = { model, max_tokens: 400, ignore_eos: true, stream };
      const body = chat
        ? { ...common, messages: [{ role: "user", content: "Tell me a story" }] }
        : { ...common, prompt: "Once upon a time", n: 1 + Math.floor(random() * 2) };
      const chunksBeforeDrop = 1 + Math.floor(random() * 5);
      const timer = setTimeout(() => controller.abort(), Math.floor(random() * 800));
      let headersReceived = false;
      try {
        const response = await fetch(`${url}${chat ? "/v1/chat/completions" : "/v1/completions"}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: JSON.stringify(body),
          signal: controller.signal,
        });
        headersReceived = true;
        if (stream && response.body) {
          const reader = response.body.getReader();
          for (let chunks = 1; !(await reader.read()).done; chunks++) {
            if (chunks >= chunksBeforeDrop) controller.abort();
          }
        } else await response.arrayBuffer();
        stats.completed++;
      } catch {
        if (headersReceived) stats.abortedMidStream++;
        else stats.abortedBeforeHeaders++;
      } finally {
        clearTimeout(timer);
      }
    },
  );
  return stats;
}

/**
 * Streams `count` completions (400 tokens with `ignore_eos`, `concurrency` at a time: at most the
 * slots, since a dropped request frees its slot a moment after the client has gone) and drops each
 * one as soon as its first chunk arrives: every one mid-way.
 * @returns how many were dropped after their first chunk, and how many had finished before the drop.
 */
export async function runMidStreamAborts(
  url: string,
  headers: Record<string, string>,
  model: string,
  count: number,
  concurrency: number,
): Promise<{ tried: number; abortedMidStream: number; completed: number; refused: number }> {
  const stats = { tried: 0, abortedMidStream: 0, completed: 0, refused: 0 };
  await pool(
    Array.from({ length: count }, (_, i) => i),
    concurrency,
    async (index) => {
      stats.tried++;
      const controller = new AbortController();
      const response = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({
          model,
          prompt: `Story ${index}: once upon a time`,
          max_tokens: 400,
          ignore_eos: true,
          stream: true,
        }),
        signal: controller.signal,
      });
      if (!response.ok || !response.body) {
        stats.refused++;
        await response.arrayBuffer();
        return;
      }
      const reader = response.body.getReader();
      try {
        await reader.read();
        controller.abort();
        while (!(await reader.read()).done);
        stats.completed++;
      } catch {
        stats.abortedMidStream++;
      }
    },
  );
  return stats;
}

/** What an overload burst saw. */
export type OverloadStats = {
  sent: number;
  byStatus: Record<number, number>;
  latencyMs: Record<number, number[]>;
  problems: string[];
};

/** Sends `count` generation requests at once; every answer is checked as in {@link checkAnswer}. */
export async function runOverload(
  url: string,
  headers: Record<string, string>,
  model: string,
  count: number,
): Promise<OverloadStats> {
  const stats: OverloadStats = { sent: count, byStatus: {}, latencyMs: {}, problems: [] };
  await Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const stream = index % 3 === 0;
      const path = index % 2 === 0 ? "/v1/completions" : "/v1/chat/completions";
      const body =
        path === "/v1/completions"
          ? { model, prompt: "Once upon a time", max_tokens: 128, stream }
          : { model, messages: [{ role: "user", content: "Hello" }], max_tokens: 128, stream };
      const started = performance.now();
      const response = await fetch(`${url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
      const problem = await checkAnswer({ method: "POST", path }, response);
      const elapsed = performance.now() - started;
      stats.byStatus[response.status] = (stats.byStatus[response.status] ?? 0) + 1;
      stats.latencyMs[response.status] = [...(stats.latencyMs[response.status] ?? []), elapsed];
      if (problem) stats.problems.push(`${response.status}: ${problem}`);
      if (response.status === 503 && !response.headers.get("retry-after"))
        stats.problems.push("503 without Retry-After");
    }),
  );
  return stats;
}

/** Authorization headers that must all be refused (given the right key `key`). */
export function wrongAuthorizations(key: string): (string | undefined)[] {
  return [
    undefined,
    "",
    "Bearer",
    "Bearer ",
    `Bearer ${key}x`,
    `Bearer ${key.slice(0, -1)}`,
    `Bearer ${key.toUpperCase()}`,
    `Bearer x${key}`,
    `Basic ${Buffer.from(`user:${key}`).toString("base64")}`,
    key,
    `Token ${key}`,
    `Bearer ${key} ${key}`,
    `Bearer ${"k".repeat(8000)}`,
    `Bearer ${key}\u00a0`.normalize("NFC").replace("\u00a0", "%A0"),
  ];
}

/** The `p`-th percentile (0..100) of `values`, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

/** Requests no HTTP client library would send, written on a raw socket. */
export const RAW_HTTP_CASES: readonly string[] = [
  "GARBAGE\r\n\r\n",
  "GET / HTTP/9.9\r\nHost: x\r\n\r\n",
  `GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
  "GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header Name: 1\r\n\r\n",
  "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Ctl: a\u0001b\r\n\r\n",
  "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\u007fb\r\n\r\n",
  "GET /v1/nope HTTP/1.1\r\nHost: x\r\nX-Request-Id: caf\u00e9\u00ff\tx\r\nConnection: close\r\n\r\n",
];

/**
 * Sends each raw request on its own connection; returns the cases whose answer is not an HTTP 4xx
 * carrying the JSON error body (the connection may then close).
 */
export async function runRawHttpCases(url: string): Promise<string[]> {
  const { hostname, port } = new URL(url);
  const problems: string[] = [];
  for (const request of RAW_HTTP_CASES) {
    const answer = await new Promise<string>((resolve) => {
      const socket = createConnection({ host: hostname, port: Number(port) });
      let data = "";
      socket.on("data", (chunk) => {
        data += chunk.toString("latin1");
      });
      socket.on("error", () => resolve(data));
      socket.on("close", () => resolve(data));
      socket.setTimeout(5_000, () => socket.destroy());
      socket.write(request, "latin1");
    });
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
    const body = answer.slice(answer.indexOf("\r\n\r\n") + 4);
    const problem = !(status >= 400 && status < 500) ? `status ${status}` : checkErrorBody(body, status);
    if (problem)
      problems.push(`${JSON.stringify(request.slice(0, 50))}: ${problem} (${answer.slice(0, 120)})`);
  }
  return problems;
}

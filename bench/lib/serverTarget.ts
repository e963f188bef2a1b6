/**
 * The benchmarked server: starts the real `lmserve serve` process on port 0 (the URL comes from its
 * `{"msg":"listening","url":...}` log line, as `test/helpers/testServer.ts` reads it) and sends it
 * streamed `/v1/completions` requests with plain `fetch`, timing each token's arrival from the SSE
 * stream. `stream_options.continuous_usage_stats` makes every chunk carry the completion token count,
 * so a chunk that carries several tokens (held-back UTF-8 bytes) is counted as such.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { projectRoot } from "../../src/paths.ts";
import { PROBE_LINE_PREFIX } from "./engineProtocol.ts";
import { awaitListening, stopProcess } from "./serverProcess.ts";
import { sseEvents } from "./sseEvents.ts";
import { ArrivalRecorder, type BatchStats, closedLoop, type LevelRaw, type RequestTiming } from "./stats.ts";
import type { Sampling } from "./workload.ts";

/** Options of {@link ServerTarget.start}. */
export type ServerOptions = {
  modelPath: string;
  /** `serve` flags after the model, e.g. `--max-num-seqs 8 --threads 2 --max-model-len 1024`. */
  flags: string[];
  /** Run through `serverProbe.ts` to count decode batches (SIGUSR2 to read them). */
  probe: boolean;
  /** Milliseconds to wait for "listening". Defaults to 300,000. */
  timeoutMs?: number;
  /** The process's environment. Defaults to this one's (e.g. `LMSERVE_FROM_SOURCE`, see `bin/lmserve.js`). */
  env?: NodeJS.ProcessEnv;
};

/** One streamed completion's timings plus what its usage said. */
export type StreamedCompletion = RequestTiming & { promptTokens: number; cachedTokens: number };

type UsageChunk = {
  completion_tokens?: number;
  prompt_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
};

/** A running server process. */
export class ServerTarget {
  readonly url: string;
  /** The served model id (from `GET /v1/models`). */
  readonly modelId: string;
  /** The exact command line that was run. */
  readonly command: string[];
  private readonly child: ChildProcess;
  private readonly probeWaiters: ((stats: BatchStats) => void)[];

  private constructor(
    child: ChildProcess,
    url: string,
    modelId: string,
    command: string[],
    waiters: ((stats: BatchStats) => void)[],
  ) {
    this.child = child;
    this.url = url;
    this.modelId = modelId;
    this.command = command;
    this.probeWaiters = waiters;
  }

  /**
   * Spawns `node bin/lmserve.js serve MODEL FLAGS --port 0` (through `serverProbe.ts` with `probe`)
   * and resolves once it listens.
   * @throws Error when the process exits first or does not listen within `timeoutMs`.
   */
  static async start(options: ServerOptions): Promise<ServerTarget> {
    const args = [
      ...(options.probe
        ? ["--import", "tsx", resolve(projectRoot, "bench/lib/serverProbe.ts")]
        : [resolve(projectRoot, "bin/lmserve.js")]),
      "serve",
      options.modelPath,
      ...options.flags,
      "--port",
      "0",
    ];
    const child = spawn(process.execPath, args, {
      cwd: projectRoot,
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    const waiters: ((stats: BatchStats) => void)[] = [];
    createInterface({ input: child.stderr as NodeJS.ReadableStream }).on("line", (line) => {
      if (line.startsWith(PROBE_LINE_PREFIX)) {
        waiters.shift()?.(JSON.parse(line.slice(PROBE_LINE_PREFIX.length)) as BatchStats);
      } else stderr = `${stderr}${line}\n`.slice(-4000);
    });
    const { url, modelId } = await awaitListening(child, () => stderr, options.timeoutMs ?? 300_000);
    return new ServerTarget(child, url, modelId, [process.execPath, ...args], waiters);
  }

  /**
   * Streams one completion of exactly `maxTokens` tokens (`ignore_eos`) for a token-id prompt and
   * times it. No `seed` is sent (seeded requests run batch-invariant, alone in their batches).
   * @throws Error on an HTTP error status or an error event in the stream.
   */
  async complete(
    prompt: readonly number[],
    maxTokens: number,
    sampling: Sampling,
  ): Promise<StreamedCompletion> {
    const recorder = new ArrivalRecorder();
    const response = await fetch(`${this.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: this.modelId,
        prompt,
        max_tokens: maxTokens,
        ignore_eos: true,
        temperature: sampling.temperature,
        top_k: sampling.topK,
        top_p: sampling.topP,
        min_p: sampling.minP,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    });
    if (!response.ok || !response.body) {
      throw new Error(`server answered ${response.status}: ${await response.text()}`);
    }
    let usage: UsageChunk = {};
    let seen = 0;
    for await (const { data, arrivedMs } of sseEvents(response.body)) {
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data) as { usage?: UsageChunk | null; error?: { message?: string } };
      if (chunk.error) throw new Error(`stream error: ${chunk.error.message ?? data}`);
      if (!chunk.usage) continue;
      usage = chunk.usage;
      const count = chunk.usage.completion_tokens ?? seen;
      recorder.arrive(count - seen, arrivedMs);
      seen = Math.max(seen, count);
    }
    return {
      ...recorder.finish(performance.now()),
      promptTokens: usage.prompt_tokens ?? prompt.length,
      cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    };
  }

  /** Runs one closed-loop level: worker w sends `prompts[w][0]`, then `prompts[w][1]`, ... */
  run(prompts: number[][][], outputTokens: number, sampling: Sampling): Promise<LevelRaw> {
    return closedLoop(prompts, (_worker, prompt) => this.complete(prompt, outputTokens, sampling));
  }

  /**
   * The probe's decode batch statistics since the previous call (SIGUSR2 round trip), or null when the
   * server runs without the probe or does not answer within 5 s.
   */
  async takeBatchStats(): Promise<BatchStats | null> {
    if (!this.command.some((arg) => arg.endsWith("serverProbe.ts"))) return null;
    return await new Promise<BatchStats | null>((resolveStats) => {
      const timer = setTimeout(() => {
        this.probeWaiters.splice(this.probeWaiters.indexOf(waiter), 1);
        resolveStats(null);
      }, 5000);
      const waiter = (stats: BatchStats) => {
        clearTimeout(timer);
        resolveStats(stats);
      };
      this.probeWaiters.push(waiter);
      this.child.kill("SIGUSR2");
    });
  }

  /** The server process's id. */
  get pid(): number {
    return this.child.pid ?? 0;
  }

  /** Text of `GET /metrics`, or null when the server has no such route. */
  async metrics(): Promise<string | null> {
    const response = await fetch(`${this.url}/metrics`);
    return response.ok ? await response.text() : null;
  }

  /** Stops the server (SIGTERM, SIGKILL after 30 s) and waits for it to exit. */
  stop(): Promise<void> {
    return stopProcess(this.child);
  }
}

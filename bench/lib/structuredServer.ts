/**
 * The server side of `bench/structured.ts`: starts the real `lmserve serve` process on port 0 (the URL
 * comes from its `{"msg":"listening","url":...}` log line) and times streamed `/v1/completions`
 * requests, with or without a guided-decoding constraint. Every chunk carries the running usage
 * (`stream_options.continuous_usage_stats`), so token counts are the server's own.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { projectRoot } from "../../src/paths.ts";
import { awaitListening } from "./serverProcess.ts";
import { sseEvents } from "./sseEvents.ts";

/** The timings of one streamed completion. */
export type StreamTiming = {
  /** Completion tokens (from the usage of the last chunk). */
  tokens: number;
  /** Request sent to first token, ms. */
  ttftMs: number;
  /** First token to last token, ms. */
  decodeMs: number;
  /** Request sent to last chunk, ms. */
  totalMs: number;
  finishReason: string;
  /** The generated text. */
  text: string;
};

type Chunk = {
  choices?: { text?: string; finish_reason?: string | null }[];
  usage?: { completion_tokens?: number } | null;
  error?: { message?: string };
};

/** A running `lmserve serve` process. */
export class StructuredServer {
  private constructor(
    private readonly child: ChildProcess,
    /** `http://127.0.0.1:PORT` */
    readonly url: string,
    /** The served model id. */
    readonly modelId: string,
    /** The command line that was run. */
    readonly command: string[],
  ) {}

  /**
   * Spawns `node bin/lmserve.js serve MODEL ...flags --port 0` and resolves once it listens.
   * @throws Error when the process exits first or does not listen within `timeoutMs` (default 300 s).
   */
  static async start(modelPath: string, flags: string[], timeoutMs = 300_000): Promise<StructuredServer> {
    const args = [resolve(projectRoot, "bin/lmserve.js"), "serve", modelPath, ...flags, "--port", "0"];
    const child = spawn(process.execPath, args, { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (bytes: Buffer) => {
      stderr = `${stderr}${bytes.toString()}`.slice(-4000);
    });
    const { url, modelId } = await awaitListening(child, () => stderr, timeoutMs);
    return new StructuredServer(child, url, modelId, [process.execPath, ...args]);
  }

  /**
   * Streams one completion of `body` (model, `stream` and usage options are added) and times it.
   * @throws Error on an HTTP error status or an error event in the stream.
   */
  async stream(body: Record<string, unknown>): Promise<StreamTiming> {
    const started = performance.now();
    const response = await fetch(`${this.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: this.modelId,
        ...body,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    });
    if (!response.ok || !response.body)
      throw new Error(`server answered ${response.status}: ${await response.text()}`);
    let first = 0;
    let last = 0;
    let tokens = 0;
    let finishReason = "";
    let text = "";
    for await (const { data, arrivedMs } of sseEvents(response.body)) {
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data) as Chunk;
      if (chunk.error) throw new Error(`stream error: ${chunk.error.message}`);
      const count = chunk.usage?.completion_tokens ?? tokens;
      if (count > tokens) {
        if (tokens === 0) first = arrivedMs;
        last = arrivedMs;
        tokens = count;
      }
      for (const choice of chunk.choices ?? []) {
        text += choice.text ?? "";
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
    }
    return {
      tokens,
      ttftMs: first - started,
      decodeMs: last - first,
      totalMs: performance.now() - started,
      finishReason,
      text,
    };
  }

  /** Stops the server (SIGTERM) and waits for it to exit. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    this.child.kill("SIGTERM");
    await once(this.child, "exit");
  }
}

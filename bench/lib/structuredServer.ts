/**
 * The server side of `bench/structured.ts`: starts the real `lmserve serve` process on port 0 (the URL
 * comes from its `{"msg":"listening","url":...}` log line), times streamed `/v1/completions` and
 * `/v1/chat/completions` requests, with or without a guided-decoding constraint, and reads `/metrics`.
 * Every chunk carries the running usage (`stream_options.continuous_usage_stats`), so token counts are
 * the server's own.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import { projectRoot } from "../../src/paths.ts";
import { awaitListening, stopProcess } from "./serverProcess.ts";
import { sseEvents } from "./sseEvents.ts";
import { type MetricsSnapshot, parseMetrics } from "./structuredMetrics.ts";

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
  /** The generated text (chat: the `content` deltas). */
  text: string;
  /** Chat: the streamed tool calls, deltas joined per index. */
  toolCalls: { name: string; arguments: string }[];
  /**
   * Chunks whose usage raised the token count. Below 2 with more than one token (a chat tool call is sent
   * whole once parsed), first-to-last token time says nothing about the decode rate.
   */
  tokenChunks: number;
};

/** The endpoints the benchmark streams. */
export type Endpoint = "completions" | "chat";

type ToolCallDelta = { index?: number; function?: { name?: string; arguments?: string } };
type Chunk = {
  choices?: {
    text?: string;
    delta?: { content?: string | null; tool_calls?: ToolCallDelta[] };
    finish_reason?: string | null;
  }[];
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
   * Streams one request of `body` to `/v1/completions` or `/v1/chat/completions` (model, `stream` and
   * usage options are added) and times it.
   * @throws Error on an HTTP error status or an error event in the stream.
   */
  async stream(body: Record<string, unknown>, endpoint: Endpoint = "completions"): Promise<StreamTiming> {
    const started = performance.now();
    const path = endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions";
    const response = await fetch(`${this.url}${path}`, {
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
    let tokenChunks = 0;
    const toolCalls: { name: string; arguments: string }[] = [];
    for await (const { data, arrivedMs } of sseEvents(response.body)) {
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data) as Chunk;
      if (chunk.error) throw new Error(`stream error: ${chunk.error.message}`);
      const count = chunk.usage?.completion_tokens ?? tokens;
      if (count > tokens) {
        if (tokens === 0) first = arrivedMs;
        last = arrivedMs;
        tokens = count;
        tokenChunks++;
      }
      for (const choice of chunk.choices ?? []) {
        text += choice.text ?? choice.delta?.content ?? "";
        for (const call of choice.delta?.tool_calls ?? []) {
          const index = call.index ?? 0;
          toolCalls[index] ??= { name: "", arguments: "" };
          const entry = toolCalls[index];
          entry.name += call.function?.name ?? "";
          entry.arguments += call.function?.arguments ?? "";
        }
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
      toolCalls,
      tokenChunks,
    };
  }

  /**
   * The server's `/metrics` counters this benchmark reads (see `structuredMetrics.ts`).
   * @throws Error on an HTTP error status.
   */
  async metrics(): Promise<MetricsSnapshot> {
    const response = await fetch(`${this.url}/metrics`);
    if (!response.ok) throw new Error(`/metrics answered ${response.status}`);
    return parseMetrics(await response.text());
  }

  /** Stops the server (SIGTERM, SIGKILL after 30 s) and waits for it to exit. */
  async stop(): Promise<void> {
    await stopProcess(this.child);
  }
}

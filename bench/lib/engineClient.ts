/**
 * Starts the bare-engine child (`bareEngine.ts`, run as `node --import tsx`) and talks to it over its
 * line protocol (`engineProtocol.ts`).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { projectRoot } from "../../src/paths.ts";
import {
  ENGINE_LINE_PREFIX,
  type EngineCommand,
  type EngineInfo,
  type EngineReply,
  type PrefixRaw,
} from "./engineProtocol.ts";
import type { BatchStats, LevelRaw } from "./stats.ts";
import type { Sampling } from "./workload.ts";

/** Options of {@link startEngine}. */
export type EngineOptions = {
  modelPath: string;
  /** Tokens of context per sequence. */
  contextSize: number;
  sequences: number;
  threads: number;
  /** Count and time decode batches. */
  probe: boolean;
  /** Run the `--defer-reloop` experiment (see `deferReloop.ts`). Defaults to false. */
  deferReloop?: boolean;
  /** Run the `--yield-per-token` experiment (see `bareEngine.ts`). Defaults to false. */
  yieldPerToken?: boolean;
  /** Milliseconds to wait for the model to load. Defaults to 300,000. */
  timeoutMs?: number;
};

type Pending = { resolve(reply: EngineReply): void; reject(error: Error): void };

/** A command before its id is assigned (distributes over the union). */
type WithoutId<T> = T extends unknown ? Omit<T, "id"> : never;

/** A running bare-engine child. Commands run one at a time in the child, in the order sent. */
export class EngineClient {
  readonly info: EngineInfo;
  private readonly child: ChildProcess;
  private readonly pending: Map<number, Pending>;
  private nextId = 1;

  private constructor(child: ChildProcess, info: EngineInfo, pending: Map<number, Pending>) {
    this.child = child;
    this.info = info;
    this.pending = pending;
  }

  /**
   * Spawns the child and resolves once its model and context are loaded.
   * @throws Error when the child exits or does not become ready within `timeoutMs`.
   */
  static async start(options: EngineOptions): Promise<EngineClient> {
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        resolve(projectRoot, "bench/lib/bareEngine.ts"),
        "--model",
        options.modelPath,
        "--context",
        String(options.contextSize),
        "--sequences",
        String(options.sequences),
        "--threads",
        String(options.threads),
        ...(options.probe ? [] : ["--no-probe"]),
        ...(options.deferReloop ? ["--defer-reloop"] : []),
        ...(options.yieldPerToken ? ["--yield-per-token"] : []),
      ],
      { cwd: projectRoot, stdio: ["pipe", "pipe", "pipe"] },
    );
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const pending = new Map<number, Pending>();
    const failAll = (error: Error) => {
      for (const entry of pending.values()) entry.reject(error);
      pending.clear();
    };
    const info = await new Promise<EngineInfo>((resolveInfo, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`bare engine not ready in ${options.timeoutMs ?? 300_000} ms: ${stderr}`)),
        options.timeoutMs ?? 300_000,
      );
      child.once("exit", (code) => {
        clearTimeout(timer);
        const error = new Error(`bare engine exited with ${code}: ${stderr.trim()}`);
        reject(error);
        failAll(error);
      });
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
        if (!line.startsWith(ENGINE_LINE_PREFIX)) return;
        const reply = JSON.parse(line.slice(ENGINE_LINE_PREFIX.length)) as EngineReply;
        if ("ready" in reply) {
          clearTimeout(timer);
          resolveInfo(reply.info);
          return;
        }
        const entry = pending.get(reply.id);
        pending.delete(reply.id);
        if (!entry) return;
        if (reply.ok) entry.resolve(reply);
        else entry.reject(new Error(`bare engine: ${reply.error}`));
      });
    });
    return new EngineClient(child, info, pending);
  }

  private call(command: WithoutId<EngineCommand>): Promise<EngineReply> {
    const id = this.nextId++;
    return new Promise<EngineReply>((resolveReply, reject) => {
      this.pending.set(id, { resolve: resolveReply, reject });
      this.child.stdin?.write(`${JSON.stringify({ ...command, id })}\n`);
    });
  }

  /** The child process's id. */
  get pid(): number {
    return this.child.pid ?? 0;
  }

  /** Tokenizes text with the model's tokenizer (special-token text is not parsed; no BOS). */
  async tokenize(text: string): Promise<number[]> {
    const reply = await this.call({ cmd: "tokenize", text });
    if (!("tokens" in reply)) throw new Error("bare engine: unexpected reply to tokenize");
    return reply.tokens;
  }

  /**
   * Runs one closed-loop level: `prompts[w]` are worker w's prompts.
   * @returns raw timings and, with the probe, the level's decode batch statistics.
   */
  async run(
    prompts: number[][][],
    outputTokens: number,
    sampling: Sampling,
  ): Promise<{ level: LevelRaw; batch: BatchStats | null }> {
    const reply = await this.call({ cmd: "run", prompts, outputTokens, sampling });
    if (!("level" in reply)) throw new Error("bare engine: unexpected reply to run");
    return { level: reply.level, batch: reply.batch };
  }

  /** Runs the prefix-cache scenario on one sequence. */
  async prefix(prefix: number[], suffixes: [number[], number[]], sampling: Sampling): Promise<PrefixRaw> {
    const reply = await this.call({ cmd: "prefix", prefix, suffixes, sampling });
    if (!("prefix" in reply)) throw new Error("bare engine: unexpected reply to prefix");
    return reply.prefix;
  }

  /** Closes the child's stdin (it frees its model and exits) and waits for it to exit. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = once(this.child, "exit");
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 30_000);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * A fake engine behind the interface serving uses (`src/serving/engine.ts`): no model, no native addon.
 * Its tokenizer maps each character to one token (its code unit, 0..255), and each generation writes a
 * scripted text one token per tick, so the HTTP layer can be tested in-process (`app.inject`) with
 * exact, instant outputs. For the engine's own behaviour, the end-to-end tests run the real one.
 */
import { QueueFullError } from "../../src/engine/errors.ts";
import type { NativeModelInfo } from "../../src/engine/native.ts";
import { TokenVocabulary } from "../../src/engine/TokenVocabulary.ts";
import type {
  GenerationObserver,
  GenerationRequest,
  GenerationResult,
  ModelTask,
  TokenLogprob,
} from "../../src/engine/types.ts";
import type { AppContext } from "../../src/server/appContext.ts";
import type { EngineHost, EngineModel } from "../../src/serving/engine.ts";
import { ModelRegistry } from "../../src/serving/ModelRegistry.ts";
import { SeedSource } from "../../src/serving/request/generationParams.ts";

/** Options of {@link FakeEngine}. */
export type FakeEngineOptions = {
  /** Served names; the first is the id. Defaults to `["fake-model"]`. */
  names?: readonly string[];
  /** Tokens of context per sequence. Defaults to 256. */
  contextSize?: number;
  /** The text each generation writes (then EOS), or a function of the request. Defaults to "Hello, world!". */
  text?: string | ((request: GenerationRequest) => string);
  /** Fail each generation with this error after this many tokens (the stream's error event). */
  failAfter?: { tokens: number; error: unknown };
  /** Refuse every submission as a full waiting queue does (`QueueFullError`: a 503). */
  full?: boolean;
  /**
   * What the model serves (`--task`): `rerank` makes it a reranker whose score of a pair is the pair's
   * token count (query + document, one token per character). Defaults to none (a generative model).
   */
  task?: ModelTask;
};

/** The fake tokenizer: one token per UTF-16 code unit, its code below 256 (else `?`). */
export function fakeTokenize(text: string): number[] {
  return Array.from(text, (char) => {
    const code = char.charCodeAt(0);
    return code < 256 ? code : 63;
  });
}

/** The text of fake token ids. */
export function fakeDetokenize(tokens: readonly number[]): string {
  return String.fromCharCode(...tokens);
}

const FAKE_INFO: NativeModelInfo = {
  nVocab: 256,
  nCtxTrain: 256,
  nEmbd: 4,
  nLayer: 1,
  nClsOut: 1,
  size: 0,
  description: "fake",
  bos: -1,
  eos: 0,
  eot: -1,
  addBos: false,
  fimPre: -1,
  fimSuf: -1,
  fimMid: -1,
  chatTemplate: null,
};

/** A model without weights: the tokenizer above, a 256-entry vocabulary, no projector, no chat template. */
export class FakeHost implements EngineHost {
  readonly names: readonly string[];
  readonly modelPath = "/nonexistent/fake-model.gguf";
  readonly info = FAKE_INFO;
  readonly chatTemplate = null;
  readonly created = 1_700_000_000;
  readonly vocabulary = new TokenVocabulary(
    Array.from({ length: 256 }, (_, id) => String.fromCharCode(id)),
    [3],
    "llama",
  );
  readonly contextSize: number;
  readonly placement = { backend: "CPU", devices: [], offloadedLayers: 0, layers: 1, skipped: [] };
  /** As a 256-cell f16 cache of one 64-wide layer: 256 x 64 x 2 bytes each for K and V. */
  readonly kvCache = {
    typeK: "f16",
    typeV: "f16",
    flashAttn: false,
    kBytes: 32_768,
    vBytes: 32_768,
  } as const;
  readonly pooling = "mean" as const;
  readonly projector = null;
  readonly imageMarker = null;
  readonly infillTokens = null;
  readonly bosText = "";
  readonly eosText = "\u0000";

  /** What it serves (`--task`); absent: a generative model. */
  readonly task?: ModelTask;

  /** A fake model served under `names` with `contextSize` tokens of context, serving `task`. */
  constructor(names: readonly string[], contextSize: number, task?: ModelTask) {
    this.names = names;
    this.contextSize = contextSize;
    if (task !== undefined) this.task = task;
  }

  /** The model id (the first served name). */
  get id(): string {
    return this.names[0] as string;
  }

  /** 256: every code unit below 256 is a token. */
  get vocabularySize(): number {
    return this.info.nVocab;
  }

  /** Never: the fake has no projector. */
  get acceptsImages(): boolean {
    return false;
  }

  /** One token per character (see {@link fakeTokenize}); no BOS. */
  tokenize(text: string, _addSpecialTokens: boolean): number[] {
    return fakeTokenize(text);
  }

  /** `tokens` as they are: the fake model has no BOS. */
  withBos(tokens: number[], _addSpecialTokens: boolean): number[] {
    return tokens;
  }

  /** The text of `tokens` (see {@link fakeDetokenize}). */
  detokenize(tokens: readonly number[]): string {
    return fakeDetokenize(tokens);
  }
}

/** The fake scheduler: every submission runs at once (no queue), one token per event-loop turn. */
export class FakeEngine implements EngineModel {
  readonly host: FakeHost;
  /** The requests submitted so far, in order (for assertions on what serving built). */
  readonly submitted: GenerationRequest[] = [];
  private readonly options: FakeEngineOptions;
  private running = 0;

  /** A fake engine scripted by `options`. */
  constructor(options: FakeEngineOptions = {}) {
    this.options = options;
    this.host = new FakeHost(options.names ?? ["fake-model"], options.contextSize ?? 256, options.task);
  }

  /** Generations in progress. */
  get runningCount(): number {
    return this.running;
  }

  /** Always 0: nothing waits. */
  get waitingCount(): number {
    return 0;
  }

  /** Always 0: there is no KV cache. */
  kvCacheUsage(): number {
    return 0;
  }

  /** Refuses with `QueueFullError` when the options say the queue is full. */
  assertCapacity(_count: number): void {
    if (this.options.full) throw new QueueFullError(0);
  }

  /** Runs one generation at once: the scripted text, one token per event-loop turn. */
  async submit(
    request: GenerationRequest,
    observer: GenerationObserver,
    signal?: AbortSignal,
  ): Promise<GenerationResult> {
    this.assertCapacity(1);
    this.submitted.push(request);
    this.running += 1;
    try {
      return await this.generate(request, observer, signal);
    } finally {
      this.running -= 1;
    }
  }

  private async generate(
    request: GenerationRequest,
    observer: GenerationObserver,
    signal: AbortSignal | undefined,
  ): Promise<GenerationResult> {
    const promptTokens = request.promptTokens.length;
    const base = { promptTokens, cachedTokens: 0, cumulativeLogprob: Number.NaN };
    if (request.embed) {
      return {
        ...base,
        finishReason: "stop",
        stopReason: null,
        completionTokens: 0,
        // Rank pooling: one score, the prompt's length; other pooling: a fixed vector.
        embedding: request.embed === "rank" ? Float32Array.of(promptTokens) : Float32Array.of(1, 2, 2, 0),
      };
    }
    observer.onStart?.();
    const script = this.options.text ?? "Hello, world!";
    const text = typeof script === "function" ? script(request) : script;
    let generated = ""; // the text of the tokens so far
    let sent = 0; // how much of it the observer has (text that may become a stop string is held back)
    let completionTokens = 0;
    for (const token of fakeTokenize(text)) {
      await new Promise((resolve) => setImmediate(resolve));
      if (signal?.aborted) {
        return {
          ...base,
          finishReason: "abort",
          stopReason: null,
          completionTokens,
          abortReason: signal.reason,
        };
      }
      const failure = this.options.failAfter;
      if (failure && completionTokens >= failure.tokens) throw failure.error;
      if (completionTokens >= request.maxTokens) break;
      completionTokens += 1;
      generated += fakeDetokenize([token]);
      const stop = request.stop.find((candidate) => generated.includes(candidate));
      if (stop !== undefined) {
        const end = generated.indexOf(stop) + (request.includeStopStrInOutput ? stop.length : 0);
        if (end > sent) observer.onDelta({ text: generated.slice(sent, end), tokenIds: [token] });
        return { ...base, finishReason: "stop", stopReason: stop, completionTokens };
      }
      const safe = generated.length - heldBack(generated, request.stop);
      observer.onDelta({
        text: generated.slice(sent, safe),
        tokenIds: [token],
        ...(request.logprobs !== null ? { logprobs: [fakeLogprob(token, request.logprobs)] } : {}),
      });
      sent = safe;
    }
    if (sent < generated.length) observer.onDelta({ text: generated.slice(sent), tokenIds: [] });
    const finishReason =
      completionTokens >= request.maxTokens && completionTokens < text.length ? "length" : "stop";
    return { ...base, finishReason, stopReason: null, completionTokens };
  }
}

/** How many characters at the end of `text` may still become one of `stops` (held back, as `StopMatcher` does). */
function heldBack(text: string, stops: readonly string[]): number {
  let longest = 0;
  for (const stop of stops) {
    for (let length = Math.min(stop.length - 1, text.length); length > longest; length--) {
      if (text.endsWith(stop.slice(0, length))) longest = length;
    }
  }
  return longest;
}

/** A token's fake logprob: rank 1, -0.5, and `top` alternatives after it. */
function fakeLogprob(id: number, top: number): TokenLogprob {
  return {
    id,
    logprob: -0.5,
    rank: 1,
    top: Array.from({ length: top }, (_, k) => ({ id: k === 0 ? id : 32 + k, logprob: -0.5 - k })),
  };
}

/** An app context serving the given fake engines (default: one). */
export function fakeContext(...engines: FakeEngine[]): AppContext & { registry: ModelRegistry<FakeEngine> } {
  const registry = new ModelRegistry<FakeEngine>();
  for (const engine of engines.length > 0 ? engines : [new FakeEngine()]) registry.add(engine);
  return { registry, seeds: new SeedSource(0), isReady: () => true };
}

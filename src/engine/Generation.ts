import { IncrementalDetokenizer } from "./IncrementalDetokenizer.ts";
import type { ModelHost } from "./ModelHost.ts";
import { StopMatcher } from "./StopMatcher.ts";
import type {
  FinishReason,
  GenerationObserver,
  GenerationRequest,
  GenerationResult,
  TokenLogprob,
} from "./types.ts";

/**
 * One generation's state on its slot, advanced by the scheduler's steps: which prompt tokens are still
 * to be evaluated, which tokens go into the next step, and everything after sampling — detokenization
 * (UTF-8 safe), stop strings held back (see {@link StopMatcher}), EOS, stop token ids, `min_tokens`,
 * `max_tokens`, the context's end, injected tokens, logprobs — down to the deltas for the observer and
 * the final {@link GenerationResult}.
 */
export class Generation {
  readonly request: GenerationRequest;
  /** Prompt tokens already in the KV cache (prefix cache) when the generation started. */
  readonly cachedTokens: number;
  /** Index of the next prompt token to evaluate; `promptTokens.length` once the prompt is in. */
  prefilled: number;
  /** Tokens to evaluate in the next step after the prompt: the last sampled token and any injected ones. */
  pending: number[] = [];
  /** Why it ended, once it has. */
  finishReason: FinishReason | null = null;
  /** The pooled embedding so far (an `embed` request). */
  private embedding: Float32Array | undefined;
  /** Set with a prompt-logprobs request: entry i is prompt token i's (the first is null). */
  readonly promptLogprobs: (TokenLogprob | null)[] | undefined;

  private readonly host: ModelHost;
  private readonly observer: GenerationObserver;
  private readonly detokenizer: IncrementalDetokenizer;
  private readonly stopMatcher: StopMatcher;
  private readonly stopTokenIds: ReadonlySet<number>;
  private readonly generated: number[] = [];
  private decodedLength = 0;
  private pendingTokenIds: number[] = [];
  private pendingLogprobs: TokenLogprob[] = [];
  private cumulativeLogprob: number;
  private stopReason: string | number | null = null;
  private abortReason: unknown;
  /** Called with injected tokens before they are evaluated (the native sampler's accept). */
  private readonly acceptInjected: (tokens: readonly number[]) => void;
  /** Jump-forward: the tokens the grammar forces next, already accepted by the sampler (at most the argument). */
  private readonly forcedTokens: ((maxTokens: number) => readonly number[]) | undefined;

  /**
   * @param cachedTokens prompt tokens whose KV state is reused (the first `cachedTokens` of the prompt).
   * @param acceptInjected feeds injected tokens to the sequence's sampler; throws when its grammar refuses them.
   * @param forcedTokens jump-forward (`--jump-forward`, a request with a grammar): the tokens its grammar
   *   forces after a sampled token, at most the given count, already accepted by the sampler; absent: off.
   */
  constructor(
    host: ModelHost,
    request: GenerationRequest,
    observer: GenerationObserver,
    cachedTokens: number,
    acceptInjected: (tokens: readonly number[]) => void,
    forcedTokens?: (maxTokens: number) => readonly number[],
  ) {
    this.host = host;
    this.request = request;
    this.observer = observer;
    this.cachedTokens = cachedTokens;
    this.prefilled = cachedTokens;
    this.acceptInjected = acceptInjected;
    this.forcedTokens = forcedTokens;
    this.detokenizer = new IncrementalDetokenizer(
      // The native detokenizer renders special tokens only without context tokens.
      request.renderSpecialTokens
        ? (tokens) => host.detokenize(tokens, [], true)
        : (tokens, lastTokens) => host.detokenize(tokens, lastTokens),
      // Image placeholders (negative ids) are no detokenizer context.
      request.promptTokens.slice(-4).filter((token) => token >= 0),
    );
    this.stopMatcher = new StopMatcher(request.stop, request.includeStopStrInOutput);
    this.stopTokenIds = new Set(request.stopTokenIds);
    this.cumulativeLogprob = request.logprobs === null ? Number.NaN : 0;
    this.promptLogprobs = request.promptLogprobs === null ? undefined : [null];
  }

  /** Whether the prompt is still being evaluated. */
  get prefilling(): boolean {
    return this.prefilled < this.request.promptTokens.length;
  }

  /** Completion tokens so far. */
  get completionTokens(): number {
    return this.generated.length;
  }

  /**
   * Adds the hidden state of prompt position `position` to an `embed` request's pooled embedding; the
   * last position ends the generation.
   */
  addEmbedding(position: number, vector: Float32Array): void {
    const pooling = this.request.embed;
    const last = this.request.promptTokens.length - 1;
    if (pooling === "mean") {
      this.embedding ??= new Float32Array(vector.length);
      const sum = this.embedding;
      for (let index = 0; index < vector.length; index++) {
        sum[index] = (sum[index] ?? 0) + (vector[index] as number) / (last + 1);
      }
    } else if ((pooling === "cls" && position === 0) || (pooling === "last" && position === last)) {
      this.embedding = Float32Array.from(vector);
    }
    if (position === last) this.finishReason = "stop";
  }

  /** Records a prompt token's logprob (from the step's prompt rows, in order). */
  addPromptLogprob(logprob: TokenLogprob): void {
    this.promptLogprobs?.push(logprob);
  }

  /** Ends the generation as aborted (client gone, timeout, shutdown) with the signal's reason. */
  abort(reason: unknown): void {
    if (this.finishReason !== null) return;
    this.finishReason = "abort";
    this.abortReason = reason;
  }

  /**
   * Handles a sampled token: appends it, emits its text (held back while a stop string may still
   * match), and decides whether the generation ends; otherwise sets {@link pending} for the next step,
   * with any tokens `request.injectTokens` asks for.
   * @throws Error when the grammar refuses injected tokens (a server bug: the serving layer only injects
   *   text its grammars allow).
   */
  onToken(token: number, logprob: TokenLogprob | undefined): void {
    const { request } = this;
    this.generated.push(token);
    this.pendingTokenIds.push(token);
    if (logprob) {
      this.pendingLogprobs.push({ ...logprob, textOffset: this.decodedLength });
      this.cumulativeLogprob += logprob.logprob;
    }
    const counted = this.generated.length >= request.minTokens;
    if (this.host.isEndOfGeneration(token) && !request.ignoreEos && counted) {
      this.finishReason = "stop";
      return;
    }
    if (this.stopTokenIds.has(token) && counted) {
      this.finishReason = "stop";
      this.stopReason = token;
      // Release held-back text; the stop token's own text only with include_stop_str_in_output (vLLM).
      const tail = (request.includeStopStrInOutput ? this.decode(token) : "") + this.detokenizer.flush();
      const match = this.stopMatcher.push(tail);
      if (match.stop !== null) this.stopReason = match.stop;
      this.emit(match.stop !== null ? match.text : match.text + this.stopMatcher.flush());
      return;
    }
    const text = this.decode(token);
    const match = counted ? this.stopMatcher.push(text) : { text, stop: null };
    if (match.stop !== null) {
      this.emit(match.text);
      this.finishReason = "stop";
      this.stopReason = match.stop;
      return;
    }
    if (match.text.length > 0) this.emit(match.text);
    const injected = this.inject();
    if (this.finishReason !== null) return;
    if (this.atLimit()) {
      this.finishReason = "length";
      return;
    }
    const forced = this.jumpForward();
    if (this.finishReason !== null) return;
    if (this.atLimit()) {
      this.finishReason = "length";
      return;
    }
    this.pending = [token, ...injected, ...forced];
  }

  /** The final result; releases what the detokenizer and the stop matcher held back (unless aborted). */
  finish(): GenerationResult {
    const { request } = this;
    this.finishReason ??= "stop";
    if (this.finishReason !== "abort" && this.stopReason === null) {
      // A stop string may still complete with the held-back text.
      const match = this.stopMatcher.push(this.detokenizer.flush());
      if (match.stop !== null) {
        this.finishReason = "stop";
        this.stopReason = match.stop;
        this.emit(match.text);
      } else this.emit(match.text + this.stopMatcher.flush());
    }
    this.emit("");
    return {
      finishReason: this.finishReason,
      stopReason: this.stopReason,
      promptTokens: request.promptTokens.length,
      completionTokens: this.generated.length,
      cachedTokens: this.cachedTokens,
      cumulativeLogprob: this.cumulativeLogprob,
      ...(this.promptLogprobs ? { promptLogprobs: this.promptLogprobs } : {}),
      ...(this.embedding ? { embedding: this.embedding } : {}),
      ...(this.finishReason === "abort" ? { abortReason: this.abortReason } : {}),
    };
  }

  private atLimit(): boolean {
    const { request } = this;
    return (
      this.generated.length >= request.maxTokens ||
      request.promptTokens.length + this.generated.length >= this.host.contextSize
    );
  }

  private decode(token: number): string {
    const text = this.detokenizer.push(token);
    this.decodedLength += text.length;
    return text;
  }

  private emit(text: string): void {
    if (text.length === 0 && this.pendingTokenIds.length === 0) return;
    this.observer.onDelta({
      text,
      tokenIds: this.pendingTokenIds,
      ...(this.request.logprobs !== null ? { logprobs: this.pendingLogprobs } : {}),
    });
    this.pendingTokenIds = [];
    this.pendingLogprobs = [];
  }

  /**
   * Jump-forward: appends the tokens the grammar forces next (as many as fit) as completion tokens.
   */
  private jumpForward(): number[] {
    if (!this.forcedTokens) return [];
    const room = this.room();
    if (room <= 0) return [];
    return this.appendUnsampled([...this.forcedTokens(room)]);
  }

  /**
   * Appends tokens that were not sampled (forced by the grammar, or injected) as completion tokens, up to
   * a stop string they complete (which ends the generation). With logprobs each is reported with logprob
   * 0 and rank 1 (probability 1: nothing else could come there), its own entry as the only top logprob.
   * @returns the tokens appended.
   */
  private appendUnsampled(tokens: number[]): number[] {
    const { request } = this;
    for (const [index, token] of tokens.entries()) {
      this.generated.push(token);
      this.pendingTokenIds.push(token);
      if (request.logprobs !== null) {
        const top = request.logprobs > 0 ? [{ id: token, logprob: 0 }] : [];
        this.pendingLogprobs.push({ id: token, logprob: 0, rank: 1, top, textOffset: this.decodedLength });
      }
      const text = this.decode(token);
      const match =
        this.generated.length >= request.minTokens ? this.stopMatcher.push(text) : { text, stop: null };
      this.emit(match.text);
      if (match.stop !== null) {
        this.finishReason = "stop";
        this.stopReason = match.stop;
        return tokens.slice(0, index + 1);
      }
    }
    return tokens;
  }

  /** Completion tokens that still fit (`max_tokens` and the context). */
  private room(): number {
    const { request } = this;
    return (
      Math.min(request.maxTokens, this.host.contextSize - request.promptTokens.length) - this.generated.length
    );
  }

  /** Appends the tokens `request.injectTokens` asks for (as many as fit); sets finishReason when a stop string ends the generation. */
  private inject(): number[] {
    const { request } = this;
    const wanted = request.injectTokens?.();
    if (!wanted || wanted.length === 0) return [];
    const injected = wanted.slice(0, Math.max(this.room(), 0));
    this.acceptInjected(injected);
    return this.appendUnsampled(injected);
  }
}

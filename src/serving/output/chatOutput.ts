/**
 * One chat choice's output: the generated text goes through the choice's output parser chain
 * (`chat/outputParser.ts`: reasoning, then tool calls) as it is produced, the same way for streamed and
 * non-streamed responses, and comes out as OpenAI's `message` or streaming `delta`s.
 */
import {
  type ChatOutputParser,
  OutputAccumulator,
  type ParserDelta,
  thinkingBudgetClose,
  toOpenAIToolCallDelta,
} from "../../chat/index.ts";
import type { GenerationResult } from "../../engine/types.ts";
import type { ChatChoice, ChatChunkChoice } from "../../protocol/chat.ts";
import { finishReasonOf } from "./streaming.ts";

/**
 * A response message: OpenAI's, plus `reasoning_content` and `reasoning` (the same text: vLLM's older
 * and newer names, so clients reading either find it) when a reasoning parser is active.
 */
export type ChatMessageOut = ChatChoice["message"] & { reasoning?: string | null };

/** A streaming delta, with `reasoning` beside `reasoning_content` as in {@link ChatMessageOut}. */
export type ChatDeltaOut = ChatChunkChoice["delta"] & { reasoning?: string | null };

/** Options of {@link ChoiceOutput}. */
export type ChoiceOutputOptions = {
  /** `parallel_tool_calls`: when false, calls after the first are dropped (as vLLM does). */
  parallelToolCalls: boolean;
  /**
   * A forced `tool_choice` (`"required"` or named): the grammar admits only the call(s), so any text
   * that is not a parsed call is a call cut short (by `max_tokens`) and is kept out of `content`, as
   * vLLM does for a truncated forced call; the choice then finishes with `length`. Defaults to false.
   */
  forcedToolCall?: boolean;
};

/**
 * The output of one choice. Feed it the generated text in order (`feed`), then `end()` once; both
 * return what to stream. `message()` is the non-streamed message, built from exactly the same deltas.
 */
export class ChoiceOutput {
  private readonly accumulator = new OutputAccumulator();
  private calls = 0;

  constructor(
    readonly parser: ChatOutputParser,
    private readonly options: ChoiceOutputOptions,
  ) {}

  /** True when a reasoning parser is active (the message then carries the reasoning fields). */
  get reasoning(): boolean {
    return this.parser.reasoning !== undefined;
  }

  /** True once at least one tool call was parsed. */
  get hasToolCalls(): boolean {
    return this.calls > 0;
  }

  /** Takes the next generated text; returns what is decided so far. */
  feed(text: string): ParserDelta {
    return this.keep(this.parser.feed(text));
  }

  /** Generation ended: returns what the parsers held back. Call once. */
  end(): ParserDelta {
    return this.keep(this.parser.end());
  }

  private keep(delta: ParserDelta): ParserDelta {
    if (this.options.forcedToolCall) delete delta.content;
    if (delta.toolCalls) {
      const calls = this.options.parallelToolCalls
        ? delta.toolCalls
        : delta.toolCalls.filter((call) => call.index === 0);
      if (calls.length > 0) delta.toolCalls = calls;
      else delete delta.toolCalls;
      this.calls += calls.filter((call) => call.id !== undefined).length;
    }
    this.accumulator.add(delta);
    return delta;
  }

  /**
   * The `nvext.max_thinking_tokens` hook (`GenerationRequest.injectTokens`): called after each sampled
   * token, counts the tokens generated while the output is inside the thinking block, and once `budget`
   * of them were spent while still inside it, returns `closeTokens` (the reasoning parser's `closeText`
   * tokenized) once, so the model goes on with its answer.
   */
  thinkingBudget(budget: number, closeTokens: readonly number[]): () => readonly number[] | undefined {
    let spent = 0;
    let closed = false;
    const reasoning = this.parser.reasoning;
    return () => {
      if (closed || !reasoning) return undefined;
      if (reasoning.inReasoning()) spent++;
      if (thinkingBudgetClose(reasoning, spent, budget) === undefined) return undefined;
      closed = true;
      return closeTokens;
    };
  }

  /**
   * The non-streamed message: `content` (null when empty beside tool calls or reasoning, or for a
   * forced tool call, else the text, `""` included), `tool_calls` when there are any, and both reasoning fields when a reasoning parser
   * is active.
   */
  message(): ChatMessageOut {
    const parsed = this.accumulator.result();
    const empty =
      parsed.toolCalls.length > 0 || parsed.reasoning !== null || this.options.forcedToolCall === true;
    const message: ChatMessageOut = { role: "assistant", content: parsed.content ?? (empty ? null : "") };
    if (this.reasoning) {
      message.reasoning_content = parsed.reasoning;
      message.reasoning = parsed.reasoning;
    }
    if (parsed.toolCalls.length > 0) message.tool_calls = parsed.toolCalls;
    return message;
  }

  /**
   * The API's `finish_reason`: `length` whenever `max_tokens` or the context cut the output (also after
   * complete calls, so a client sees that a later call may be missing, as OpenAI reports a cut output),
   * else `tool_calls` when calls were returned, else the generation's.
   */
  finishReason(result: GenerationResult): ChatChoice["finish_reason"] {
    const generated = finishReasonOf(result);
    if (generated === "length") return generated;
    return this.hasToolCalls ? "tool_calls" : generated;
  }

  /**
   * A parser delta as streaming deltas, in this order: reasoning (`reasoning_content` and `reasoning`),
   * content, tool calls (OpenAI's fragment shape: `id`, `type`, `function.name` and the whole
   * `arguments` in one fragment, since the parsers emit each call once complete). Empty when the delta
   * carries nothing.
   */
  streamDeltas(delta: ParserDelta): ChatDeltaOut[] {
    const out: ChatDeltaOut[] = [];
    if (delta.reasoning) out.push({ reasoning_content: delta.reasoning, reasoning: delta.reasoning });
    if (delta.content) out.push({ content: delta.content });
    if (delta.toolCalls && delta.toolCalls.length > 0) {
      out.push({ tool_calls: delta.toolCalls.map(toOpenAIToolCallDelta) });
    }
    return out;
  }
}

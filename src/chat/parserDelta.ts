/**
 * The one shape every output parser (tool calls, reasoning, and both chained) produces, and the helpers
 * that turn it into OpenAI's streaming `delta` and non-streaming `message` fields.
 */

/**
 * One fragment of one tool call, mapping 1:1 onto an entry of OpenAI's streaming
 * `choices[].delta.tool_calls[]` (see {@link toOpenAIToolCallDelta}).
 *
 * Invariant kept by every parser in this folder: the FIRST fragment of a call carries `id` and `name`
 * (OpenAI's `id`, `type: "function"` and `function.name`); later fragments of the same `index` carry only
 * `argumentsDelta`. Concatenating a call's `argumentsDelta`s in order gives its complete `arguments` JSON
 * text. `index` counts calls from 0 within one choice, in the order the model wrote them.
 */
export type ToolCallDelta = {
  /** Position of the call among this choice's calls (OpenAI's `tool_calls[].index`). */
  index: number;
  /** The call id (`call_` + 24 characters); only on the first fragment of a call. */
  id?: string;
  /** The function name; only on the first fragment of a call. */
  name?: string;
  /** The next piece of the call's `arguments` JSON text. */
  argumentsDelta?: string;
};

/**
 * What one `feed()` or `end()` of a parser adds to the response: each field is present only when it has
 * something (an empty object means "nothing yet"). `content` and `reasoning` are text to append to the
 * message's `content` / `reasoning_content`; `toolCalls` are fragments in the order to send them.
 */
export type ParserDelta = {
  content?: string;
  reasoning?: string;
  toolCalls?: ToolCallDelta[];
};

/**
 * An incremental parser of model output. `feed` takes the next piece of generated text (any split, even
 * one character) and returns what can already be decided; `end` flushes what was held back once
 * generation stopped. Feeding a text whole or split at any boundary yields the same accumulated result.
 */
export interface StreamParser {
  /** Takes the next piece of generated text; returns what is decided so far. */
  feed(delta: string): ParserDelta;
  /** Generation stopped: flushes (or falls back) whatever was held back. */
  end(): ParserDelta;
}

/**
 * The shared frame of a {@link StreamParser} that builds its own {@link ParserDelta}: text accumulates in
 * `buf`, `run(final)` moves what is decided into `delta`, and each `feed` / `end` hands the delta over and
 * starts a new one. Subclasses implement `run` as their own state machine.
 */
export abstract class BufferedStreamParser implements StreamParser {
  /** Text received and not yet decided. */
  protected buf = "";
  /** What is decided since the last `feed` / `end`. */
  protected delta: ParserDelta = {};

  /** Takes the next piece of generated text; returns what is decided so far. */
  feed(delta: string): ParserDelta {
    this.buf += delta;
    this.run(false);
    return this.take();
  }

  /** Generation stopped: flushes (or falls back) whatever was held back. */
  end(): ParserDelta {
    this.run(true);
    return this.take();
  }

  /** Advances the state machine over `buf`; with `final`, nothing more will come. */
  protected abstract run(final: boolean): void;

  private take(): ParserDelta {
    const out = this.delta;
    this.delta = {};
    return out;
  }
}

/** OpenAI's streaming tool-call fragment (`choices[].delta.tool_calls[]`). */
export type OpenAIToolCallDelta = {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
};

/** A complete tool call as OpenAI's non-streaming `choices[].message.tool_calls[]` holds it. */
export type OpenAIToolCall = {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
};

/**
 * Maps a {@link ToolCallDelta} onto OpenAI's streaming fragment: the first fragment gets `id`,
 * `type: "function"` and `function.name` (with `arguments: ""` when it carries none, as OpenAI sends);
 * later fragments carry only `function.arguments`.
 */
export function toOpenAIToolCallDelta(delta: ToolCallDelta): OpenAIToolCallDelta {
  const args = delta.argumentsDelta ?? "";
  if (delta.id === undefined) return { index: delta.index, function: { arguments: args } };
  return {
    index: delta.index,
    id: delta.id,
    type: "function",
    function: { name: delta.name ?? "", arguments: args },
  };
}

/** True when the delta carries nothing. */
export function isEmptyDelta(delta: ParserDelta): boolean {
  return !delta.content && !delta.reasoning && !(delta.toolCalls && delta.toolCalls.length > 0);
}

/** Concatenates deltas in order into one (content and reasoning appended, tool-call fragments listed). */
export function mergeDeltas(...deltas: ParserDelta[]): ParserDelta {
  const out: ParserDelta = {};
  for (const delta of deltas) {
    if (delta.reasoning) out.reasoning = (out.reasoning ?? "") + delta.reasoning;
    if (delta.content) out.content = (out.content ?? "") + delta.content;
    if (delta.toolCalls && delta.toolCalls.length > 0)
      out.toolCalls = [...(out.toolCalls ?? []), ...delta.toolCalls];
  }
  return out;
}

/**
 * The whole of a parsed output, as the non-streaming response's message needs it: `content` and
 * `reasoning` are `null` when nothing was produced (OpenAI's `content: null` beside tool calls).
 */
export type ParsedOutput = {
  content: string | null;
  reasoning: string | null;
  toolCalls: OpenAIToolCall[];
};

/** Accumulates deltas into a {@link ParsedOutput}; used for non-streaming responses and by tests. */
export class OutputAccumulator {
  private content = "";
  private reasoning = "";
  private readonly calls: OpenAIToolCall[] = [];

  /** Appends one delta. Throws when a fragment names an index whose first fragment never came. */
  add(delta: ParserDelta): void {
    if (delta.content) this.content += delta.content;
    if (delta.reasoning) this.reasoning += delta.reasoning;
    for (const fragment of delta.toolCalls ?? []) {
      let call = this.calls[fragment.index];
      if (!call) {
        if (fragment.id === undefined || fragment.index !== this.calls.length) {
          throw new Error(`tool call fragment ${fragment.index} arrived before its first fragment`);
        }
        call = { id: fragment.id, type: "function", function: { name: fragment.name ?? "", arguments: "" } };
        this.calls.push(call);
      }
      call.function.arguments += fragment.argumentsDelta ?? "";
    }
  }

  /** The accumulated result so far. */
  result(): ParsedOutput {
    return {
      content: this.content === "" ? null : this.content,
      reasoning: this.reasoning === "" ? null : this.reasoning,
      toolCalls: this.calls.map((call) => ({ ...call, function: { ...call.function } })),
    };
  }
}

/** Feeds `chunks` in order to `parser`, ends it, and returns the accumulated result. */
export function parseAll(parser: StreamParser, chunks: readonly string[]): ParsedOutput {
  const acc = new OutputAccumulator();
  for (const chunk of chunks) acc.add(parser.feed(chunk));
  acc.add(parser.end());
  return acc.result();
}

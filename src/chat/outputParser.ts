/**
 * The chain the engine runs on generated text: a reasoning parser first (its `content` goes on), then a
 * tool-call parser, merged into one {@link ParserDelta} per feed.
 */
import type { ParserDelta, StreamParser } from "./parserDelta.ts";
import { mergeDeltas } from "./parserDelta.ts";
import {
  createReasoningParser,
  type ReasoningParser,
  resolveReasoningParserName,
} from "./reasoningParsers/index.ts";
import {
  createToolParser,
  resolveToolParserName,
  type ToolParser,
  type ToolParserOptions,
} from "./toolParsers/index.ts";

/**
 * Reasoning parser, then tool parser; either may be absent (text then passes through as content).
 * Tool markup inside reasoning stays reasoning (llama.cpp and vLLM do the same).
 */
export class ChatOutputParser implements StreamParser {
  readonly reasoning: ReasoningParser | undefined;
  readonly tools: ToolParser | undefined;

  constructor(parts: { reasoning?: ReasoningParser; tools?: ToolParser }) {
    this.reasoning = parts.reasoning;
    this.tools = parts.tools;
  }

  /** Takes the next piece of generated text; returns what is decided so far. */
  feed(delta: string): ParserDelta {
    const first = this.reasoning ? this.reasoning.feed(delta) : { content: delta };
    return this.pass(first, false);
  }

  /** Generation stopped: flushes (or falls back) whatever was held back. */
  end(): ParserDelta {
    return this.pass(this.reasoning ? this.reasoning.end() : {}, true);
  }

  /** True while the output is inside reasoning (false without a reasoning parser). */
  inReasoning(): boolean {
    return this.reasoning?.inReasoning() ?? false;
  }

  private pass(first: ParserDelta, final: boolean): ParserDelta {
    // The Harmony reasoning parser reads tool calls too: they pass on as they are.
    const reasoning: ParserDelta = {
      ...(first.reasoning ? { reasoning: first.reasoning } : {}),
      ...(first.toolCalls && first.toolCalls.length > 0 ? { toolCalls: first.toolCalls } : {}),
    };
    if (!this.tools) return mergeDeltas(reasoning, first.content ? { content: first.content } : {});
    const fed = this.tools.feed(first.content ?? "");
    return mergeDeltas(reasoning, fed, final ? this.tools.end() : {});
  }
}

/** What {@link createChatOutputParser} takes: parser names as configured or detected, and their options. */
export type ChatOutputParserOptions = ToolParserOptions & {
  /** A reasoning parser name (one of `REASONING_PARSER_NAMES` or an alias), or none. */
  reasoningParser?: string;
  /** A tool parser name (one of `TOOL_PARSER_NAMES` or an alias), or none (e.g. `tool_choice: "none"`). */
  toolParser?: string;
  /** Whether the prompt opened the thinking block (`promptThinkingState(prompt, …)`); default per reasoning parser. */
  startsInThinking?: boolean;
  /** Whether the prompt closed the thinking block: the output is all content. Default false. */
  thinkingClosed?: boolean;
};

/**
 * Builds the chain for one choice. With the Harmony reasoning parser (`openai_gptoss`), the `openai`
 * tool parser is the same parser (it reads the calls from the channels); with another tool parser or
 * none, Harmony's calls are content and its final channel goes on to that tool parser.
 * Throws an `Error` for an unknown parser name.
 */
export function createChatOutputParser(options: ChatOutputParserOptions): ChatOutputParser {
  const { reasoningParser, toolParser, startsInThinking, thinkingClosed, ...toolOptions } = options;
  const parts: { reasoning?: ReasoningParser; tools?: ToolParser } = {};
  const harmonyCalls =
    reasoningParser !== undefined &&
    resolveReasoningParserName(reasoningParser) === "openai_gptoss" &&
    toolParser !== undefined &&
    resolveToolParserName(toolParser) === "openai";
  if (reasoningParser) {
    parts.reasoning = createReasoningParser(reasoningParser, {
      ...(startsInThinking !== undefined ? { startsInThinking } : {}),
      ...(thinkingClosed !== undefined ? { thinkingClosed } : {}),
      ...(toolOptions.newId !== undefined ? { newId: toolOptions.newId } : {}),
      parseCalls: harmonyCalls,
    });
  }
  if (toolParser && !harmonyCalls) parts.tools = createToolParser(toolParser, toolOptions);
  return new ChatOutputParser(parts);
}

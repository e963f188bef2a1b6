/**
 * The chat layer's public API: message normalisation, chat-template rendering, forced
 * tool-call schemas, and the incremental output parsers (tool calls, reasoning, and the two chained).
 */
export { normalizeMessages, type TemplateMessage, type TemplateToolCall } from "./messages.ts";
export { ChatOutputParser, type ChatOutputParserOptions, createChatOutputParser } from "./outputParser.ts";
export {
  isEmptyDelta,
  mergeDeltas,
  type OpenAIToolCall,
  type OpenAIToolCallDelta,
  OutputAccumulator,
  type ParsedOutput,
  type ParserDelta,
  parseAll,
  type StreamParser,
  type ToolCallDelta,
  toOpenAIToolCallDelta,
} from "./parserDelta.ts";
export {
  createReasoningParser,
  detectReasoningParser,
  isReasoningParserName,
  promptOpensThinking,
  promptThinkingState,
  REASONING_FAMILIES,
  REASONING_PARSER_NAMES,
  type ReasoningParser,
  type ReasoningParserName,
  resolveReasoningParserName,
  type ThinkingMarkup,
  thinkingBudgetClose,
  thinkingMarkup,
} from "./reasoningParsers/index.ts";
export {
  CHATML_FALLBACK_TEMPLATE,
  promptStartsWithBos,
  type RenderChatTemplateContext,
  renderChatTemplate,
} from "./renderChatTemplate.ts";
export {
  createToolParser,
  detectToolParser,
  newToolCallId,
  resolveToolParserName,
  TOOL_PARSER_NAMES,
  type ToolParser,
  type ToolParserName,
  type ToolParserOptions,
} from "./toolParsers/index.ts";
export { type JsonSchema, toolChoiceToJsonSchema } from "./toolSchema.ts";

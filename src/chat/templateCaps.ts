/**
 * What a chat template can render, found once per template text by rendering small probe conversations
 * (as llama.cpp's `common_chat_templates` caps: `supports_system_role`, `supports_tools`,
 * `supports_tool_calls`, `supports_parallel_tool_calls`, `requires_object_arguments`), and the polyfills
 * that shape a conversation for a template that would raise on it (as llama.cpp's chat template
 * polyfills): tool calls and tool results written as text, the system prompt merged into the first user
 * turn, tools described in the system prompt (only when asked), consecutive same-role turns merged for templates that demand alternation,
 * tool call ids cut to the 9 alphanumerics Mistral's templates demand (as vLLM does for Mistral).
 */
import type { ChatTool } from "../protocol/tools.ts";
import type { TemplateMessage, TemplateToolCall } from "./messages.ts";

/** The capabilities of one chat template (every field `true` means the template needs no polyfill). */
export type TemplateCaps = {
  /** A `system` message renders (the template does not raise on it, as Gemma 2's does). */
  systemRole: boolean;
  /** The `tools` variable's tool names reach the prompt. */
  tools: boolean;
  /** An assistant message's `tool_calls` render (the template does not raise on them). */
  toolCalls: boolean;
  /** A `tool` message renders (probed with the tool call: the template does not raise on them). */
  toolResponses: boolean;
  /** Two calls in one assistant message both reach the prompt. */
  parallelToolCalls: boolean;
  /** `function.arguments` must be the JSON text: the template renders a string but not an object. */
  stringArguments: boolean;
  /** Two consecutive user turns are refused while alternating turns render (Mistral, Gemma). */
  alternatingRoles: boolean;
  /** Tool call ids must be 9 alphanumerics (Mistral's templates raise otherwise). */
  nineCharToolCallIds: boolean;
};

/** Renders the template with the given variables, throwing when the template fails. */
export type ProbeRenderer = (variables: Record<string, unknown>) => string;
/** {@link ProbeRenderer}, asynchronous (the template sandbox). */
export type AsyncProbeRenderer = (variables: Record<string, unknown>) => Promise<string>;

const NEEDLE = "xq7probe";
const TOOL = `${NEEDLE}_tool`;
const CALL = `${NEEDLE}_call`;
const CALL2 = `${NEEDLE}_second`;
const ARG = `${NEEDLE}_arg`;
const RESULT = `${NEEDLE}_result`;
const SYSTEM = `${NEEDLE}_system`;
const SHORT_ID = "a1b2c3d4e";
const LONG_ID = "call_xq7probe_long_id";

function probeTool(name: string): ChatTool {
  return {
    type: "function",
    function: {
      name,
      description: `Probe ${name}`,
      parameters: { type: "object", properties: { [ARG]: { type: "string" } }, required: [ARG] },
    },
  } as ChatTool;
}

function call(id: string, name: string, stringArgs: boolean): TemplateToolCall {
  const args = { [ARG]: "v" };
  return { id, type: "function", function: { name, arguments: stringArgs ? JSON.stringify(args) : args } };
}

function callConversation(calls: TemplateToolCall[]): TemplateMessage[] {
  return [
    { role: "user", content: "q" },
    { role: "assistant", content: "", tool_calls: calls },
    ...calls.map(
      (c, i): TemplateMessage => ({
        role: "tool",
        content: `${RESULT}${i}`,
        tool_call_id: c.id,
        name: c.function.name,
      }),
    ),
  ];
}

/** The probe renders, in the order {@link capsFromResults} reads them. */
function probeVariables(): Record<string, unknown>[] {
  const tools = [probeTool(CALL), probeTool(CALL2)];
  const base = { add_generation_prompt: true, bos_token: "", eos_token: "", documents: null };
  const conv = (messages: TemplateMessage[], withTools: boolean) => ({
    ...base,
    messages,
    tools: withTools ? tools : null,
  });
  return [
    conv(
      [
        { role: "system", content: SYSTEM },
        { role: "user", content: "q" },
      ],
      false,
    ),
    { ...base, messages: [{ role: "user", content: "q" }], tools: [probeTool(TOOL)] },
    conv(callConversation([call(SHORT_ID, CALL, false)]), true),
    conv(callConversation([call(SHORT_ID, CALL, true)]), true),
    conv(callConversation([call(SHORT_ID, CALL, false), call("f6g7h8i9j", CALL2, false)]), true),
    conv(callConversation([call(LONG_ID, CALL, false)]), true),
    conv(
      [
        { role: "user", content: "q" },
        { role: "user", content: "r" },
      ],
      false,
    ),
    conv(
      [
        { role: "user", content: "q" },
        { role: "assistant", content: "a" },
        { role: "user", content: "r" },
      ],
      false,
    ),
  ];
}

/** A probe's rendered text, or `undefined` when the template failed on it. */
type ProbeResult = string | undefined;

function capsFromResults(results: ProbeResult[]): TemplateCaps {
  const [system, tools, objectCall, stringCall, parallel, longId, twoUsers, alternating] = results;
  const has = (text: ProbeResult, needle: string) => text?.includes(needle) ?? false;
  const anyCall = objectCall ?? stringCall;
  return {
    systemRole: system !== undefined,
    tools: has(tools, TOOL),
    toolCalls: anyCall !== undefined,
    toolResponses: anyCall !== undefined,
    parallelToolCalls: has(parallel, CALL) && has(parallel, CALL2),
    stringArguments: !has(objectCall, ARG) && has(stringCall, ARG),
    alternatingRoles: twoUsers === undefined && alternating !== undefined,
    nineCharToolCallIds: anyCall !== undefined && longId === undefined,
  };
}

const MAX_CACHED = 64;
const capsCache = new Map<string, TemplateCaps>();

function remember(template: string, caps: TemplateCaps): TemplateCaps {
  if (capsCache.size >= MAX_CACHED) {
    const oldest = capsCache.keys().next().value;
    if (oldest !== undefined) capsCache.delete(oldest);
  }
  capsCache.set(template, caps);
  return caps;
}

/**
 * The {@link TemplateCaps} of `template`, probed with `render` on first use and cached by the template
 * text (64 templates at most). A probe the template fails on counts as "not supported"; nothing throws.
 */
export function templateCaps(template: string, render: ProbeRenderer): TemplateCaps {
  const cached = capsCache.get(template);
  if (cached) return cached;
  const results = probeVariables().map((variables): ProbeResult => {
    try {
      return render(variables);
    } catch {
      return undefined;
    }
  });
  return remember(template, capsFromResults(results));
}

/**
 * {@link templateCaps} with an asynchronous renderer (the template sandbox); same cache. The probes run
 * one after another, and a failure `isFatal` accepts (a sandbox limit: time, memory, output) is thrown at
 * once instead of counting as "not supported", so that a hostile template costs one limit, not one per
 * probe. Defaults to no failure being fatal.
 */
export async function templateCapsAsync(
  template: string,
  render: AsyncProbeRenderer,
  isFatal: (error: unknown) => boolean = () => false,
): Promise<TemplateCaps> {
  const cached = capsCache.get(template);
  if (cached) return cached;
  const results: ProbeResult[] = [];
  for (const variables of probeVariables()) {
    try {
      results.push(await render(variables));
    } catch (error) {
      if (isFatal(error)) throw error;
      results.push(undefined);
    }
  }
  return remember(template, capsFromResults(results));
}

/** A conversation shaped for a template: its messages and the tools to pass as `tools`. */
export type ShapedConversation = { messages: TemplateMessage[]; tools: readonly ChatTool[] | null };

/** Options of {@link shapeConversation}. */
export type ShapeOptions = {
  /**
   * Describe the tools in the system prompt when the template renders none (llama.cpp's tools
   * polyfill). Defaults to false: transformers and vLLM pass such a template's prompt unchanged.
   */
  describeTools?: boolean;
};

/**
 * Shapes `messages` and `tools` for a template with `caps`, as llama.cpp's polyfills: with
 * `describeTools`, tools the template renders no trace of are described (as JSON, with the reply format)
 * at the start of the system prompt; tool calls it raises on become a `{"tool_calls": [...]}` JSON text in the assistant's
 * content; tool results it raises on become user messages holding `{"tool_response": {...}}`;
 * a system prompt it refuses is merged into the first user turn (`system + "\n\n" + user`);
 * for a template demanding alternation, consecutive same-role messages are merged with `"\n\n"`. Ids
 * are cut to 9 alphanumerics for Mistral's templates, and arguments passed as JSON text to templates
 * that print them; a tool without `parameters` gets an empty object schema. Messages are copied, never
 * changed in place. `tools` is `null` when there are none.
 */
export function shapeConversation(
  messages: readonly TemplateMessage[],
  tools: readonly ChatTool[] | null | undefined,
  caps: TemplateCaps,
  options: ShapeOptions = {},
): ShapedConversation {
  let out: TemplateMessage[] = messages.map((message) => ({ ...message }));
  const hasTools = tools !== null && tools !== undefined && tools.length > 0;
  if (hasTools && !caps.tools && options.describeTools) out = describeTools(out, tools);
  if (caps.nineCharToolCallIds) out = shortIds(out);
  if (caps.stringArguments) out = out.map(stringArguments);
  if (!caps.toolCalls) out = out.map(callsAsText);
  if (!caps.toolResponses) out = out.map(resultAsUser);
  if (!caps.systemRole) out = systemIntoUser(out);
  if (caps.alternatingRoles) out = mergeSameRole(out);
  return { messages: out, tools: hasTools ? tools.map(withParameters) : null };
}

/**
 * `tool` with `function.parameters` defaulted to an empty object schema when absent (OpenAI: omitting
 * `parameters` defines a function with an empty parameter list); templates such as ByteDance Seed-OSS's
 * iterate `parameters.properties`.
 */
function withParameters(tool: ChatTool): ChatTool {
  if (tool.function.parameters !== undefined && tool.function.parameters !== null) return tool;
  return {
    ...tool,
    function: { ...tool.function, parameters: { type: "object", properties: {} } },
  } as ChatTool;
}

/**
 * The system-prompt text describing `tools` to a template that renders none: the functions as indented
 * JSON and the reply format (llama.cpp's tools polyfill, in our words).
 */
export function toolsSystemText(tools: readonly ChatTool[]): string {
  const functions = JSON.stringify(
    tools.map((tool) => tool.function),
    null,
    2,
  );
  return (
    `You can call the following tools:\n${functions}\n\n` +
    'To call tools, answer with a JSON object: {"tool_calls": [{"name": "<tool name>", "arguments": {<arguments>}}]}'
  );
}

/** An assistant's tool calls as text for a template that renders none: `{"tool_calls": [{name, arguments, id}]}`. */
export function toolCallsText(calls: readonly TemplateToolCall[]): string {
  return JSON.stringify({
    tool_calls: calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments, id: c.id })),
  });
}

/** A tool result as a user message's text for a template with no tool role: `{"tool_response": {...}}`. */
export function toolResponseText(message: TemplateMessage): string {
  const response: Record<string, string> = { content: message.content };
  if (message.name !== undefined) response.tool = message.name;
  if (message.tool_call_id !== undefined) response.tool_call_id = message.tool_call_id;
  return JSON.stringify({ tool_response: response });
}

function describeTools(messages: TemplateMessage[], tools: readonly ChatTool[]): TemplateMessage[] {
  const text = toolsSystemText(tools);
  const first = messages[0];
  if (first?.role === "system") {
    return [{ ...first, content: `${text}\n\n${first.content}` }, ...messages.slice(1)];
  }
  return [{ role: "system", content: text }, ...messages];
}

/** 9 alphanumerics for `id`: its own when it already is, else the last 9 of its alphanumerics, padded. */
function nineChars(id: string): string {
  if (/^[a-zA-Z0-9]{9}$/.test(id)) return id;
  const alnum = id.replace(/[^a-zA-Z0-9]/g, "");
  return alnum.slice(-9).padStart(9, "0");
}

function shortIds(messages: TemplateMessage[]): TemplateMessage[] {
  return messages.map((message) => {
    const out = { ...message };
    if (out.tool_calls) {
      out.tool_calls = out.tool_calls.map((c) => ({ ...c, id: nineChars(c.id) }));
    }
    if (out.tool_call_id !== undefined) out.tool_call_id = nineChars(out.tool_call_id);
    return out;
  });
}

function stringArguments(message: TemplateMessage): TemplateMessage {
  if (!message.tool_calls) return message;
  return {
    ...message,
    tool_calls: message.tool_calls.map((c) => ({
      ...c,
      function: {
        name: c.function.name,
        arguments:
          typeof c.function.arguments === "string"
            ? c.function.arguments
            : JSON.stringify(c.function.arguments),
      },
    })),
  };
}

function callsAsText(message: TemplateMessage): TemplateMessage {
  if (!message.tool_calls || message.tool_calls.length === 0) return message;
  const { tool_calls, ...rest } = message;
  const json = toolCallsText(tool_calls);
  return { ...rest, content: rest.content ? `${rest.content}\n${json}` : json };
}

function resultAsUser(message: TemplateMessage): TemplateMessage {
  if (message.role !== "tool") return message;
  return { role: "user", content: toolResponseText(message) };
}

function systemIntoUser(messages: TemplateMessage[]): TemplateMessage[] {
  const system = messages.filter((m) => m.role === "system").map((m) => m.content);
  if (system.length === 0) return messages;
  const rest = messages.filter((m) => m.role !== "system");
  const text = system.join("\n\n");
  const at = rest.findIndex((m) => m.role === "user");
  if (at < 0) return [{ role: "user", content: text }, ...rest];
  const user = rest[at] as TemplateMessage;
  rest[at] = { ...user, content: user.content ? `${text}\n\n${user.content}` : text };
  return rest;
}

function mergeSameRole(messages: TemplateMessage[]): TemplateMessage[] {
  const out: TemplateMessage[] = [];
  for (const message of messages) {
    const last = out[out.length - 1];
    if (last && last.role === message.role && (message.role === "user" || message.role === "assistant")) {
      const merged: TemplateMessage = {
        ...last,
        content: [last.content, message.content].filter(Boolean).join("\n\n"),
      };
      const calls = [...(last.tool_calls ?? []), ...(message.tool_calls ?? [])];
      if (calls.length > 0) merged.tool_calls = calls;
      out[out.length - 1] = merged;
    } else {
      out.push(message);
    }
  }
  return out;
}

/**
 * The token-delimited, JSON and pythonic tool-call formats, each a {@link DelimitedSyntax} run by
 * {@link DelimitedToolParser}: DeepSeek V3/R1/V3.1 and V3.2/V4 (DSML), Kimi K2, pythonic and LFM2, Granite
 * 3.x, Gemma 4, firefunction v2, Command R / R7B / Cohere2, Apriel, Apertus and GigaChat 3. Formats follow
 * the chat templates in llama.cpp's models/templates and vLLM's parsers of the same name.
 */
import { scanJsonValueEnd } from "../textScan.ts";
import type { DelimitedSyntax } from "./delimited.ts";
import { gemma4Arguments } from "./gemma4.ts";
import { callsFromPythonList, scanPythonValueEnd } from "./pythonic.ts";
import {
  callFromJson,
  callsFromJsonSequence,
  callsFromJsonText,
  callsFromJsonValue,
  type ParsedCall,
} from "./toolParser.ts";

const NAME = /^[A-Za-z_][A-Za-z0-9_.:-]*$/;
const jsonEnd = (text: string): number => scanJsonValueEnd(text, 0);

/** The call `name` with the JSON object `argsText` (surrounding whitespace allowed), or `undefined`. */
function callWithArguments(name: string, argsText: string): ParsedCall | undefined {
  if (!NAME.test(name)) return undefined;
  try {
    return callFromJson({ name, arguments: JSON.parse(argsText) });
  } catch {
    return undefined;
  }
}

/** A JSON call object or array of them, or several JSON values one after another (MiniMax-M1 lines). */
function jsonCalls(body: string): ParsedCall[] | undefined {
  return callsFromJsonText(body.trim(), true) ?? callsFromJsonSequence(body);
}

const TOOL_SEP = "<｜tool▁sep｜>";

/**
 * One DeepSeek call body: V3 / R1 `function<｜tool▁sep｜>NAME\n```json\n{…}\n```` or V3.1
 * `NAME<｜tool▁sep｜>{…}` (the fence is optional in both).
 */
function deepseekCall(body: string): ParsedCall[] | undefined {
  const sep = body.indexOf(TOOL_SEP);
  if (sep < 0) return undefined;
  const left = body.slice(0, sep).trim();
  let right = body.slice(sep + TOOL_SEP.length);
  let name = left;
  if (left === "function" && !right.trimStart().startsWith("{")) {
    const line = right.indexOf("\n");
    name = (line < 0 ? right : right.slice(0, line)).trim();
    right = line < 0 ? "" : right.slice(line + 1);
  }
  const fenced = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/.exec(right);
  const call = callWithArguments(name, fenced?.[1] ?? right);
  return call ? [call] : undefined;
}

/** `deepseek_v3` / `deepseek_v31`: one tolerant parser reads both DeepSeek forms. */
export const DEEPSEEK_V3: DelimitedSyntax = {
  calls: [{ open: "<｜tool▁call▁begin｜>", close: "<｜tool▁call▁end｜>", read: deepseekCall }],
  drop: ["<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"],
};

const DSML = "｜DSML｜";
const DSML_PARAMETER = new RegExp(
  `^<${DSML}parameter name="([^"]+)" string="(true|false)">([\\s\\S]*?)</${DSML}parameter>`,
);

/** One DSML invoke body: `NAME">` then `<｜DSML｜parameter name="K" string="true|false">V</…>` lines. */
function dsmlCall(body: string): ParsedCall[] | undefined {
  const head = /^([^"]+)">/.exec(body);
  if (!head?.[1] || !NAME.test(head[1])) return undefined;
  const args: Record<string, unknown> = {};
  let rest = body.slice(head[0].length).trim();
  while (rest !== "") {
    const found = DSML_PARAMETER.exec(rest);
    if (!found?.[1]) return undefined;
    const value = found[3] ?? "";
    if (found[2] === "true") args[found[1]] = value;
    else {
      try {
        args[found[1]] = JSON.parse(value);
      } catch {
        return undefined;
      }
    }
    rest = rest.slice(found[0].length).trim();
  }
  return [{ name: head[1], arguments: JSON.stringify(args) }];
}

/** `deepseek_v32` (V3.2 `function_calls` blocks, V4 / V4-Flash `tool_calls` blocks). */
export const DEEPSEEK_V32: DelimitedSyntax = {
  calls: [{ open: `<${DSML}invoke name="`, close: `</${DSML}invoke>`, read: dsmlCall }],
  drop: [
    `<${DSML}function_calls>`,
    `</${DSML}function_calls>`,
    `<${DSML}tool_calls>`,
    `</${DSML}tool_calls>`,
  ],
};

/** One Kimi K2 call body: `functions.NAME:INDEX<|tool_call_argument_begin|>{…}`. */
function kimiCall(body: string): ParsedCall[] | undefined {
  const at = body.indexOf("<|tool_call_argument_begin|>");
  if (at < 0) return undefined;
  const id = body.slice(0, at).trim();
  const name = id.replace(/^functions\./, "").replace(/:\d+$/, "");
  const call = callWithArguments(name, body.slice(at + "<|tool_call_argument_begin|>".length));
  return call ? [call] : undefined;
}

/** `kimi_k2`: calls in a `<|tool_calls_section_begin|>` … `<|tool_calls_section_end|>` section. */
export const KIMI_K2: DelimitedSyntax = {
  calls: [{ open: "<|tool_call_begin|>", close: "<|tool_call_end|>", read: kimiCall }],
  drop: [
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_section_end|>",
  ],
};

/** `pythonic`: the output starts with a Python list of calls (Llama 4's `<|python_start|>` dropped). */
export const PYTHONIC: DelimitedSyntax = {
  calls: [{ open: "[", openInBody: true, scan: scanPythonValueEnd, read: callsFromPythonList }],
  drop: ["<|python_start|>", "<|python_end|>"],
  startOnly: true,
};

/** `lfm2`: `<|tool_call_start|>[pythonic calls]<|tool_call_end|>` (a JSON list accepted too). */
export const LFM2: DelimitedSyntax = {
  calls: [
    {
      open: "<|tool_call_start|>",
      close: "<|tool_call_end|>",
      read: (body) => callsFromPythonList(body) ?? callsFromJsonText(body.trim(), true),
    },
  ],
};

/** `granite`: `<|tool_call|>[{"name", "arguments"}, …]` (Granite 3.x), no closing marker. */
export const GRANITE: DelimitedSyntax = {
  calls: [{ open: "<|tool_call|>", scan: jsonEnd, read: (body) => callsFromJsonText(body, true) }],
};

/** One Gemma 4 call body: `call:NAME{…}` (the `call:` is part of the opener). */
function gemma4Call(body: string): ParsedCall[] | undefined {
  const brace = body.indexOf("{");
  if (brace < 0) return undefined;
  const name = body.slice(0, brace).trim();
  const args = gemma4Arguments(body.slice(brace));
  if (!args || !NAME.test(name)) return undefined;
  return [{ name, arguments: JSON.stringify(args) }];
}

/** `gemma4`: `<|tool_call>call:NAME{key:value,…}<tool_call|>`, one per call. */
export const GEMMA4: DelimitedSyntax = {
  calls: [{ open: "<|tool_call>call:", close: "<tool_call|>", read: gemma4Call }],
};

/** `firefunction_v2`: ` functools[{"name", "arguments"}, …]`, no closing marker. */
export const FIREFUNCTION_V2: DelimitedSyntax = {
  calls: [{ open: "functools", scan: jsonEnd, read: (body) => callsFromJsonText(body, true) }],
};

/**
 * The calls of a JSON list (or a single value) whose items `toCall` reads, all or none: `undefined` when
 * the body is not JSON, is empty, or any item is not a call.
 */
function callsFromJsonItems(
  body: string,
  toCall: (item: Record<string, unknown>) => ParsedCall | undefined,
): ParsedCall[] | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body.trim());
  } catch {
    return undefined;
  }
  const calls: ParsedCall[] = [];
  for (const item of Array.isArray(value) ? value : [value]) {
    if (typeof item !== "object" || item === null) return undefined;
    const call = toCall(item as Record<string, unknown>);
    if (!call) return undefined;
    calls.push(call);
  }
  return calls.length > 0 ? calls : undefined;
}

/** A Cohere action list: `[{"tool_call_id"?, "tool_name": …, "parameters": {…}}, …]`. */
function cohereCalls(body: string): ParsedCall[] | undefined {
  return callsFromJsonItems(body, (record) =>
    callFromJson({ name: record.tool_name ?? record.name, arguments: record.parameters ?? record.arguments }),
  );
}

/**
 * `command_r`: Command R7B / Cohere2 `<|START_ACTION|>[…]<|END_ACTION|>` and Command R+
 * `Action:\n```json\n[…]\n````, each a list of `{"tool_name", "parameters"}`.
 */
export const COMMAND_R: DelimitedSyntax = {
  calls: [
    { open: "<|START_ACTION|>", close: "<|END_ACTION|>", read: cohereCalls },
    { open: "Action:\n```json", close: "```", read: cohereCalls },
  ],
};

/** `apriel`: `<tool_calls>[…]</tool_calls>` (also `<tool_call>…</tool_call>`, and JSON lines as MiniMax-M1). */
export const APRIEL: DelimitedSyntax = {
  calls: [
    { open: "<tool_calls>", close: "</tool_calls>", read: jsonCalls },
    { open: "<tool_call>", close: "</tool_call>", read: jsonCalls },
  ],
};

/** An Apertus list: `[{"NAME": {…args}}, …]`, one key per call. */
function apertusCalls(body: string): ParsedCall[] | undefined {
  return callsFromJsonItems(body, (record) => {
    const entries = Array.isArray(record) ? [] : Object.entries(record);
    const entry = entries[0];
    if (entries.length !== 1 || !entry) return undefined;
    return callFromJson({ name: entry[0], arguments: entry[1] });
  });
}

/** `apertus`: `<|tools_prefix|>[{"NAME": {…}}, …]<|tools_suffix|>` (Apertus-8B-Instruct). */
export const APERTUS: DelimitedSyntax = {
  calls: [{ open: "<|tools_prefix|>", close: "<|tools_suffix|>", read: apertusCalls }],
};

/** `gigachat3`: `<|message_sep|>\n\nfunction call<|role_sep|>\n{"name", "arguments"}` (GigaChat 3 / 3.1). */
export const GIGACHAT3: DelimitedSyntax = {
  calls: [
    {
      open: "function call<|role_sep|>",
      scan: jsonEnd,
      read: (body) => callsFromJsonValue(safeJson(body), false),
    },
  ],
  drop: ["<|message_sep|>"],
};

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** One functionary v3.1 body: `NAME>{…}` (the opener is `<function=`). */
function functionaryCall(body: string): ParsedCall[] | undefined {
  const at = body.indexOf(">");
  if (at < 0) return undefined;
  const call = callWithArguments(body.slice(0, at), body.slice(at + 1));
  return call ? [call] : undefined;
}

/** A functionary v3.1 `<|python_tag|>` body: the code of a `python` call (`{"code": …}`). */
function pythonCode(body: string): ParsedCall[] | undefined {
  const code = body.trim();
  return code === "" ? undefined : [{ name: "python", arguments: JSON.stringify({ code }) }];
}

/**
 * `functionary_v3_1`: `<function=NAME>{…}</function>` (functionary-medium v3.1, Llama 3.1 based), and
 * `<|python_tag|>code` to the end of the output (the code interpreter: a `python` call with
 * `{"code": …}`, as llama.cpp's functionary v3.1 handler reads it).
 */
export const FUNCTIONARY_V3_1: DelimitedSyntax = {
  calls: [
    { open: "<function=", close: "</function>", read: functionaryCall },
    { open: "<|python_tag|>", close: "<|eom_id|>", read: pythonCode },
  ],
};

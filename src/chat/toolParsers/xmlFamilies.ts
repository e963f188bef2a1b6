/**
 * The XML-style tool-call families, each a {@link BlockFormat} for {@link XmlBlockToolParser}: Qwen3-Coder
 * and Seed-OSS (`<function=NAME>` / `<parameter=KEY>`), GLM-4.5/4.7 (`NAME<arg_key>…<arg_value>…`),
 * MiniMax-M2 and Muse Glimmer (`<invoke name="…">` / `<parameter name="…">`), and the JSON-bodied
 * blocks of MiniMax-M1 (`<tool_calls>` JSON lines) and Nemotron Nano v2 (`<TOOLCALL>[…]</TOOLCALL>`).
 * Parameter values are converted to their schema types from the request's tools (`convertParameter`).
 */
import type { ChatTool } from "../../protocol/tools.ts";
import { scanJsonValueEnd, skipSpace } from "../textScan.ts";
import { callsFromJsonText, type ParsedCall } from "./common.ts";
import { type BlockFormat, BodyCursor, stripNewlines, typedCall } from "./xmlBlock.ts";

/** A name or key as the formats write it: not empty, no markup or line break in it. */
function validName(text: string | undefined): string | undefined {
  const name = text?.trim();
  return name && !/[<>\n]/.test(name) ? name : undefined;
}

/**
 * Reads `<function=NAME>` blocks of `<parameter=KEY>VALUE</parameter>` closed by `</function>` (one or
 * more per body); one newline around each value is dropped (Qwen3-Coder writes the value on its own
 * lines). Undefined unless every function and parameter is closed and nothing else is in the body.
 */
function readFunctionTags(body: string, tools: readonly ChatTool[]): ParsedCall[] | undefined {
  const cursor = new BodyCursor(body);
  const calls: ParsedCall[] = [];
  while (cursor.expect("<function=")) {
    const name = validName(cursor.until(">"));
    if (!name) return undefined;
    const params: [string, string][] = [];
    while (!cursor.expect("</function>")) {
      if (!cursor.expect("<parameter=")) return undefined;
      const key = validName(cursor.until(">"));
      const value = key === undefined ? undefined : cursor.until("</parameter>");
      if (key === undefined || value === undefined) return undefined;
      params.push([key, stripNewlines(value)]);
    }
    calls.push(typedCall(name, params, tools));
  }
  return calls.length > 0 && cursor.done() ? calls : undefined;
}

/**
 * Reads `NAME` then `<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>` pairs, with or without line
 * breaks between them (GLM-4.5/4.6 break lines, GLM-4.7 does not); values are kept as written.
 */
function readArgKeys(body: string, tools: readonly ChatTool[]): ParsedCall[] | undefined {
  const first = body.indexOf("<arg_key>");
  const name = validName(first < 0 ? body : body.slice(0, first));
  if (!name) return undefined;
  const cursor = new BodyCursor(body, first < 0 ? body.length : first);
  const params: [string, string][] = [];
  while (cursor.expect("<arg_key>")) {
    const key = validName(cursor.until("</arg_key>"));
    if (key === undefined || !cursor.expect("<arg_value>")) return undefined;
    const value = cursor.until("</arg_value>");
    if (value === undefined) return undefined;
    params.push([key, value]);
  }
  return cursor.done() ? [typedCall(name, params, tools)] : undefined;
}

/**
 * A reader of `<{ns}invoke name="NAME">` blocks of `<{ns}parameter name="KEY">VALUE</{ns}parameter>`
 * closed by `</{ns}invoke>` (one or more per body, the parallel calls); one newline around a value is dropped.
 */
function invokeReader(ns: string) {
  const invoke = `<${ns}invoke name="`;
  const invokeEnd = `</${ns}invoke>`;
  const param = `<${ns}parameter name="`;
  const paramEnd = `</${ns}parameter>`;
  return (body: string, tools: readonly ChatTool[]): ParsedCall[] | undefined => {
    const cursor = new BodyCursor(body);
    const calls: ParsedCall[] = [];
    while (cursor.expect(invoke)) {
      const name = validName(cursor.until('">'));
      if (!name) return undefined;
      const params: [string, string][] = [];
      while (!cursor.expect(invokeEnd)) {
        if (!cursor.expect(param)) return undefined;
        const key = validName(cursor.until('">'));
        const value = key === undefined ? undefined : cursor.until(paramEnd);
        if (key === undefined || value === undefined) return undefined;
        params.push([key, stripNewlines(value)]);
      }
      calls.push(typedCall(name, params, tools));
    }
    return calls.length > 0 && cursor.done() ? calls : undefined;
  };
}

/** Reads one or more JSON calls (objects or arrays of them) one after another, e.g. one per line. */
function readJsonSequence(body: string): ParsedCall[] | undefined {
  const calls: ParsedCall[] = [];
  let at = skipSpace(body);
  while (at < body.length) {
    if (body[at] !== "{" && body[at] !== "[") return undefined;
    const end = scanJsonValueEnd(body, at);
    if (end < 0) return undefined;
    const some = callsFromJsonText(body.slice(at, end), true);
    if (!some) return undefined;
    calls.push(...some);
    at = skipSpace(body, end);
  }
  return calls.length > 0 ? calls : undefined;
}

/** Qwen3-Coder, Qwen3.5, Nemotron 3 Nano, Step 3.5: `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>`, as vLLM's `qwen3_coder`. */
export const QWEN3_CODER: BlockFormat = {
  open: "<tool_call>",
  close: "</tool_call>",
  read: readFunctionTags,
};

/** ByteDance Seed-OSS: `<seed:tool_call>\n<function=NAME>\n<parameter=KEY>VALUE</parameter>\n</function>\n</seed:tool_call>`, as vLLM's `seed_oss`. */
export const SEED_OSS: BlockFormat = {
  open: "<seed:tool_call>",
  close: "</seed:tool_call>",
  read: readFunctionTags,
};

/** GLM-4.5/4.6/4.7 and Poolside Laguna: `<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>`, as vLLM's `glm45`/`glm47`. */
export const GLM: BlockFormat = { open: "<tool_call>", close: "</tool_call>", read: readArgKeys };

/** MiniMax-M2: `<minimax:tool_call>\n<invoke name="NAME">\n<parameter name="K">V</parameter>\n</invoke>\n</minimax:tool_call>`, as vLLM's `minimax_m2`. */
export const MINIMAX_M2: BlockFormat = {
  open: "<minimax:tool_call>",
  close: "</minimax:tool_call>",
  read: invokeReader(""),
};

/** Muse Glimmer (ATEM): `<atem:function_calls>\n<atem:invoke name="NAME">\n<atem:parameter name="K">V</atem:parameter>\n</atem:invoke>\n</atem:function_calls>`. */
export const MUSE_GLIMMER: BlockFormat = {
  open: "<atem:function_calls>",
  close: "</atem:function_calls>",
  read: invokeReader("atem:"),
};

/** MiniMax-M1: `<tool_calls>\n{"name": …, "arguments": …}\n…</tool_calls>`, as vLLM's `minimax`. */
export const MINIMAX_M1: BlockFormat = {
  open: "<tool_calls>",
  close: "</tool_calls>",
  read: (body) => readJsonSequence(body),
};

/** NVIDIA Nemotron Nano v2: `<TOOLCALL>[{"name": …, "arguments": …}, …]</TOOLCALL>`. */
export const NEMOTRON_JSON: BlockFormat = {
  open: "<TOOLCALL>",
  close: "</TOOLCALL>",
  read: (body) => readJsonSequence(body),
};

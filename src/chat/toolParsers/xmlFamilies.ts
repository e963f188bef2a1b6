/**
 * The XML-style tool-call families, each a {@link BlockFormat} for {@link XmlBlockToolParser}: Qwen3-Coder
 * and Seed-OSS (`<function=NAME>` / `<parameter=KEY>`), GLM-4.5/4.7 (`NAME<arg_key>…<arg_value>…`),
 * MiniMax-M2 and Muse Glimmer (`<invoke name="…">` / `<parameter name="…">`), MiniMax-M3 (nested
 * namespaced elements), Hunyuan 3 (`<tool_call:opensource>NAME<tool_sep:opensource>…`), and the JSON-bodied
 * blocks of MiniMax-M1 (`<tool_calls>` JSON lines) and Nemotron Nano v2 (`<TOOLCALL>[…]</TOOLCALL>`), and
 * MiniCPM5 (`<function name="NAME"><param name="KEY">VALUE</param></function>`).
 * Parameter values are converted to their schema types from the request's tools (`convertParameter`).
 */
import type { ChatTool } from "../../protocol/tools.ts";
import { callsFromJsonSequence, callsFromJsonText, type ParsedCall } from "./toolParser.ts";
import {
  type BlockFormat,
  BodyCursor,
  convertParameter,
  parameterSchema,
  stripNewlines,
  typedCall,
} from "./xmlBlock.ts";

/** A name or key as the formats write it: not empty, no markup or line break in it. */
function validName(text: string | undefined): string | undefined {
  const name = text?.trim();
  return name && !/[<>\n]/.test(name) ? name : undefined;
}

/**
 * Reads `<function=NAME>` blocks of `<parameter=KEY>VALUE</parameter>` closed by `</function>` (one or
 * more per body); one newline around each value is dropped (Qwen3-Coder writes the value on its own
 * lines). A forgotten `</parameter>` ends the value at the next `<parameter=` or `</function>`, as vLLM's
 * `qwen3_coder` reads it. Undefined unless every function is closed and nothing else is in the body.
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
      const value =
        key === undefined ? undefined : cursor.untilClose("</parameter>", ["<parameter=", "</function>"]);
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

/** Qwen3-Coder, Qwen3.5, Nemotron 3 Nano, Step 3.5 (a bare `<function=…>…</function>` is read too): `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>`, as vLLM's `qwen3_coder`. */
export const QWEN3_CODER: BlockFormat = {
  open: "<tool_call>",
  close: "</tool_call>",
  read: readFunctionTags,
  bare: { open: "<function=", close: "</function>" },
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
  read: (body) => callsFromJsonSequence(body),
};

/** NVIDIA Nemotron Nano v2: `<TOOLCALL>[{"name": …, "arguments": …}, …]</TOOLCALL>`. */
export const NEMOTRON_JSON: BlockFormat = {
  open: "<TOOLCALL>",
  close: "</TOOLCALL>",
  read: (body) => callsFromJsonSequence(body),
};

/** Hunyuan 3's tag suffix (the template's `HYTK`). */
const HY = ":opensource";

/**
 * Reads Hunyuan 3's calls: per call `<tool_call:opensource>NAME<tool_sep:opensource>` then
 * `<arg_key:opensource>K</arg_key:opensource><arg_value:opensource>V</arg_value:opensource>` pairs and
 * `</tool_call:opensource>`; values are kept as written (strings raw, others JSON).
 */
function readHunyuanCalls(body: string, tools: readonly ChatTool[]): ParsedCall[] | undefined {
  const cursor = new BodyCursor(body);
  const calls: ParsedCall[] = [];
  while (cursor.expect(`<tool_call${HY}>`)) {
    const name = validName(cursor.until(`<tool_sep${HY}>`));
    if (!name) return undefined;
    const params: [string, string][] = [];
    while (!cursor.expect(`</tool_call${HY}>`)) {
      if (!cursor.expect(`<arg_key${HY}>`)) return undefined;
      const key = validName(cursor.until(`</arg_key${HY}>`));
      if (key === undefined || !cursor.expect(`<arg_value${HY}>`)) return undefined;
      const value = cursor.until(`</arg_value${HY}>`);
      if (value === undefined) return undefined;
      params.push([key, value]);
    }
    calls.push(typedCall(name, params, tools));
  }
  return calls.length > 0 && cursor.done() ? calls : undefined;
}

/** Tencent Hunyuan 3 (Hy3): `<tool_calls:opensource>\n<tool_call:opensource>NAME<tool_sep:opensource>\n<arg_key:opensource>K</arg_key:opensource>\n<arg_value:opensource>V</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>`, as vLLM's `hy_v3`. */
export const HY_V3: BlockFormat = {
  open: `<tool_calls${HY}>`,
  close: `</tool_calls${HY}>`,
  read: readHunyuanCalls,
};

/** MiniMax-M3's namespace token, written before every tag of its calls. */
const MM = "]<]minimax[>[";

type XmlToken = { tag: string; text: string };

/**
 * Splits a MiniMax-M3 body at its namespace tokens: each token is followed by a tag (`<name>`,
 * `</name>`, `<invoke name="…">`) and then the text up to the next token. Undefined when a token is not
 * followed by a tag or non-blank text comes before the first token.
 */
function minimaxTokens(body: string): XmlToken[] | undefined {
  const parts = body.split(MM);
  if ((parts[0] ?? "").trim() !== "") return undefined;
  const tokens: XmlToken[] = [];
  for (const part of parts.slice(1)) {
    const end = part.indexOf(">");
    if (!part.startsWith("<") || end < 0) return undefined;
    tokens.push({ tag: part.slice(1, end), text: part.slice(end + 1) });
  }
  return tokens;
}

/** The sub-schema of `schema` for an object key or (key `undefined`) for an array item. */
function childSchema(schema: unknown, key: string | undefined): unknown {
  if (typeof schema !== "object" || schema === null) return undefined;
  const record = schema as Record<string, unknown>;
  if (key === undefined) return record.items;
  const properties = record.properties;
  return typeof properties === "object" && properties !== null
    ? (properties as Record<string, unknown>)[key]
    : undefined;
}

/**
 * Reads one MiniMax-M3 value from `tokens[at]` on (the tokens after an element's open tag, whose text is
 * `text`) up to the close tag `</name>`: a leaf (text, converted per `schema`), or child elements — all
 * `<item>` an array, else an object. Returns the value and the index after the close tag; undefined if malformed.
 */
function readMinimaxValue(
  tokens: readonly XmlToken[],
  at: number,
  text: string,
  name: string,
  schema: unknown,
): { value: unknown; next: number } | undefined {
  const first = tokens[at];
  if (first === undefined) return undefined;
  if (first.tag === `/${name}`) {
    if (first.text.trim() !== "") return undefined;
    return { value: convertParameter(text, schema), next: at + 1 };
  }
  if (text.trim() !== "") return undefined;
  const entries: [string, unknown][] = [];
  let i = at;
  for (;;) {
    const token = tokens[i];
    if (token === undefined) return undefined;
    if (token.tag === `/${name}`) {
      if (token.text.trim() !== "") return undefined;
      break;
    }
    if (token.tag.startsWith("/") || token.tag.includes(" ")) return undefined;
    const key = token.tag;
    const child = readMinimaxValue(
      tokens,
      i + 1,
      token.text,
      key,
      childSchema(schema, key === "item" ? undefined : key),
    );
    if (!child) return undefined;
    entries.push([key, child.value]);
    i = child.next;
  }
  const value = entries.every(([key]) => key === "item")
    ? entries.map(([, v]) => v)
    : Object.fromEntries(entries);
  return { value, next: i + 1 };
}

/** Reads MiniMax-M3's `<invoke name="NAME">` elements (namespace-prefixed), each element a parameter. */
function readMinimaxM3(body: string, tools: readonly ChatTool[]): ParsedCall[] | undefined {
  const tokens = minimaxTokens(body);
  if (!tokens) return undefined;
  const calls: ParsedCall[] = [];
  let i = 0;
  while (i < tokens.length) {
    const open = tokens[i];
    const match = open ? /^invoke name="([^"<>\n]+)"$/.exec(open.tag) : null;
    if (!open || !match?.[1] || open.text.trim() !== "") return undefined;
    const name = match[1];
    const tool = tools.find((candidate) => candidate.function.name === name);
    i++;
    const args: Record<string, unknown> = {};
    for (;;) {
      const token = tokens[i];
      if (token === undefined) return undefined;
      if (token.tag === "/invoke") {
        if (token.text.trim() !== "") return undefined;
        i++;
        break;
      }
      if (token.tag.startsWith("/") || token.tag.includes(" ")) return undefined;
      const child = readMinimaxValue(
        tokens,
        i + 1,
        token.text,
        token.tag,
        childSchema(tool?.function.parameters, token.tag),
      );
      if (!child) return undefined;
      args[token.tag] = child.value;
      i = child.next;
    }
    calls.push({ name, arguments: JSON.stringify(args) });
  }
  return calls.length > 0 ? calls : undefined;
}

/** MiniMax-M3: `NS<tool_call>\nNS<invoke name="NAME">NS<K>VNS</K>…NS</invoke>\nNS</tool_call>` with NS `]<]minimax[>[`, objects and arrays as nested elements (`<item>` for array items), as vLLM's `minimax_m3`. */
export const MINIMAX_M3: BlockFormat = {
  open: `${MM}<tool_call>`,
  close: `${MM}</tool_call>`,
  read: readMinimaxM3,
};

/** Kimi K3's XTML tags: `<|open|>NAME ATTRS<|sep|>` and `<|close|>NAME<|sep|>`. */
const K3_OPEN = "<|open|>";
const K3_CLOSE = "<|close|>";
const K3_SEP = "<|sep|>";

/** The `key="value"` attributes of an XTML open tag, `&quot;` and `&amp;` unescaped. */
function xtmlAttributes(text: string): Map<string, string> {
  const attrs = new Map<string, string>();
  for (const match of text.matchAll(/([\w-]+)="([^"]*)"/g)) {
    attrs.set(match[1] ?? "", (match[2] ?? "").replaceAll("&quot;", '"').replaceAll("&amp;", "&"));
  }
  return attrs;
}

/**
 * Reads Kimi K3's calls: `<|open|>call tool="NAME" index="N"<|sep|>` holding
 * `<|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>` elements (each value converted
 * to its `type` attribute, else to the tools' schema type) or one `<|open|>json …<|sep|>{…}<|close|>json<|sep|>`,
 * closed by `<|close|>call<|sep|>`.
 */
function readKimiK3(body: string, tools: readonly ChatTool[]): ParsedCall[] | undefined {
  const cursor = new BodyCursor(body);
  const calls: ParsedCall[] = [];
  while (cursor.expect(`${K3_OPEN}call `)) {
    const name = validName(xtmlAttributes(cursor.until(K3_SEP) ?? "").get("tool"));
    if (!name) return undefined;
    const args: Record<string, unknown> = {};
    let json: string | undefined;
    while (!cursor.expect(`${K3_CLOSE}call${K3_SEP}`)) {
      if (cursor.expect(`${K3_OPEN}json`)) {
        if (cursor.until(K3_SEP) === undefined) return undefined;
        json = cursor.until(`${K3_CLOSE}json${K3_SEP}`);
        if (json === undefined) return undefined;
        continue;
      }
      if (!cursor.expect(`${K3_OPEN}argument `)) return undefined;
      const attrs = xtmlAttributes(cursor.until(K3_SEP) ?? "");
      const key = attrs.get("key");
      const value = key === undefined ? undefined : cursor.until(`${K3_CLOSE}argument${K3_SEP}`);
      if (key === undefined || key === "" || value === undefined) return undefined;
      const type = attrs.get("type");
      args[key] = convertParameter(value, type ? { type } : parameterSchema(tools, name, key));
    }
    if (json !== undefined) {
      if (Object.keys(args).length > 0) return undefined;
      const parsed = callsFromJsonText(JSON.stringify({ name, arguments: json.trim() }), false);
      if (!parsed) return undefined;
      calls.push(...parsed);
    } else calls.push({ name, arguments: JSON.stringify(args) });
  }
  return calls.length > 0 && cursor.done() ? calls : undefined;
}

/**
 * Kimi K3 (XTML): `<|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|><|open|>argument key="K"
 * type="string"<|sep|>V<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>`, as vLLM's
 * `kimi_k3`; the response element's tags around the content are dropped.
 */
export const KIMI_K3: BlockFormat = {
  open: `${K3_OPEN}tools${K3_SEP}`,
  close: `${K3_CLOSE}tools${K3_SEP}`,
  read: readKimiK3,
  drop: [`${K3_OPEN}response${K3_SEP}`, `${K3_CLOSE}response${K3_SEP}`, `${K3_CLOSE}message${K3_SEP}`],
};

/**
 * Reads one Solar Open call: `ID<|tool_call:name|>NAME<|tool_call:args|>{…}` (the model's own id is not
 * kept: ids are ours, as for every family).
 */
function readSolarOpen(body: string): ParsedCall[] | undefined {
  const nameAt = body.indexOf("<|tool_call:name|>");
  const argsAt = body.indexOf("<|tool_call:args|>");
  if (nameAt < 0 || argsAt < nameAt) return undefined;
  const name = validName(body.slice(nameAt + "<|tool_call:name|>".length, argsAt));
  const args = body.slice(argsAt + "<|tool_call:args|>".length).trim();
  if (!name) return undefined;
  return callsFromJsonText(JSON.stringify({ name, arguments: args === "" ? "{}" : args }), false);
}

/**
 * Upstage Solar Open: `<|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{…}<|tool_call:end|>…<|calls|>`,
 * one block per call; the turn's markers around the content and the calls (`<|content|>`, `<|end|>`,
 * `<|tool_calls|>`, `<|calls|>`) are dropped from the content.
 */
export const SOLAR_OPEN: BlockFormat = {
  open: "<|tool_call:begin|>",
  close: "<|tool_call:end|>",
  read: (body) => readSolarOpen(body),
  drop: ["<|content|>", "<|end|>", "<|tool_calls|>", "<|calls|>"],
};

/**
 * Reads one MiniCPM5 call, the body after `<function name="`: `NAME">` then `<param name="KEY">VALUE</param>`
 * elements, a value either written as is or wrapped in `<![CDATA[…]]>` (the template wraps values holding
 * `<`, `&` or a line break; the CDATA markers are not part of the value). Values are converted to the
 * tools' schema types (`convertParameter`); a call without parameters has `{}`.
 */
function readMiniCpm5(body: string, tools: readonly ChatTool[]): ParsedCall[] | undefined {
  const cursor = new BodyCursor(body);
  const name = validName(cursor.until('">'));
  if (!name) return undefined;
  const params: [string, string][] = [];
  while (!cursor.done()) {
    if (!cursor.expect('<param name="')) return undefined;
    const key = validName(cursor.until('">'));
    if (key === undefined) return undefined;
    let value: string | undefined;
    if (cursor.take("<![CDATA[")) {
      value = cursor.until("]]>");
      if (value === undefined || !cursor.take("</param>")) return undefined;
    } else value = cursor.until("</param>");
    if (value === undefined) return undefined;
    params.push([key, value]);
  }
  return [typedCall(name, params, tools)];
}

/**
 * OpenBMB MiniCPM5: `<function name="NAME"><param name="KEY">VALUE</param>…</function>`, one element per
 * call (several calls one per line), values raw or in `<![CDATA[…]]>`, as vLLM's `minicpm5` and llama.cpp's
 * MiniCPM5 format read them. A CDATA value that holds `</function>` itself ends the block early, so the
 * call falls back to content (never lost).
 */
export const MINICPM5: BlockFormat = {
  open: '<function name="',
  close: "</function>",
  read: readMiniCpm5,
};

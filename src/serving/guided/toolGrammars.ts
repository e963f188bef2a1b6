/**
 * Grammars for forced tool calls (`tool_choice` `"required"` or a named function) written in a model
 * family's own tool-call markup, beyond the JSON-bodied `hermes` / `llama3_json` forms of `chatTools.ts`:
 * the XML-parameter families (`qwen3_coder`, `glm45` / `glm47`, `minimax_m2`, `minicpm5`), whose parameter values are
 * raw text for plain strings and JSON for every other type, and the families that name the function in
 * markup and write its arguments as one JSON object (`mistral` v11+, `deepseek_v3` / `deepseek_v31`,
 * `kimi_k2`, and gpt-oss's Harmony `openai`). Each grammar writes exactly what that family's parser (`src/chat/toolParsers/`) reads back.
 * Follows the shape of llama.cpp's `common/chat.cpp` grammars for these formats (one alternative per
 * function, required parameters in order, then the optional ones); the code is our own.
 *
 * Markers that are control tokens in the family's vocabulary (`[TOOL_CALLS]`, `<｜tool▁calls▁begin｜>`,
 * `<|tool_call_begin|>` …) are written as text literals: llama.cpp's grammar matches a token by its
 * piece, so the control token itself is admitted, and where the vocabulary lacks it the text is spelled
 * out (what the parsers read either way).
 */
import type { JsonSchema } from "../../chat/index.ts";
import type { ChatTool } from "../../protocol/tools.ts";

/** The parser families with a grammar here. */
export const TOOL_GRAMMAR_FAMILIES = [
  "qwen3_coder",
  "glm45",
  "glm47",
  "minimax_m2",
  "minicpm5",
  "mistral",
  "deepseek_v3",
  "deepseek_v31",
  "kimi_k2",
  "openai",
] as const;

/** A family with a native forced-call grammar here. */
export type ToolGrammarFamily = (typeof TOOL_GRAMMAR_FAMILIES)[number];

/** True when `parser` (a resolved tool-parser name) has a native forced-call grammar here. */
export function isToolGrammarFamily(parser: string | undefined): parser is ToolGrammarFamily {
  return (TOOL_GRAMMAR_FAMILIES as readonly string[]).includes(parser ?? "");
}

/**
 * Compiles one JSON Schema (a parameter's, or a tool's whole `parameters`) to GBNF with root rule
 * `root`; `tool` is the index in `tools` it belongs to, for errors against the client's schema.
 */
export type CompileJson = (schema: JsonSchema, tool: number) => Promise<string>;

/**
 * One tool a forced grammar may call: its index in the request's `tools` and the tool. With `free`, its
 * call is written in the markup but its arguments are not held to its schema: any JSON object for the
 * JSON-bodied families, any parameters (keys without markup, raw values) for the XML ones. The lazy
 * grammar of `strict` tools under `tool_choice: "auto"` calls the non-strict tools so (`chatTools.ts`).
 */
export type ForcedTool = { index: number; tool: ChatTool; free?: boolean };

/** Schema keywords that do not constrain a value (a string with only these is written raw). */
const ANNOTATIONS = new Set([
  "type",
  "description",
  "title",
  "default",
  "examples",
  "deprecated",
  "$comment",
]);

/** A parameter's schema as a record, `{}` for a missing or boolean-true schema. */
function asRecord(schema: unknown): Record<string, unknown> {
  return typeof schema === "object" && schema !== null && !Array.isArray(schema)
    ? (schema as Record<string, unknown>)
    : {};
}

/**
 * How an XML family writes one parameter's value: `raw` (a plain `{"type": "string"}`: any text without
 * the family's closing markup), `enum` (string literals, raw), or `json` (the value as JSON compiled from
 * its schema: what the parsers' `convertParameter` reads back for integers, numbers, booleans, objects,
 * arrays and untyped schemas). A raw string with `minLength` / `maxLength` is held to them and has no
 * `<` at all (each character then counts one). Undefined when no form round-trips: a string with constraints
 * (`pattern`, `format` …, which raw text cannot be held to and a JSON string would be read
 * back with its quotes), a type list mixing `string` with others, or a `$ref` (the parameter is compiled
 * alone, without its `$defs`).
 */
function valueForm(schema: unknown): "raw" | "enum" | "json" | undefined {
  const record = asRecord(schema);
  if (JSON.stringify(schema ?? {}).includes('"$ref"')) return undefined;
  const type = record.type;
  const types = Array.isArray(type) ? type : type === undefined ? [] : [type];
  if (
    Array.isArray(record.enum) &&
    record.enum.length > 0 &&
    record.enum.every((v) => typeof v === "string")
  ) {
    return types.every((t) => t === "string") ? "enum" : undefined;
  }
  if (types.includes("string")) {
    if (types.length > 1) return undefined;
    const bounds = ["minLength", "maxLength"];
    if (!Object.keys(record).every((key) => ANNOTATIONS.has(key) || bounds.includes(key))) return undefined;
    return lengthBounds(record) === null ? undefined : "raw";
  }
  // An untyped schema is read back as JSON when it parses as JSON, which a compiled value does, except
  // that a JSON string (`"x"`) would be read back unquoted: only schemas that cannot be strings qualify.
  if (types.length === 0)
    return record.const !== undefined && typeof record.const !== "string" ? "json" : undefined;
  return "json";
}

/** The largest `minLength` / `maxLength` a raw string value is held to in the grammar. */
const MAX_RAW_BOUND = 512;

/**
 * A string schema's `minLength` / `maxLength` (code points, as JSON Schema counts them), `{}` without
 * either, or null when they are not integers in 0…{@link MAX_RAW_BOUND} with min ≤ max (a larger
 * bound would expand into as many grammar rules; such a tool falls back to the generic form).
 */
function lengthBounds(record: Record<string, unknown>): { min?: number; max?: number } | null {
  const { minLength: min, maxLength: max } = record;
  const ok = (n: unknown) =>
    n === undefined || (Number.isInteger(n) && (n as number) >= 0 && (n as number) <= MAX_RAW_BOUND);
  if (!ok(min) || !ok(max)) return null;
  if (typeof min === "number" && typeof max === "number" && min > max) return null;
  return { ...(typeof min === "number" ? { min } : {}), ...(typeof max === "number" ? { max } : {}) };
}

/** The parameters of a tool as (key, schema, required) in order: required ones first, then the others. */
function parametersOf(tool: ChatTool): { key: string; schema: unknown; required: boolean }[] {
  const parameters = asRecord(tool.function.parameters);
  const properties = asRecord(parameters.properties);
  const required = Array.isArray(parameters.required) ? (parameters.required as unknown[]) : [];
  const keys = Object.keys(properties);
  const ordered = [...keys.filter((k) => required.includes(k)), ...keys.filter((k) => !required.includes(k))];
  return ordered.map((key) => ({ key, schema: properties[key], required: required.includes(key) }));
}

/** A name or key the families' parsers accept (no markup or line break; not blank). */
function safeName(name: string): boolean {
  return name.trim() === name && name !== "" && !/[<>\n"]/.test(name);
}

/**
 * True when a forced call of every tool in `tools` can be written in `family`'s markup and read back
 * exactly: names and keys without markup characters, and for the XML families every parameter a
 * `valueForm` and every required key declared (the markup writes declared properties only). When false
 * the caller falls back to the generic JSON form.
 */
export function toolGrammarFits(family: ToolGrammarFamily, tools: readonly ForcedTool[]): boolean {
  return tools.every(({ tool, free }) => {
    if (!safeName(tool.function.name)) return false;
    // Harmony's recipient (`to=functions.NAME`) ends at the first space.
    if (family === "openai" && /\s/.test(tool.function.name)) return false;
    if (!XML_FAMILIES.has(family) || free) return true;
    const parameters = asRecord(tool.function.parameters);
    const properties = asRecord(parameters.properties);
    const required = Array.isArray(parameters.required) ? (parameters.required as unknown[]) : [];
    if (!required.every((key) => typeof key === "string" && key in properties)) return false;
    return parametersOf(tool).every(({ key, schema }) => safeName(key) && valueForm(schema) !== undefined);
  });
}

/** The XML-parameter families. */
const XML_FAMILIES: ReadonlySet<ToolGrammarFamily> = new Set([
  "qwen3_coder",
  "glm45",
  "glm47",
  "minimax_m2",
  "minicpm5",
]);

/**
 * An XML family's markup: the block around the call(s), each call's open (given the name) and close, each
 * parameter's open (given the key) and close, and the characters a raw string value may not have right
 * after a `<` (so it never writes a closing tag; `/` always).
 */
type XmlMarkup = {
  blockOpen: string;
  blockClose: string;
  /** True when each call has its own block (else all calls share one). */
  blockPerCall: boolean;
  callOpen: (name: string) => string;
  callClose: string;
  paramOpen: (key: string) => string;
  paramClose: string;
  /** Characters a raw string value may not have right after `<`. */
  notAfterLt: string;
  separator: string;
};

/**
 * Qwen3-Coder (template `Qwen3-Coder-*.jinja`, vLLM's `qwen3_coder` parser, `xmlFamilies.ts`
 * `QWEN3_CODER`): `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>`,
 * one block per call. The parser drops one newline around a value and ends a value at `</parameter>`,
 * `<parameter=` or `</function>`, so a raw value has no `</` nor `<p`.
 */
const QWEN3_CODER_MARKUP: XmlMarkup = {
  blockOpen: "<tool_call>\n",
  blockClose: "</tool_call>",
  blockPerCall: true,
  callOpen: (name) => `<function=${name}>\n`,
  callClose: "</function>\n",
  paramOpen: (key) => `<parameter=${key}>\n`,
  paramClose: "\n</parameter>\n",
  notAfterLt: "/p",
  separator: "\n",
};

/**
 * GLM-4.5/4.6 (template `zai-org-GLM-4.5.jinja`, vLLM's `glm45`): `<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>`,
 * one block per call; values are read as written up to `</arg_value>`. GLM-4.7 (`glm47`) writes the same
 * without the line breaks.
 */
function glmMarkup(breaks: boolean): XmlMarkup {
  const nl = breaks ? "\n" : "";
  return {
    blockOpen: "<tool_call>",
    blockClose: "</tool_call>",
    blockPerCall: true,
    callOpen: (name) => `${name}${nl}`,
    callClose: "",
    paramOpen: (key) => `<arg_key>${key}</arg_key>${nl}<arg_value>`,
    paramClose: `</arg_value>${nl}`,
    notAfterLt: "/",
    separator: "\n",
  };
}

/**
 * MiniMax-M2 (template `MiniMax-M2.jinja`, vLLM's `minimax_m2`): `<minimax:tool_call>\n<invoke name="NAME">\n<parameter name="K">V</parameter>\n</invoke>\n</minimax:tool_call>`,
 * all calls in one block; a value is read up to `</parameter>` with one newline around it dropped.
 */
const MINIMAX_M2_MARKUP: XmlMarkup = {
  blockOpen: "<minimax:tool_call>\n",
  blockClose: "</minimax:tool_call>",
  blockPerCall: false,
  callOpen: (name) => `<invoke name="${name}">\n`,
  callClose: "</invoke>\n",
  paramOpen: (key) => `<parameter name="${key}">`,
  paramClose: "</parameter>\n",
  notAfterLt: "/",
  separator: "",
};

/**
 * MiniCPM5 (template `openbmb-MiniCPM5-1B.jinja`, vLLM's `minicpm5`, `xmlFamilies.ts` `MINICPM5`):
 * `<function name="NAME"><param name="K">V</param></function>`, one element per call, calls one per line.
 * The parser reads a value up to `</param>`, or a `<![CDATA[…]]>` one without its markers, so a raw value
 * has no `</` nor `<!` (the grammar never writes CDATA).
 */
const MINICPM5_MARKUP: XmlMarkup = {
  blockOpen: "",
  blockClose: "",
  blockPerCall: true,
  callOpen: (name) => `<function name="${name}">`,
  callClose: "</function>",
  paramOpen: (key) => `<param name="${key}">`,
  paramClose: "</param>",
  notAfterLt: "/!",
  separator: "\n",
};

/** A GBNF string literal of `text`. */
function lit(text: string): string {
  return text === "" ? "" : JSON.stringify(text);
}

/** A GBNF character-class body character. */
function classChar(char: string): string {
  return /[\\\]^-]/.test(char) ? `\\${char}` : char;
}

/** Joins GBNF sequence items, leaving out empty ones. */
function seq(...items: string[]): string {
  return items.filter((item) => item !== "").join(" ");
}

/** Renames every rule of `gbnf` by prefixing `prefix` (the root becomes `${prefix}root`). */
type RenameRules = (gbnf: string, prefix: string) => string;

/**
 * The GBNF of a forced call of one of `tools` in `family`'s markup (`repeat`: one or more calls, else
 * exactly one), with root rule `root`. `compile` turns the JSON Schemas of values into GBNF; `rename`
 * prefixes a compiled grammar's rule names (`structured/gbnf/ruleNames.ts`).
 * Rule names of this grammar start with `lmserve-tg`; compiled ones with `lmserve-tgN-`.
 * @throws what `compile` throws (a parameter schema that cannot be compiled).
 */
export async function toolGrammar(
  family: ToolGrammarFamily,
  tools: readonly ForcedTool[],
  repeat: boolean,
  compile: CompileJson,
  rename: RenameRules,
): Promise<string> {
  const rules: string[] = [];
  let next = 0;
  /** A rule for the JSON value of `schema` (compiled and renamed), returning its name. */
  const jsonRule = async (schema: JsonSchema, tool: number): Promise<string> => {
    const prefix = `lmserve-tg${next++}-`;
    rules.push(rename(await compile(schema, tool), prefix));
    return `${prefix}root`;
  };
  const calls: string[] = [];
  let begin = "";
  let end = "";
  let separator = "";
  if (XML_FAMILIES.has(family)) {
    const markup =
      family === "qwen3_coder"
        ? QWEN3_CODER_MARKUP
        : family === "minimax_m2"
          ? MINIMAX_M2_MARKUP
          : family === "minicpm5"
            ? MINICPM5_MARKUP
            : glmMarkup(family === "glm45");
    const raw = "lmserve-tg-raw";
    const notAfter = [...new Set(["/", "<", ...markup.notAfterLt])].map(classChar).join("");
    rules.push(`${raw} ::= ( [^<] | "<"+ [^${notAfter}] )*`);
    for (const { index, tool, free } of tools) {
      const items: string[] = [];
      if (free) {
        // Any parameters, each a key without markup and a raw value (the parser reads them back as
        // written, converting by the tool's schema where it can).
        const [before = "", after = ""] = markup.paramOpen("\u0000").split("\u0000");
        items.push(`( ${seq(lit(before), "lmserve-tg-key", lit(after), raw, lit(markup.paramClose))} )*`);
        if (!rules.some((rule) => rule.startsWith("lmserve-tg-key "))) {
          rules.push('lmserve-tg-key ::= [^<>"\\n ]+');
        }
      }
      for (const { key, schema, required } of free ? [] : parametersOf(tool)) {
        const form = valueForm(schema);
        let value = raw;
        const bounds = form === "raw" ? lengthBounds(asRecord(schema)) : null;
        if (bounds && (bounds.min !== undefined || bounds.max !== undefined)) {
          value = `[^<]{${bounds.min ?? 0},${bounds.max ?? ""}}`;
        }
        if (form === "enum") {
          value = `( ${(asRecord(schema).enum as string[]).map((v) => JSON.stringify(v)).join(" | ")} )`;
        } else if (form === "json") value = await jsonRule(schema as JsonSchema, index);
        const item = seq(lit(markup.paramOpen(key)), value, lit(markup.paramClose));
        items.push(required ? item : `( ${item} )?`);
      }
      const call = seq(lit(markup.callOpen(tool.function.name)), ...items, lit(markup.callClose));
      calls.push(markup.blockPerCall ? seq(lit(markup.blockOpen), call, lit(markup.blockClose)) : call);
    }
    if (!markup.blockPerCall) {
      begin = markup.blockOpen;
      end = markup.blockClose;
    }
    separator = markup.separator;
  } else {
    for (const { index, tool, free } of tools) {
      const parameters = asRecord(tool.function.parameters);
      const args = await jsonRule(
        (free
          ? { type: "object" }
          : parameters.type === undefined
            ? { ...parameters, type: "object" }
            : parameters) as JsonSchema,
        index,
      );
      const name = tool.function.name;
      calls.push(jsonArgsCall(family, name, args));
    }
    if (family === "deepseek_v3" || family === "deepseek_v31") {
      begin = "<｜tool▁calls▁begin｜>";
      end = "<｜tool▁calls▁end｜>";
    } else if (family === "kimi_k2") {
      begin = "<|tool_calls_section_begin|>";
      end = "<|tool_calls_section_end|>";
    } else separator = "";
  }
  const call = "lmserve-tg-call";
  rules.unshift(`${call} ::= ${calls.length === 1 ? calls[0] : `( ${calls.join(" | ")} )`}`);
  // A Harmony call ends its generation (`<|call|>` is an end-of-generation token): one call only.
  const body = repeat && family !== "openai" ? `${call} ( ${seq(lit(separator), call)} )*` : call;
  return [`root ::= ${seq(lit(begin), body, lit(end))}`, ...rules].join("\n");
}

/**
 * One call whose arguments are the JSON rule `args`:
 * - `mistral` (tokenizer v11+, templates `mistralai-Devstral-*.jinja`, `Ministral-3`; `mistral.ts`):
 *   `[TOOL_CALLS]NAME[ARGS]{…}`, repeated per call;
 * - `deepseek_v3` (R1 / V3, template `deepseek-ai-DeepSeek-R1-*.jinja`; `tokenFormats.ts` `deepseekCall`):
 *   `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>`;
 * - `deepseek_v31` (V3.1, template `deepseek-ai-DeepSeek-V3.1.jinja`): `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>`;
 * - `kimi_k2` (template `moonshotai-Kimi-K2.jinja`; `kimiCall`):
 *   `<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|>` (the index is
 *   dropped by the parser, so every call writes `0`);
 * - `openai` (gpt-oss's Harmony, template `openai-gpt-oss-120b.jinja`; `harmony.ts`):
 *   `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}`, as the model writes a call
 *   after `<|start|>assistant`. The grammar stops after the arguments: the model's `<|call|>` is an
 *   end-of-generation token, which llama.cpp's grammar admits only once the grammar is complete (a
 *   literal `<|call|>` could never be matched by it), and the parser ends the message where generation ends.
 */
function jsonArgsCall(family: ToolGrammarFamily, name: string, args: string): string {
  switch (family) {
    case "deepseek_v3":
      return seq(
        lit(`<｜tool▁call▁begin｜>function<｜tool▁sep｜>${name}\n\`\`\`json\n`),
        args,
        lit("\n```<｜tool▁call▁end｜>"),
      );
    case "deepseek_v31":
      return seq(lit(`<｜tool▁call▁begin｜>${name}<｜tool▁sep｜>`), args, lit("<｜tool▁call▁end｜>"));
    case "kimi_k2":
      return seq(
        lit(`<|tool_call_begin|>functions.${name}:0<|tool_call_argument_begin|>`),
        args,
        lit("<|tool_call_end|>"),
      );
    case "openai":
      return seq(lit(`<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>`), args);
    default:
      return seq(lit(`[TOOL_CALLS]${name}[ARGS]`), args);
  }
}

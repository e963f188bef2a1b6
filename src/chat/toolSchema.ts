/**
 * The JSON Schema that forces a tool call when `tool_choice` is `"required"` or names a function (the
 * `tools` / `tool_choice` request shapes are `protocol/tools.ts`).
 */
import { badRequest } from "../errors.ts";
import type { ChatTool, ToolChoice } from "../protocol/tools.ts";

/** A JSON Schema document (as plain data). */
export type JsonSchema = Record<string, unknown>;

function hasKeys(value: Record<string, unknown> | undefined): value is Record<string, unknown> {
  return value !== undefined && Object.keys(value).length > 0;
}

/** Keywords whose values are instances, not schemas: a `$ref` inside them is data. */
const INSTANCE_KEYWORDS = new Set(["const", "enum", "default", "examples", "example"]);

/**
 * A copy of `schema` (a tool's `parameters`) whose local JSON-pointer `$ref`s (`#`, `#/$defs/...`) point
 * where the schema now stands, the JSON pointer `at` of the call schema around it: they were written
 * against the parameters as the root. Other references (`#anchor`, URLs) are left for the compiler to
 * refuse as it refuses them anywhere.
 */
function rebaseRefs(schema: unknown, at: string): unknown {
  if (Array.isArray(schema)) return schema.map((item) => rebaseRefs(item, at));
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    const rebased =
      key === "$ref" && typeof value === "string" && (value === "#" || value.startsWith("#/"))
        ? `${at}${value.slice(1)}`
        : INSTANCE_KEYWORDS.has(key)
          ? value
          : rebaseRefs(value, at);
    Object.defineProperty(out, key, { value: rebased, writable: true, enumerable: true, configurable: true });
  }
  return out;
}

/**
 * The schema of one call of `tool`: `{"name": <const>, "arguments": <its parameters>}`, name first, at
 * JSON pointer `at` of the forced schema.
 */
function callSchema(tool: ChatTool, at: string, argumentsKey: string): JsonSchema {
  return {
    type: "object",
    properties: {
      name: { type: "string", const: tool.function.name },
      [argumentsKey]: hasKeys(tool.function.parameters)
        ? rebaseRefs(tool.function.parameters, `${at}/properties/${argumentsKey}`)
        : { type: "object", properties: {} },
    },
    required: ["name", argumentsKey],
    additionalProperties: false,
  };
}

/**
 * The JSON Schema a grammar must force so the output is the tool call(s) `toolChoice` demands, or
 * `undefined` when nothing is forced (`"auto"`, `"none"`, or no `tool_choice`).
 *
 * Forced output shape (what the `generic` tool parser then reads back):
 * - one call (`parallel` false): `{"name": "<tool name>", "arguments": {...}}` — an object whose `name` is
 *   the tool's name as a constant and whose `arguments` follow that tool's `parameters` schema (any object
 *   when it has none or `{}`); properties in that order, no others;
 * - `parallel` true: a JSON array of one or more such objects (`minItems: 1`);
 * - `"required"`: each object may be any of the tools (`anyOf` over them); a named choice: only that tool.
 *
 * This follows vLLM's `_get_json_schema_from_tool` for `"required"` (array of `{name, parameters}`
 * objects, here with `arguments` as OpenAI names the field), extended to single calls and named choices.
 * `argumentsKey` renames the `arguments` property (Llama 3's native `parameters`); defaults to
 * `"arguments"`.
 * Local `$ref`s in `parameters` (Pydantic's `#/$defs/...`) are rewritten to where the parameters stand.
 * Throws 400 (`param: "tool_choice"`) when a named function is not among `tools`, and 400
 * (`param: "tools"`) when `"required"` or a named choice comes without tools.
 */
export function toolChoiceToJsonSchema(
  tools: readonly ChatTool[] | undefined,
  toolChoice: ToolChoice | undefined,
  parallel: boolean,
  argumentsKey = "arguments",
): JsonSchema | undefined {
  if (toolChoice === undefined || toolChoice === "none" || toolChoice === "auto") return undefined;
  if (!tools || tools.length === 0) {
    throw badRequest("`tool_choice` requires at least one tool in `tools`.", "tools");
  }
  let item: JsonSchema;
  const at = parallel ? "#/items" : "#";
  if (toolChoice === "required") {
    const options = tools.map((tool, i) =>
      callSchema(tool, tools.length === 1 ? at : `${at}/anyOf/${i}`, argumentsKey),
    );
    item = options.length === 1 ? (options[0] as JsonSchema) : { anyOf: options };
  } else {
    const wanted = toolChoice.function.name;
    const tool = tools.find((candidate) => candidate.function.name === wanted);
    if (!tool) {
      throw badRequest(
        `tool_choice names the function '${wanted}', which is not among the tools: ${tools.map((t) => t.function.name).join(", ")}.`,
        "tool_choice",
      );
    }
    item = callSchema(tool, at, argumentsKey);
  }
  return parallel ? { type: "array", items: item, minItems: 1 } : item;
}

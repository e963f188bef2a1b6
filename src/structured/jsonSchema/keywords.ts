/**
 * The JSON Schema keywords the grammar compiler understands, and a first pass over a whole schema document
 * that refuses everything else with a 400 naming the keyword and its JSON pointer, e.g.
 * "Unsupported JSON Schema keyword 'patternProperties' at #/properties/foo".
 */
import { badRequest } from "../../errors.ts";
import { parseRegex, RegexError } from "../regexParser.ts";
import { regexBadRequest } from "../regexToGbnf.ts";
import { isSupportedFormat, SUPPORTED_FORMATS } from "./formats.ts";

/** A JSON Schema: a boolean schema or an object of keywords. */
export type Schema = boolean | SchemaObject;
/** An object schema. */
export type SchemaObject = { [keyword: string]: unknown };

/** Keywords that only annotate and are ignored (JSON Schema 2020-12 meta-data and core vocabulary). */
export const ANNOTATIONS = new Set([
  "title",
  "description",
  "examples",
  "$schema",
  "$id",
  "default",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
]);

/** Keywords that constrain the output and are compiled. */
export const CONSTRAINTS = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "unevaluatedProperties",
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "allOf",
  "$ref",
  "$defs",
  "definitions",
  "items",
  "prefixItems",
  "additionalItems",
  "minItems",
  "maxItems",
  "uniqueItems",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "nullable",
]);

/** The JSON Schema type names. */
export const TYPE_NAMES = ["string", "number", "integer", "boolean", "object", "array", "null"] as const;
/** One JSON Schema type name. */
export type TypeName = (typeof TYPE_NAMES)[number];

/** Escapes one JSON pointer segment (RFC 6901: `~` → `~0`, `/` → `~1`). */
export function pointerSegment(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

const isObject = (v: unknown): v is SchemaObject => typeof v === "object" && v !== null && !Array.isArray(v);
const isSchema = (v: unknown): v is Schema => typeof v === "boolean" || isObject(v);
const isCount = (v: unknown): boolean => typeof v === "number" && Number.isInteger(v) && v >= 0;

/**
 * Walks every subschema of `root` (including `$defs`/`definitions`) and throws `ApiError` 400 (`param`) at the
 * first keyword that is unknown, malformed or refused (`uniqueItems: true`, unknown `format`, non-local
 * `$ref`, invalid or unsupported `pattern`), naming it with its JSON pointer.
 */
export function checkSchemaKeywords(root: unknown, param: string): void {
  const fail = (message: string): never => {
    throw badRequest(message, param);
  };
  const walk = (schema: unknown, path: string): void => {
    if (typeof schema === "boolean") return;
    if (!isObject(schema)) fail(`The JSON Schema at ${path} must be an object or a boolean.`);
    const s = schema as SchemaObject;
    for (const key of Object.keys(s)) {
      if (!ANNOTATIONS.has(key) && !CONSTRAINTS.has(key))
        fail(`Unsupported JSON Schema keyword '${key}' at ${path}`);
    }
    const bad = (key: string, what: string): never =>
      fail(`JSON Schema keyword '${key}' at ${path} must be ${what}.`);
    const sub = (key: string): string => `${path}/${pointerSegment(key)}`;

    if ("type" in s) {
      const types = Array.isArray(s.type) ? s.type : [s.type];
      if (types.length === 0) bad("type", "a type name or a non-empty array of type names");
      for (const t of types) {
        if (typeof t !== "string" || !(TYPE_NAMES as readonly string[]).includes(t)) {
          bad("type", `one of ${TYPE_NAMES.join(", ")} (or an array of them), got ${JSON.stringify(t)}`);
        }
      }
    }
    for (const key of ["properties", "$defs", "definitions"]) {
      if (!(key in s)) continue;
      const map = s[key];
      if (!isObject(map)) bad(key, "an object of schemas");
      for (const [name, child] of Object.entries(map as SchemaObject))
        walk(child, `${sub(key)}/${pointerSegment(name)}`);
    }
    if ("required" in s && (!Array.isArray(s.required) || s.required.some((r) => typeof r !== "string"))) {
      bad("required", "an array of strings");
    }
    for (const key of ["additionalProperties", "additionalItems"]) {
      if (key in s) {
        if (!isSchema(s[key])) bad(key, "a schema or a boolean");
        walk(s[key], sub(key));
      }
    }
    if ("unevaluatedProperties" in s && s.unevaluatedProperties !== false) {
      fail(`Unsupported JSON Schema keyword 'unevaluatedProperties' at ${path} (only false is supported)`);
    }
    if ("items" in s) {
      if (Array.isArray(s.items)) {
        for (const [i, child] of s.items.entries()) walk(child, `${sub("items")}/${i}`);
      } else if (isSchema(s.items)) walk(s.items, sub("items"));
      else bad("items", "a schema, a boolean or an array of schemas");
    }
    for (const key of ["anyOf", "oneOf", "allOf", "prefixItems"]) {
      if (!(key in s)) continue;
      const list = s[key];
      if (!Array.isArray(list) || (key !== "prefixItems" && list.length === 0))
        bad(key, "a non-empty array of schemas");
      for (const [i, child] of (list as unknown[]).entries()) walk(child, `${sub(key)}/${i}`);
    }
    if ("enum" in s && (!Array.isArray(s.enum) || s.enum.length === 0)) bad("enum", "a non-empty array");
    if ("$ref" in s) {
      if (typeof s.$ref !== "string") bad("$ref", "a string");
      if (!(s.$ref as string).startsWith("#")) {
        fail(
          `Unsupported $ref '${s.$ref}' at ${path}: only local references ('#', '#/$defs/...') are supported`,
        );
      }
    }
    for (const key of ["minItems", "maxItems", "minLength", "maxLength"]) {
      if (key in s && !isCount(s[key])) bad(key, "a non-negative integer");
    }
    if ("uniqueItems" in s) {
      if (typeof s.uniqueItems !== "boolean") bad("uniqueItems", "a boolean");
      if (s.uniqueItems) {
        fail(
          `Unsupported JSON Schema keyword 'uniqueItems' at ${path}: a grammar cannot enforce unique items`,
        );
      }
    }
    for (const key of ["minimum", "maximum"]) {
      if (key in s && (typeof s[key] !== "number" || !Number.isFinite(s[key]))) bad(key, "a number");
    }
    for (const key of ["exclusiveMinimum", "exclusiveMaximum"]) {
      if (
        key in s &&
        typeof s[key] !== "boolean" &&
        (typeof s[key] !== "number" || !Number.isFinite(s[key]))
      ) {
        bad(key, "a number (or a boolean, draft 4)");
      }
    }
    if ("nullable" in s && typeof s.nullable !== "boolean") bad("nullable", "a boolean");
    if ("format" in s) {
      if (typeof s.format !== "string") bad("format", "a string");
      if (!isSupportedFormat(s.format as string)) {
        fail(
          `Unsupported JSON Schema format '${s.format}' at ${path} (supported: ${SUPPORTED_FORMATS.join(", ")})`,
        );
      }
    }
    if ("pattern" in s) {
      if (typeof s.pattern !== "string") bad("pattern", "a string");
      try {
        parseRegex(s.pattern as string);
      } catch (error) {
        if (error instanceof RegexError)
          throw regexBadRequest(error, s.pattern as string, param, ` at ${sub("pattern")}`);
        throw error;
      }
    }
  };
  walk(root, "#");
}

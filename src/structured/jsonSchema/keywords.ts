/**
 * The JSON Schema keywords the grammar compiler understands, and a first pass over a whole schema document
 * that refuses everything else with a 400 naming the keyword and its JSON pointer, e.g.
 * "Unsupported JSON Schema keyword 'patternProperties' at #/properties/foo".
 */
import { badRequest } from "../../errors.ts";
import { parseRegex, RegexError } from "../regexParser.ts";
import { regexBadRequest } from "../regexToGbnf.ts";
import { isUnsupportedStandardFormat, SUPPORTED_FORMATS } from "./formats.ts";

/** A JSON Schema: a boolean schema or an object of keywords. */
export type Schema = boolean | SchemaObject;
/** An object schema. */
export type SchemaObject = { [keyword: string]: unknown };

/**
 * Keywords that only annotate (JSON Schema 2020-12 meta-data and core vocabulary, plus draft-04 `id`). They
 * and every keyword not named in {@link CONSTRAINTS} or {@link REFUSED} (vendor extensions such as `x-*`,
 * misspellings, OpenAPI's `example`, lowercase `readonly`...) are ignored, as the specification says of
 * unknown keywords.
 */
export const ANNOTATIONS = new Set([
  "title",
  "description",
  "examples",
  "$schema",
  "$id",
  "id",
  "$anchor",
  "$dynamicAnchor",
  "$vocabulary",
  "default",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
  "contentEncoding",
  "contentMediaType",
  "contentSchema",
]);

/** The keywords that apply to objects only. */
export const OBJECT_KEYWORDS = [
  "properties",
  "required",
  "additionalProperties",
  "unevaluatedProperties",
  "patternProperties",
  "propertyNames",
  "minProperties",
  "maxProperties",
  "dependentRequired",
  "dependentSchemas",
  "dependencies",
];

/** Keywords that constrain the output and are compiled (some only in the forms the docs list). */
export const CONSTRAINTS = new Set([
  "type",
  ...OBJECT_KEYWORDS,
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "allOf",
  "not",
  "if",
  "then",
  "else",
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
  "multipleOf",
  "nullable",
]);

/** Standard assertions a grammar cannot enforce: refused wherever a compiled subschema uses them. */
export const REFUSED = new Set([
  "contains",
  "minContains",
  "maxContains",
  "unevaluatedItems",
  "$dynamicRef",
  "$recursiveRef",
]);

/** True when `key` is a keyword the compiler acts on (a constraint, not an annotation or unknown keyword). */
export function isConstraint(key: string): boolean {
  return CONSTRAINTS.has(key) && key !== "$defs" && key !== "definitions";
}

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

/** Resolves a local `$ref` (`#` or `#/json/pointer`) in `root`; undefined when it does not resolve. */
export function resolveLocalRef(root: unknown, ref: string): unknown {
  if (!ref.startsWith("#")) return undefined;
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined;
  }
  if (fragment !== "" && !fragment.startsWith("/")) return undefined;
  let node: unknown = root;
  for (const raw of fragment === "" ? [] : fragment.slice(1).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(node) && /^\d+$/.test(key)) node = node[Number(key)];
    else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
    else return undefined;
  }
  return node;
}

/**
 * Walks every subschema of `root` that the compiler can reach (from the root through subschema keywords and
 * local `$ref`s; unreferenced `$defs`/`definitions` are skipped) and throws `ApiError` 400 (`param`) at the
 * first keyword that is malformed or refused ({@link REFUSED} assertions, a standard `format` we cannot
 * enforce, non-local `$ref`, invalid or unsupported `pattern`/`patternProperties` regex), naming it with its
 * JSON pointer. Annotations and unknown keywords are ignored. Inexpressible combinations of supported
 * keywords are found later, by the compiler.
 */
export function checkSchemaKeywords(root: unknown, param: string): void {
  const fail = (message: string): never => {
    throw badRequest(message, param);
  };
  const seenRefs = new Set<string>();
  const checkRegex = (pattern: unknown, where: string): void => {
    if (typeof pattern !== "string") fail(`The regular expression at ${where} must be a string.`);
    try {
      parseRegex(pattern as string);
    } catch (error) {
      if (error instanceof RegexError) throw regexBadRequest(error, pattern as string, param, ` at ${where}`);
      throw error;
    }
  };
  const walk = (schema: unknown, path: string): void => {
    if (typeof schema === "boolean") return;
    if (!isObject(schema)) fail(`The JSON Schema at ${path} must be an object or a boolean.`);
    const s = schema as SchemaObject;
    for (const key of Object.keys(s)) {
      if (REFUSED.has(key)) fail(`Unsupported JSON Schema keyword '${key}' at ${path}`);
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
    for (const key of ["properties", "patternProperties", "dependentSchemas"]) {
      if (!(key in s)) continue;
      const map = s[key];
      if (!isObject(map)) bad(key, "an object of schemas");
      for (const [name, child] of Object.entries(map as SchemaObject)) {
        if (key === "patternProperties") checkRegex(name, sub(key));
        walk(child, `${sub(key)}/${pointerSegment(name)}`);
      }
    }
    const isNames = (v: unknown): boolean => Array.isArray(v) && v.every((r) => typeof r === "string");
    if ("required" in s && !isNames(s.required)) bad("required", "an array of strings");
    if ("dependentRequired" in s) {
      if (!isObject(s.dependentRequired) || !Object.values(s.dependentRequired).every(isNames))
        bad("dependentRequired", "an object of string arrays");
    }
    if ("dependencies" in s) {
      if (!isObject(s.dependencies)) bad("dependencies", "an object of schemas or string arrays");
      for (const [name, child] of Object.entries(s.dependencies as SchemaObject)) {
        if (isNames(child)) continue;
        if (!isSchema(child)) bad("dependencies", "an object of schemas or string arrays");
        walk(child, `${sub("dependencies")}/${pointerSegment(name)}`);
      }
    }
    for (const key of [
      "additionalProperties",
      "additionalItems",
      "propertyNames",
      "not",
      "if",
      "then",
      "else",
    ]) {
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
      const ref = s.$ref as string;
      if (!ref.startsWith("#")) {
        fail(
          `Unsupported $ref '${ref.slice(0, 200)}' at ${path}: only local references ('#', '#/$defs/...') are supported`,
        );
      }
      if (!seenRefs.has(ref)) {
        seenRefs.add(ref);
        const target = resolveLocalRef(root, ref);
        if (target !== undefined) walk(target, ref);
      }
    }
    for (const key of ["minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"]) {
      if (key in s && !isCount(s[key])) bad(key, "a non-negative integer");
    }
    if ("uniqueItems" in s && typeof s.uniqueItems !== "boolean") bad("uniqueItems", "a boolean");
    for (const key of ["minimum", "maximum"]) {
      if (key in s && (typeof s[key] !== "number" || !Number.isFinite(s[key]))) bad(key, "a number");
    }
    if ("multipleOf" in s && (typeof s.multipleOf !== "number" || !(s.multipleOf > 0)))
      bad("multipleOf", "a number greater than 0");
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
      if (isUnsupportedStandardFormat(s.format as string)) {
        fail(
          `Unsupported JSON Schema format '${s.format}' at ${path} (supported: ${SUPPORTED_FORMATS.join(", ")}; formats outside the standard are ignored)`,
        );
      }
    }
    if ("pattern" in s) checkRegex(s.pattern, sub("pattern"));
  };
  walk(root, "#");
}

/**
 * The JSON Schema keywords the grammar compiler understands, and a first pass over a whole schema document
 * that refuses everything else with a 400 naming the keyword and its JSON pointer, e.g.
 * "Unsupported JSON Schema keyword 'patternProperties' at #/properties/foo".
 */

import { ConstraintError } from "../errors.ts";
import { parseRegex, RegexError } from "../regex/regexParser.ts";
import { regexBadRequest } from "../regex/regexToGbnf.ts";
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

/**
 * An internal keyword that only the compiler writes (a request schema that uses it is refused, see
 * {@link REFUSED}), in merged schemas (`allOf` with different `pattern`s): the further patterns a string must
 * match besides `pattern`, as a list. The string compiler intersects them all.
 */
export const EXTRA_PATTERNS = "$lmserve:patterns";

/**
 * An internal keyword that only the compiler writes (refused in requests), in negated schemas
 * (`not: {pattern}`): patterns a string must not match, as a list. The string compiler intersects their
 * complements.
 */
export const NOT_PATTERNS = "$lmserve:notPatterns";

/**
 * An internal keyword that only the compiler writes (refused in requests), in negated schemas
 * (`not: {format}`): supported formats a string must not be, as a list. The string compiler intersects the
 * complements of their automata.
 */
export const NOT_FORMATS = "$lmserve:notFormats";

/** The formats a string schema forbids ({@link NOT_FORMATS}). */
export function stringNotFormats(s: SchemaObject): string[] {
  return Array.isArray(s[NOT_FORMATS]) ? (s[NOT_FORMATS] as string[]) : [];
}

/** The patterns a string schema forbids ({@link NOT_PATTERNS}). */
export function stringNotPatterns(s: SchemaObject): string[] {
  return Array.isArray(s[NOT_PATTERNS]) ? (s[NOT_PATTERNS] as string[]) : [];
}

/** The `pattern`s a string schema asserts: its own and its {@link EXTRA_PATTERNS}. */
export function stringPatterns(s: SchemaObject): string[] {
  const own = typeof s.pattern === "string" ? [s.pattern] : [];
  const extra = Array.isArray(s[EXTRA_PATTERNS]) ? (s[EXTRA_PATTERNS] as string[]) : [];
  return [...own, ...extra];
}

/**
 * An internal keyword that only the compiler writes (a request schema that uses it is refused, see
 * {@link REFUSED}): `true` means that a number must not be an integer. It is what `not: {type: "integer"}`
 * leaves of the numbers, e.g. in the `number` branch of `oneOf: [{type: "integer"}, {type: "number"}]`.
 * Other types are not affected; without `type` the schema is read as a number.
 */
export const NON_INTEGER = "$lmserve:nonInteger";

/** The keywords that apply to arrays only. */
export const ARRAY_KEYWORDS = [
  "items",
  "prefixItems",
  "additionalItems",
  "minItems",
  "maxItems",
  "uniqueItems",
];

/** The keywords that apply to strings only (the internal ones included). */
export const STRING_KEYWORDS = [
  "minLength",
  "maxLength",
  "pattern",
  "format",
  EXTRA_PATTERNS,
  NOT_PATTERNS,
  NOT_FORMATS,
];

/** The keywords that apply to numbers only (the internal one included). */
export const NUMBER_KEYWORDS = [
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  NON_INTEGER,
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
  ...ARRAY_KEYWORDS,
  ...STRING_KEYWORDS,
  ...NUMBER_KEYWORDS,
  "nullable",
]);

/**
 * Standard assertions a grammar cannot enforce, and the compiler's internal keywords ({@link NON_INTEGER},
 * {@link EXTRA_PATTERNS}, {@link NOT_PATTERNS}, {@link NOT_FORMATS}): refused wherever a request schema uses
 * them.
 */
export const REFUSED = new Set([
  "contains",
  "minContains",
  "maxContains",
  "unevaluatedItems",
  "$dynamicRef",
  "$recursiveRef",
  NON_INTEGER,
  EXTRA_PATTERNS,
  NOT_PATTERNS,
  NOT_FORMATS,
]);

/** True when `key` is a keyword the compiler acts on (a constraint, not an annotation or unknown keyword). */
export function isConstraint(key: string): boolean {
  return CONSTRAINTS.has(key) && key !== "$defs" && key !== "definitions";
}

/** The JSON Schema type names. */
export const TYPE_NAMES = ["string", "number", "integer", "boolean", "object", "array", "null"] as const;
/** One JSON Schema type name. */
export type TypeName = (typeof TYPE_NAMES)[number];

/** The type names a `type` keyword value lists (one name or an array; not checked here). */
export function typeSet(type: unknown): TypeName[] {
  return (Array.isArray(type) ? type : [type]) as TypeName[];
}

/** The conjunction of `schemas` (at least one): the schema itself for one, else their `allOf`. */
export const allOf = (schemas: Schema[]): Schema => (schemas.length === 1 ? schemas[0]! : { allOf: schemas });

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
 * A JSON pointer built while walking a schema, spelled out only when an error names it: the root (`#`, or a
 * `$ref` string for a walk from a reference target) or a parent and one unescaped key.
 */
type Pointer = string | { readonly up: Pointer; readonly key: string };

/** The text of a {@link Pointer}, e.g. `#/properties/a~1b`. */
function pointerText(at: Pointer): string {
  const keys: string[] = [];
  let node = at;
  while (typeof node !== "string") {
    keys.push(pointerSegment(node.key));
    node = node.up;
  }
  return keys.length === 0 ? node : `${node}/${keys.reverse().join("/")}`;
}

const SCHEMA_MAPS = ["properties", "patternProperties", "dependentSchemas"];
const SCHEMA_VALUED = [
  "additionalProperties",
  "additionalItems",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
];
const SCHEMA_LISTS = ["anyOf", "oneOf", "allOf", "prefixItems"];
const COUNTS = ["minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"];
const isNames = (v: unknown): boolean => Array.isArray(v) && v.every((r) => typeof r === "string");

/** Groups of the keywords {@link checkSchemaKeywords} checks, as bits, so a subschema skips absent groups. */
const G_TYPE = 1;
const G_MAPS = 2;
const G_DEPENDENCIES = 4;
const G_VALUED = 8;
const G_ITEMS = 16;
const G_LISTS = 32;
const G_REF = 64;
const G_SCALAR = 128;
const KEY_GROUPS = new Map<string, number>([
  ["type", G_TYPE],
  ...SCHEMA_MAPS.map((k) => [k, G_MAPS] as [string, number]),
  ...["required", "dependentRequired", "dependencies"].map((k) => [k, G_DEPENDENCIES] as [string, number]),
  ...[...SCHEMA_VALUED, "unevaluatedProperties"].map((k) => [k, G_VALUED] as [string, number]),
  ["items", G_ITEMS],
  ...[...SCHEMA_LISTS, "enum"].map((k) => [k, G_LISTS] as [string, number]),
  ["$ref", G_REF],
  ...[
    ...COUNTS,
    "uniqueItems",
    "minimum",
    "maximum",
    "multipleOf",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "nullable",
    "format",
    "pattern",
  ].map((k) => [k, G_SCALAR] as [string, number]),
]);

/** Throws the 400 (`param`) for keyword `key` at `at` when its value is not `what`. */
function badKeyword(param: string, at: Pointer, key: string, what: string): never {
  throw new ConstraintError(`JSON Schema keyword '${key}' at ${pointerText(at)} must be ${what}.`, param);
}

/**
 * Walks every subschema of `root` that the compiler can reach (from the root through subschema keywords and
 * local `$ref`s; unreferenced `$defs`/`definitions` are skipped) and throws `ApiError` 400 (`param`) at the
 * first keyword that is malformed or refused ({@link REFUSED} assertions, a standard `format` we cannot
 * enforce, non-local `$ref`, invalid or unsupported `pattern`/`patternProperties` regex), naming it with its
 * JSON pointer. Annotations and unknown keywords are ignored. Inexpressible combinations of supported
 * keywords are found later, by the compiler. Pointers are spelled out only for the error (a large schema
 * has tens of thousands of subschemas).
 */
export function checkSchemaKeywords(root: unknown, param: string): void {
  const fail = (message: string): never => {
    throw new ConstraintError(message, param);
  };
  const seenRefs = new Set<string>();
  /** Patterns already parsed without error (large schemas repeat a few patterns hundreds of times). */
  const validPatterns = new Set<string>();
  const checkRegex = (pattern: unknown, where: Pointer): void => {
    if (typeof pattern !== "string")
      fail(`The regular expression at ${pointerText(where)} must be a string.`);
    if (validPatterns.has(pattern as string)) return;
    try {
      parseRegex(pattern as string);
      validPatterns.add(pattern as string);
    } catch (error) {
      if (error instanceof RegexError)
        throw regexBadRequest(error, pattern as string, param, ` at ${pointerText(where)}`);
      throw error;
    }
  };
  const walk = (schema: unknown, at: Pointer): void => {
    if (typeof schema === "boolean") return;
    if (!isObject(schema)) fail(`The JSON Schema at ${pointerText(at)} must be an object or a boolean.`);
    const s = schema as SchemaObject;
    let groups = 0;
    for (const key in s) {
      if (REFUSED.has(key)) fail(`Unsupported JSON Schema keyword '${key}' at ${pointerText(at)}`);
      groups |= KEY_GROUPS.get(key) ?? 0;
    }
    if (groups === 0) return;
    // (No closures per subschema here: under tsx's keepNames each one costs a defineProperty.)

    if (groups & G_TYPE && "type" in s) {
      const types = Array.isArray(s.type) ? s.type : [s.type];
      if (types.length === 0) badKeyword(param, at, "type", "a type name or a non-empty array of type names");
      for (const t of types) {
        if (typeof t !== "string" || !(TYPE_NAMES as readonly string[]).includes(t)) {
          badKeyword(
            param,
            at,
            "type",
            `one of ${TYPE_NAMES.join(", ")} (or an array of them), got ${JSON.stringify(t)}`,
          );
        }
      }
    }
    for (const key of groups & G_MAPS ? SCHEMA_MAPS : []) {
      if (!(key in s)) continue;
      const map = s[key];
      if (!isObject(map)) badKeyword(param, at, key, "an object of schemas");
      const here: Pointer = { up: at, key };
      for (const name in map as SchemaObject) {
        if (key === "patternProperties") checkRegex(name, here);
        walk((map as SchemaObject)[name], { up: here, key: name });
      }
    }
    if (groups & G_DEPENDENCIES && "required" in s && !isNames(s.required))
      badKeyword(param, at, "required", "an array of strings");
    if (groups & G_DEPENDENCIES && "dependentRequired" in s) {
      if (!isObject(s.dependentRequired) || !Object.values(s.dependentRequired).every(isNames))
        badKeyword(param, at, "dependentRequired", "an object of string arrays");
    }
    if (groups & G_DEPENDENCIES && "dependencies" in s) {
      if (!isObject(s.dependencies))
        badKeyword(param, at, "dependencies", "an object of schemas or string arrays");
      for (const [name, child] of Object.entries(s.dependencies as SchemaObject)) {
        if (isNames(child)) continue;
        if (!isSchema(child)) badKeyword(param, at, "dependencies", "an object of schemas or string arrays");
        walk(child, { up: { up: at, key: "dependencies" }, key: name });
      }
    }
    for (const key of groups & G_VALUED ? SCHEMA_VALUED : []) {
      if (key in s) {
        if (!isSchema(s[key])) badKeyword(param, at, key, "a schema or a boolean");
        walk(s[key], { up: at, key });
      }
    }
    if (groups & G_VALUED && "unevaluatedProperties" in s && s.unevaluatedProperties !== false) {
      fail(
        `Unsupported JSON Schema keyword 'unevaluatedProperties' at ${pointerText(at)} (only false is supported)`,
      );
    }
    if (groups & G_ITEMS && "items" in s) {
      if (Array.isArray(s.items)) {
        const here: Pointer = { up: at, key: "items" };
        for (let i = 0; i < s.items.length; i++) walk(s.items[i], { up: here, key: String(i) });
      } else if (isSchema(s.items)) walk(s.items, { up: at, key: "items" });
      else badKeyword(param, at, "items", "a schema, a boolean or an array of schemas");
    }
    for (const key of groups & G_LISTS ? SCHEMA_LISTS : []) {
      if (!(key in s)) continue;
      const list = s[key];
      if (!Array.isArray(list) || (key !== "prefixItems" && list.length === 0))
        badKeyword(param, at, key, "a non-empty array of schemas");
      const here: Pointer = { up: at, key };
      for (let i = 0; i < (list as unknown[]).length; i++)
        walk((list as unknown[])[i], { up: here, key: String(i) });
    }
    if (groups & G_LISTS && "enum" in s && (!Array.isArray(s.enum) || s.enum.length === 0))
      badKeyword(param, at, "enum", "a non-empty array");
    if (groups & G_REF && "$ref" in s) {
      if (typeof s.$ref !== "string") badKeyword(param, at, "$ref", "a string");
      const ref = s.$ref as string;
      if (!ref.startsWith("#")) {
        fail(
          `Unsupported $ref '${ref.slice(0, 200)}' at ${pointerText(at)}: only local references ('#', '#/$defs/...') are supported`,
        );
      }
      if (!seenRefs.has(ref)) {
        seenRefs.add(ref);
        const target = resolveLocalRef(root, ref);
        if (target !== undefined) walk(target, ref);
      }
    }
    if (!(groups & G_SCALAR)) return;
    for (const key of COUNTS) {
      if (key in s && !isCount(s[key])) badKeyword(param, at, key, "a non-negative integer");
    }
    if ("uniqueItems" in s && typeof s.uniqueItems !== "boolean")
      badKeyword(param, at, "uniqueItems", "a boolean");
    if ("minimum" in s && (typeof s.minimum !== "number" || !Number.isFinite(s.minimum)))
      badKeyword(param, at, "minimum", "a number");
    if ("maximum" in s && (typeof s.maximum !== "number" || !Number.isFinite(s.maximum)))
      badKeyword(param, at, "maximum", "a number");
    if ("multipleOf" in s && (typeof s.multipleOf !== "number" || !(s.multipleOf > 0)))
      badKeyword(param, at, "multipleOf", "a number greater than 0");
    for (const key of ["exclusiveMinimum", "exclusiveMaximum"]) {
      if (
        key in s &&
        typeof s[key] !== "boolean" &&
        (typeof s[key] !== "number" || !Number.isFinite(s[key]))
      ) {
        badKeyword(param, at, key, "a number (or a boolean, draft 4)");
      }
    }
    if ("nullable" in s && typeof s.nullable !== "boolean") badKeyword(param, at, "nullable", "a boolean");
    if ("format" in s) {
      if (typeof s.format !== "string") badKeyword(param, at, "format", "a string");
      if (isUnsupportedStandardFormat(s.format as string)) {
        fail(
          `Unsupported JSON Schema format '${s.format}' at ${pointerText(at)} (supported: ${SUPPORTED_FORMATS.join(", ")}; formats outside the standard are ignored)`,
        );
      }
    }
    if ("pattern" in s) checkRegex(s.pattern, { up: at, key: "pattern" });
  };
  walk(root, "#");
}

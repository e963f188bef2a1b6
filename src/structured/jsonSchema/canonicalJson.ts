/**
 * A canonical JSON text of a guided-decoding spec, used as a cache key: object keys of schemas are sorted,
 * except the keys of `properties`, whose order is significant (the grammar writes properties in declared
 * order). Values of `const`, `enum`, `default` and `examples` are kept verbatim.
 */

const SCHEMA_MAPS = new Set(["$defs", "definitions", "dependentSchemas"]);
const SCHEMA_VALUES = new Set([
  "additionalProperties",
  "unevaluatedProperties",
  "additionalItems",
  "items",
  "contains",
  "not",
  "if",
  "then",
  "else",
  "propertyNames",
]);
const SCHEMA_LISTS = new Set(["allOf", "anyOf", "oneOf", "prefixItems", "items"]);

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const sortedKeys = (o: Record<string, unknown>): string[] => Object.keys(o).sort();

function schemaText(schema: unknown): string {
  if (!isObject(schema)) return JSON.stringify(schema) ?? "null";
  const parts = sortedKeys(schema).map((key) => {
    const value = schema[key];
    let text: string;
    if (key === "properties" && isObject(value)) {
      text = `{${Object.keys(value)
        .map((name) => `${JSON.stringify(name)}:${schemaText(value[name])}`)
        .join(",")}}`;
    } else if (SCHEMA_MAPS.has(key) && isObject(value)) {
      text = `{${sortedKeys(value)
        .map((name) => `${JSON.stringify(name)}:${schemaText(value[name])}`)
        .join(",")}}`;
    } else if (SCHEMA_LISTS.has(key) && Array.isArray(value)) {
      text = `[${value.map(schemaText).join(",")}]`;
    } else if (SCHEMA_VALUES.has(key)) {
      text = schemaText(value);
    } else {
      text = JSON.stringify(value) ?? "null";
    }
    return `${JSON.stringify(key)}:${text}`;
  });
  return `{${parts.join(",")}}`;
}

/**
 * Canonical text of a JSON Schema (see module doc); two schemas that differ only in keyword order or `$defs`
 * order get the same text, two that differ in property order do not.
 */
export function canonicalSchemaJson(schema: unknown): string {
  return schemaText(schema);
}

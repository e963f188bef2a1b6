/**
 * A small JSON Schema checker for the playground's structured output: the keywords guided decoding
 * compiles (type, enum, const, properties, required, additionalProperties, items, prefixItems, lengths,
 * bounds, pattern, anyOf/oneOf/allOf, local `$ref`). Unknown keywords are ignored.
 *
 * Why not a validator library (issue 30, measured with `npm run build`): ajv, the one installed,
 * compiles each schema with `new Function`, which the page's Content-Security-Policy (`default-src
 * 'self'`, no `'unsafe-eval'`, `server/ui.ts`) blocks, and it grows the bundle from 40 to 168 KB
 * (15 to 52 KB gzipped), meta-schema URLs included. `@cfworker/json-schema` interprets schemas without
 * eval and adds 19 KB (5 KB gzipped), but it is not a dependency of the project.
 */

type Schema = Record<string, unknown> | boolean;

/**
 * Checks `value` against `schema`; returns the problems found, each as `path: what is wrong`
 * (empty when the value is valid).
 */
export function checkJsonSchema(schema: unknown, value: unknown): string[] {
  const errors: string[] = [];
  check(schema as Schema, value, "$", schema as Schema, errors);
  return errors;
}

function check(schema: Schema, value: unknown, path: string, root: Schema, errors: string[]): void {
  if (schema === true) return;
  if (schema === false) {
    errors.push(`${path}: no value is allowed here`);
    return;
  }
  if (typeof schema !== "object" || schema === null) return;
  const s = schema as Record<string, unknown>;
  if (typeof s.$ref === "string") {
    const target = resolveRef(root, s.$ref);
    if (target === undefined) errors.push(`${path}: cannot resolve $ref ${s.$ref}`);
    else check(target, value, path, root, errors);
  }
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    if (!types.some((type) => hasType(value, type))) {
      errors.push(`${path}: expected ${types.join(" or ")}, got ${typeName(value)}`);
      return;
    }
  }
  if (Array.isArray(s.enum) && !s.enum.some((option) => sameJson(option, value))) {
    errors.push(`${path}: must be one of ${JSON.stringify(s.enum)}`);
  }
  if ("const" in s && !sameJson(s.const, value)) errors.push(`${path}: must be ${JSON.stringify(s.const)}`);
  if (typeof value === "string") checkString(s, value, path, errors);
  if (typeof value === "number") checkNumber(s, value, path, errors);
  if (Array.isArray(value)) checkArray(s, value, path, root, errors);
  else if (typeof value === "object" && value !== null)
    checkObject(s, value as Record<string, unknown>, path, root, errors);
  checkCombinators(s, value, path, root, errors);
}

function checkString(s: Record<string, unknown>, value: string, path: string, errors: string[]): void {
  const length = [...value].length;
  if (typeof s.minLength === "number" && length < s.minLength)
    errors.push(`${path}: shorter than ${s.minLength} characters`);
  if (typeof s.maxLength === "number" && length > s.maxLength)
    errors.push(`${path}: longer than ${s.maxLength} characters`);
  if (typeof s.pattern === "string") {
    try {
      if (!new RegExp(s.pattern, "u").test(value)) errors.push(`${path}: does not match /${s.pattern}/`);
    } catch {
      // a pattern JavaScript cannot compile is not checked
    }
  }
}

function checkNumber(s: Record<string, unknown>, value: number, path: string, errors: string[]): void {
  if (typeof s.minimum === "number" && value < s.minimum) errors.push(`${path}: less than ${s.minimum}`);
  if (typeof s.maximum === "number" && value > s.maximum) errors.push(`${path}: greater than ${s.maximum}`);
  if (typeof s.exclusiveMinimum === "number" && value <= s.exclusiveMinimum)
    errors.push(`${path}: not greater than ${s.exclusiveMinimum}`);
  if (typeof s.exclusiveMaximum === "number" && value >= s.exclusiveMaximum)
    errors.push(`${path}: not less than ${s.exclusiveMaximum}`);
}

function checkArray(
  s: Record<string, unknown>,
  value: unknown[],
  path: string,
  root: Schema,
  errors: string[],
): void {
  if (typeof s.minItems === "number" && value.length < s.minItems)
    errors.push(`${path}: fewer than ${s.minItems} items`);
  if (typeof s.maxItems === "number" && value.length > s.maxItems)
    errors.push(`${path}: more than ${s.maxItems} items`);
  const prefix = Array.isArray(s.prefixItems) ? (s.prefixItems as Schema[]) : [];
  value.forEach((item, index) => {
    const itemSchema = prefix[index] ?? (s.items as Schema | undefined);
    if (itemSchema !== undefined) check(itemSchema, item, `${path}[${index}]`, root, errors);
  });
}

function checkObject(
  s: Record<string, unknown>,
  value: Record<string, unknown>,
  path: string,
  root: Schema,
  errors: string[],
): void {
  const properties = (s.properties ?? {}) as Record<string, Schema>;
  if (Array.isArray(s.required)) {
    for (const key of s.required as string[]) if (!(key in value)) errors.push(`${path}: missing "${key}"`);
  }
  for (const [key, item] of Object.entries(value)) {
    const propertySchema = properties[key];
    if (propertySchema !== undefined) check(propertySchema, item, `${path}.${key}`, root, errors);
    else if (s.additionalProperties !== undefined)
      check(s.additionalProperties as Schema, item, `${path}.${key}`, root, errors);
  }
}

function checkCombinators(
  s: Record<string, unknown>,
  value: unknown,
  path: string,
  root: Schema,
  errors: string[],
): void {
  const passes = (sub: Schema) => {
    const found: string[] = [];
    check(sub, value, path, root, found);
    return found.length === 0;
  };
  if (Array.isArray(s.allOf)) for (const sub of s.allOf as Schema[]) check(sub, value, path, root, errors);
  if (Array.isArray(s.anyOf) && !(s.anyOf as Schema[]).some(passes))
    errors.push(`${path}: matches none of anyOf`);
  if (Array.isArray(s.oneOf) && (s.oneOf as Schema[]).filter(passes).length !== 1)
    errors.push(`${path}: must match exactly one of oneOf`);
}

/** Resolves `#/...` JSON pointers inside the root schema. */
function resolveRef(root: Schema, ref: string): Schema | undefined {
  if (!ref.startsWith("#")) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(1).split("/").filter(Boolean)) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node as Schema | undefined;
}

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "boolean":
      return typeof value === "boolean";
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "number":
      return typeof value === "number";
    case "string":
      return typeof value === "string";
    case "array":
      return Array.isArray(value);
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    default:
      return true;
  }
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && Number.isInteger(value)) return "integer";
  return typeof value;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

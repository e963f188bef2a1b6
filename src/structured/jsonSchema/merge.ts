/**
 * `allOf` support: merging subschemas into one schema that the compiler can turn into a grammar. The merge is
 * the usual conjunction rewrite (as in llama.cpp's `allOf` handling, made general): types intersect,
 * properties union (a property present in both becomes `allOf` of the two, merged lazily when visited),
 * `required` unions, numeric/length bounds take the tighter value, `enum`/`const` intersect, and two
 * `anyOf` lists combine pairwise. A merged object is closed to undeclared properties exactly like any object
 * (see the compiler's `additionalProperties` default), i.e. all branches' properties are allowed.
 */
import { isConstraint, type Schema, type SchemaObject, TYPE_NAMES, type TypeName } from "./keywords.ts";

/** Thrown when the conjunction cannot be expressed or is unsatisfiable; the compiler turns it into a 400. */
export class MergeError extends Error {
  /** True when the branches contradict each other (no instance), false when we cannot express the merge. */
  readonly unsatisfiable: boolean;
  constructor(message: string, unsatisfiable = false) {
    super(message);
    this.unsatisfiable = unsatisfiable;
  }
}

/** Most alternatives an `allOf` of `anyOf`s may expand to. */
export const MAX_MERGED_ALTERNATIVES = 64;

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, value: unknown) =>
    typeof value === "object" && value !== null && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : value,
  );

/** The JSON Schema type set of a `type` keyword value (`integer` ⊂ `number` is handled by intersection). */
function typeSet(type: unknown): TypeName[] {
  return (Array.isArray(type) ? type : [type]) as TypeName[];
}

function intersectTypes(a: unknown, b: unknown): TypeName[] {
  const left = typeSet(a);
  const right = typeSet(b);
  const out = new Set<TypeName>();
  for (const t of TYPE_NAMES) {
    const inLeft = left.includes(t) || (t === "integer" && left.includes("number"));
    const inRight = right.includes(t) || (t === "integer" && right.includes("number"));
    if (inLeft && inRight) out.add(t);
  }
  if (out.has("number")) out.delete("integer");
  return [...out];
}

const both = (a: unknown, b: unknown): SchemaObject => ({ allOf: [a, b] });

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** Converts draft-4 boolean `exclusiveMinimum`/`exclusiveMaximum` to the numeric (draft 6+) form. */
export function normalizeExclusive(s: SchemaObject): SchemaObject {
  if (typeof s.exclusiveMinimum !== "boolean" && typeof s.exclusiveMaximum !== "boolean") return s;
  const out: SchemaObject = { ...s };
  if (typeof s.exclusiveMinimum === "boolean") {
    delete out.exclusiveMinimum;
    if (s.exclusiveMinimum && typeof s.minimum === "number") {
      out.exclusiveMinimum = s.minimum;
      delete out.minimum;
    }
  }
  if (typeof s.exclusiveMaximum === "boolean") {
    delete out.exclusiveMaximum;
    if (s.exclusiveMaximum && typeof s.maximum === "number") {
      out.exclusiveMaximum = s.maximum;
      delete out.maximum;
    }
  }
  return out;
}

/**
 * The conjunction of two schemas without `$ref`/`allOf` at their top level (the caller resolves those).
 * `oneOf` is treated as `anyOf`. Throws {@link MergeError} for unsatisfiable or inexpressible combinations.
 */
export function mergeSchemas(left: Schema, right: Schema): Schema {
  if (left === true) return right;
  if (right === true) return left;
  if (left === false || right === false) return false;
  const a = normalizeExclusive(toAnyOf(left));
  const b = normalizeExclusive(toAnyOf(right));
  const out: SchemaObject = { ...a };
  for (const [key, value] of Object.entries(b)) {
    if (!isConstraint(key)) continue;
    if (!(key in out)) {
      out[key] = value;
      continue;
    }
    const mine = out[key];
    switch (key) {
      case "type": {
        const types = intersectTypes(mine, value);
        if (types.length === 0) throw new MergeError("allOf branches require incompatible types", true);
        out.type = types.length === 1 ? types[0] : types;
        break;
      }
      case "properties": {
        const merged: SchemaObject = { ...(mine as SchemaObject) };
        for (const [name, schema] of Object.entries(value as SchemaObject)) {
          merged[name] = name in merged ? both(merged[name], schema) : schema;
        }
        out.properties = merged;
        break;
      }
      case "required":
        out.required = [...new Set([...(mine as string[]), ...(value as string[])])];
        break;
      case "additionalProperties":
      case "additionalItems":
      case "items":
        out[key] = mine === false || value === false ? false : both(mine, value);
        break;
      case "prefixItems": {
        const x = mine as unknown[];
        const y = value as unknown[];
        out.prefixItems = Array.from({ length: Math.max(x.length, y.length) }, (_, i) =>
          i < x.length && i < y.length ? both(x[i], y[i]) : i < x.length ? x[i] : y[i],
        );
        break;
      }
      case "enum": {
        const allowed = new Set((value as unknown[]).map(canonical));
        const kept = (mine as unknown[]).filter((v) => allowed.has(canonical(v)));
        if (kept.length === 0) throw new MergeError("allOf branches have no enum value in common", true);
        out.enum = kept;
        break;
      }
      case "const":
        if (canonical(mine) !== canonical(value))
          throw new MergeError("allOf branches require different const values", true);
        break;
      case "patternProperties":
      case "dependentSchemas": {
        const merged: SchemaObject = { ...(mine as SchemaObject) };
        for (const [name, schema] of Object.entries(value as SchemaObject)) {
          merged[name] = name in merged ? both(merged[name], schema) : schema;
        }
        out[key] = merged;
        break;
      }
      case "dependentRequired":
      case "dependencies": {
        const merged: SchemaObject = { ...(mine as SchemaObject) };
        for (const [name, dep] of Object.entries(value as SchemaObject)) {
          const other = merged[name];
          if (other === undefined) merged[name] = dep;
          else if (Array.isArray(other) && Array.isArray(dep))
            merged[name] = [...new Set([...other, ...dep])];
          else if (!Array.isArray(other) && !Array.isArray(dep)) merged[name] = both(other, dep);
          else throw new MergeError(`allOf branches with '${key}' of two kinds for one property`);
        }
        out[key] = merged;
        break;
      }
      case "propertyNames":
        out.propertyNames = both(mine, value);
        break;
      case "not":
        out.not = { anyOf: [mine, value] };
        break;
      case "multipleOf": {
        const x = mine as number;
        const y = value as number;
        if (x === y || (Number.isInteger(x / y) && x > y)) break;
        if (Number.isInteger(y / x)) out.multipleOf = y;
        else if (Number.isInteger(x) && Number.isInteger(y)) out.multipleOf = (x * y) / gcd(x, y);
        else throw new MergeError("allOf branches with two different 'multipleOf' values are not supported");
        break;
      }
      case "minProperties":
      case "minimum":
      case "exclusiveMinimum":
      case "minLength":
      case "minItems":
        out[key] = Math.max(mine as number, value as number);
        break;
      case "maxProperties":
      case "maximum":
      case "exclusiveMaximum":
      case "maxLength":
      case "maxItems":
        out[key] = Math.min(mine as number, value as number);
        break;
      case "uniqueItems":
        out.uniqueItems = Boolean(mine) || Boolean(value);
        break;
      case "nullable":
        out.nullable = Boolean(mine) && Boolean(value);
        break;
      case "unevaluatedProperties":
        break;
      case "pattern":
      case "format":
        if (mine !== value)
          throw new MergeError(`allOf branches with two different '${key}' values are not supported`);
        break;
      case "anyOf": {
        const pairs: SchemaObject[] = [];
        for (const x of mine as unknown[]) for (const y of value as unknown[]) pairs.push(both(x, y));
        if (pairs.length > MAX_MERGED_ALTERNATIVES) {
          throw new MergeError(
            `allOf of anyOf lists expands to more than ${MAX_MERGED_ALTERNATIVES} alternatives`,
          );
        }
        out.anyOf = pairs;
        break;
      }
      default:
        throw new MergeError(`allOf cannot merge keyword '${key}'`);
    }
  }
  return out;
}

/** Renames `oneOf` to `anyOf` (combining with an existing `anyOf` as a conjunction). */
function toAnyOf(s: SchemaObject): SchemaObject {
  if (!("oneOf" in s)) return s;
  const { oneOf, ...rest } = s;
  if (!("anyOf" in rest)) return { ...rest, anyOf: oneOf };
  const pairs: SchemaObject[] = [];
  for (const x of rest.anyOf as unknown[]) for (const y of oneOf as unknown[]) pairs.push(both(x, y));
  return { ...rest, anyOf: pairs };
}

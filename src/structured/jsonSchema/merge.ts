/**
 * `allOf` support: merging subschemas into one schema that the compiler can turn into a grammar. The merge is
 * the usual conjunction rewrite (as in llama.cpp's `allOf` handling, made general): types intersect,
 * `required` unions, numeric/length bounds take the tighter value, `enum`/`const` intersect, and two
 * `anyOf` lists combine pairwise. The merged schema may only allow less than the conjunction, never more:
 * - object members: every property name of either branch gets the conjunction of what each branch says
 *   about that name (its own schema and the `patternProperties` it matches, or else its
 *   `additionalProperties`, so a closed branch makes another branch's property `false`); a required name
 *   that a branch forbids makes the merge unsatisfiable. Keys no branch declares must satisfy both branches'
 *   `additionalProperties` / `patternProperties`. A branch's `unevaluatedProperties: false` closes that
 *   branch like `additionalProperties: false` (the compiler re-applies a sibling one after the merge);
 * - array items: each position gets the conjunction of each branch's `prefixItems`/`items` entry for it
 *   (or its `items`/`additionalItems` past its tuple), written in the 2020-12 form;
 * - OpenAPI `nullable: true` becomes `null` in the branch's `type` before types intersect.
 */
import {
  EXTRA_PATTERNS,
  isConstraint,
  NON_INTEGER,
  NOT_FORMATS,
  NOT_PATTERNS,
  type Schema,
  type SchemaObject,
  TYPE_NAMES,
  type TypeName,
  typeSet,
} from "./keywords.ts";

/**
 * Thrown when the conjunction cannot be expressed or is unsatisfiable; the compiler turns it into a 400 or
 * drops the subschema. A large schema throws it thousands of times, so it captures no stack trace.
 */
export class MergeError extends Error {
  /** True when the branches contradict each other (no instance), false when we cannot express the merge. */
  readonly unsatisfiable: boolean;
  constructor(message: string, unsatisfiable = false) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.unsatisfiable = unsatisfiable;
  }
}

/** Most alternatives an `allOf` of `anyOf`s may expand to. */
export const MAX_MERGED_ALTERNATIVES = 64;

/** The replacer of {@link canonical}: each object with its keys sorted. */
const sortedKeys = (_key: string, value: unknown): unknown =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : value;

/**
 * JSON text of a value with object keys sorted: equal JSON values (JSON Schema equality) get equal texts.
 * (A scalar, the usual `enum` member, is written without the replacer, which costs a call per value.)
 */
export const canonical = (v: unknown): string =>
  typeof v === "object" && v !== null ? JSON.stringify(v, sortedKeys) : JSON.stringify(v);

/**
 * Sets member `name` of `target` as its own property, `__proto__` included (an assignment to that name would
 * change the object's prototype instead, losing the member).
 */
function setMember(target: SchemaObject, name: string, value: unknown): void {
  if (name === "__proto__")
    Object.defineProperty(target, name, { value, writable: true, enumerable: true, configurable: true });
  else target[name] = value;
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
 * A `oneOf` stays a `oneOf` (two of them nest: `oneOf[Xi] ∧ oneOf[Y]` is `oneOf[Xi ∧ oneOf[Y]]`), beside
 * which an `anyOf` is an ordinary sibling keyword; two `anyOf` lists combine pairwise (see
 * {@link combineAlternatives}). Throws {@link MergeError} for unsatisfiable or inexpressible combinations.
 */
export function mergeSchemas(left: Schema, right: Schema): Schema {
  if (left === true) return right;
  if (right === true) return left;
  if (left === false || right === false) return false;
  if (left === right) return left; // x ∧ x is x (a schema merged with itself, e.g. through two $refs)
  const a = nullableAsType(normalizeExclusive(left));
  const b = nullableAsType(normalizeExclusive(right));
  const out: SchemaObject = {};
  for (const key in a) if (!SHAPE_KEYWORDS.has(key)) out[key] = a[key];
  const required = [...new Set([...((a.required as string[]) ?? []), ...((b.required as string[]) ?? [])])];
  Object.assign(out, mergeObjectShape(a, b, required), mergeArrayShape(a, b));
  let anyOfs: [Schema[], Schema[]] | null = null;
  for (const [key, value] of Object.entries(b)) {
    if (!isConstraint(key) || SHAPE_KEYWORDS.has(key)) continue;
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
      case "required":
        out.required = [...new Set([...(mine as string[]), ...(value as string[])])];
        break;
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
      case "dependentSchemas": {
        const merged: SchemaObject = { ...(mine as SchemaObject) };
        for (const [name, schema] of Object.entries(value as SchemaObject)) {
          setMember(merged, name, Object.hasOwn(merged, name) ? both(merged[name], schema) : schema);
        }
        out[key] = merged;
        break;
      }
      case "dependentRequired":
      case "dependencies": {
        const merged: SchemaObject = { ...(mine as SchemaObject) };
        for (const [name, dep] of Object.entries(value as SchemaObject)) {
          const other = Object.hasOwn(merged, name) ? merged[name] : undefined;
          if (other === undefined) setMember(merged, name, dep);
          else if (Array.isArray(other) && Array.isArray(dep))
            setMember(merged, name, [...new Set([...other, ...dep])]);
          else if (!Array.isArray(other) && !Array.isArray(dep)) setMember(merged, name, both(other, dep));
          else throw new MergeError(`allOf branches with '${key}' of two kinds for one property`);
        }
        out[key] = merged;
        break;
      }
      case "propertyNames":
        out.propertyNames = both(mine, value);
        break;
      case "not":
        if (!sameValue(mine, value)) out.not = { anyOf: [mine, value] };
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
      case NON_INTEGER:
        out[key] = mine === true || value === true;
        break;
      case "pattern":
        // Both must match: the second joins the list the string compiler intersects.
        if (mine !== value) out[EXTRA_PATTERNS] = [...new Set([...extraPatterns(out), value as string])];
        break;
      case EXTRA_PATTERNS:
      case NOT_PATTERNS:
      case NOT_FORMATS:
        out[key] = [...new Set([...(mine as string[]), ...(value as string[])])];
        break;
      case "format":
        if (mine !== value)
          throw new MergeError(`allOf branches with two different '${key}' values are not supported`);
        break;
      case "oneOf":
        // Exactly one Xi, and exactly one Yj: exactly one of the Xi ∧ oneOf[Y] (the oneOf[Y] is common).
        // (oneOf[X] ∧ oneOf[X] is oneOf[X].)
        if (!sameValue(mine, value)) out.oneOf = (mine as unknown[]).map((x) => both(x, { oneOf: value }));
        break;
      case "anyOf":
        if (sameValue(mine, value)) break; // anyOf[X] ∧ anyOf[X] is anyOf[X]
        anyOfs = [mine as Schema[], value as Schema[]]; // combined below, once `type` is merged
        break;
      default:
        throw new MergeError(`allOf cannot merge keyword '${key}'`);
    }
  }
  if (anyOfs !== null) out.anyOf = combineAlternatives(anyOfs[0], anyOfs[1], out.type);
  return out;
}

/** The patterns already listed under {@link EXTRA_PATTERNS} in `s`. */
function extraPatterns(s: SchemaObject): string[] {
  return Array.isArray(s[EXTRA_PATTERNS]) ? (s[EXTRA_PATTERNS] as string[]) : [];
}

/** Most nodes {@link sameValue} compares before answering "not known to be equal". */
const MAX_COMPARED_NODES = 200;

/** {@link valueHash} of each object or array hashed so far (schemas are not changed once built). */
const hashes = new WeakMap<object, number>();

/**
 * A hash of a JSON value that values {@link sameValue} finds equal share (object members in any order, array
 * items in order), in time linear in the value's size once (objects and arrays are remembered), so that equal
 * candidates are found by hash before {@link sameValue} compares them. Strings hash by their length and up to
 * 16 of their characters (equal strings hash alike; a collision only costs a comparison).
 */
function valueHash(value: unknown): number {
  if (typeof value === "string") {
    let h = value.length;
    const step = Math.max(1, value.length >> 4);
    for (let i = 0; i < value.length; i += step) h = Math.imul(h ^ value.charCodeAt(i), 0x01000193);
    return h;
  }
  if (typeof value !== "object" || value === null) {
    if (typeof value === "number") return Math.imul(Math.floor(value) ^ 0x9e3779b9, 0x85ebca6b);
    return value === true ? 1 : value === false ? 2 : 3;
  }
  const known = hashes.get(value);
  if (known !== undefined) return known;
  let h: number;
  if (Array.isArray(value)) {
    h = 0x811c9dc5;
    for (const item of value) h = Math.imul(h ^ valueHash(item), 0x01000193);
  } else {
    // Members combine by a sum, which does not depend on their order.
    h = 0x2545f491;
    for (const k in value)
      h =
        (h + Math.imul(valueHash(k) ^ 0x5bd1e995, valueHash((value as Record<string, unknown>)[k]) | 1)) | 0;
  }
  hashes.set(value, h);
  return h;
}

/**
 * The index in `distinct` of the first value {@link sameValue} finds equal to `value`, or -1; `byHash`
 * lists the indices of `distinct` by {@link valueHash} (the caller keeps it in step with `distinct`).
 */
function findSame(distinct: unknown[], byHash: Map<number, number[]>, value: unknown): number {
  for (const i of byHash.get(valueHash(value)) ?? []) if (sameValue(distinct[i], value)) return i;
  return -1;
}

/** Appends `value` to `distinct` and its index to `byHash` (see {@link findSame}); returns the index. */
function addDistinct(distinct: unknown[], byHash: Map<number, number[]>, value: unknown): number {
  const index = distinct.push(value) - 1;
  const h = valueHash(value);
  const list = byHash.get(h);
  if (list === undefined) byHash.set(h, [index]);
  else list.push(index);
  return index;
}

/** True only when `a` and `b` are equal JSON (objects with the same keys in any order); false when unsure. */
function sameValue(a: unknown, b: unknown, budget = { nodes: MAX_COMPARED_NODES }): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (--budget.nodes < 0 || Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  return ka.every((k) => Object.hasOwn(y, k) && sameValue(x[k], y[k], budget));
}

/** The type names that a schema's own `type` (with OpenAPI `nullable`) allows; null when it has no `type`. */
function ownTypes(s: Schema): TypeName[] | null {
  if (typeof s === "boolean") return s ? null : [];
  if (!("type" in s)) return null;
  const types = typeSet(s.type);
  return s.nullable === true && !types.includes("null") ? [...types, "null"] : types;
}

/**
 * The alternatives of `anyOf: xs` ∧ `anyOf: ys` beside `type` (the merged schema's, or undefined): every
 * `x ∧ y`, exactly, with combinations that cannot hold left out: equal schemas give the schema itself
 * (`x ∧ x` is x), `x ∧ y` and `y ∧ x` count once, and a combination whose own `type`s (with `type`) have no
 * type in common is never built. More than {@link MAX_MERGED_ALTERNATIVES} left is a {@link MergeError}; none
 * left means no instance (an unsatisfiable MergeError).
 */
function combineAlternatives(xs: Schema[], ys: Schema[], type: unknown): Schema[] {
  // One representative per distinct schema, so that equal alternatives (often copies of one `$ref`) match.
  const distinct: Schema[] = [];
  const byHash = new Map<number, number[]>();
  const idOf = (s: Schema): number => {
    const found = findSame(distinct, byHash, s);
    return found >= 0 ? found : addDistinct(distinct, byHash, s);
  };
  const outer = type === undefined ? null : typeSet(type);
  const seen = new Set<string>();
  const pairs: [Schema, Schema][] = [];
  const xIds = xs.map(idOf);
  const yIds = ys.map(idOf);
  xs.forEach((x, xi) => {
    ys.forEach((y, yi) => {
      const i = xIds[xi]!;
      const j = yIds[yi]!;
      const key = i < j ? `${i},${j}` : `${j},${i}`;
      if (seen.has(key)) return;
      seen.add(key);
      let types: TypeName[] | null = null;
      for (const t of [ownTypes(x), ownTypes(y), outer]) {
        if (t !== null) types = types === null ? t : intersectTypes(types, t);
      }
      if (types !== null && types.length === 0) return;
      pairs.push(i === j ? [x, x] : [x, y]);
    });
  });
  const kept = pairs;
  if (kept.length > MAX_MERGED_ALTERNATIVES)
    throw new MergeError(`allOf of anyOf lists expands to more than ${MAX_MERGED_ALTERNATIVES} alternatives`);
  if (kept.length === 0) throw new MergeError("allOf branches have no anyOf alternatives in common", true);
  return kept.map(([x, y]) => (x === y ? x : both(x, y)));
}

/** The keywords that say which members an object may have ({@link mergeObjectShape} merges them together). */
const OBJECT_SHAPE = ["properties", "patternProperties", "additionalProperties", "unevaluatedProperties"];

/** The keywords that say what each array item must be ({@link mergeArrayShape} merges them together). */
const ARRAY_SHAPE = ["prefixItems", "items", "additionalItems"];

const SHAPE_KEYWORDS = new Set([...OBJECT_SHAPE, ...ARRAY_SHAPE]);

/** Whether `s` has one of `keys` (a function, not a closure per call: tsx's keepNames names each closure). */
const hasAny = (s: SchemaObject, keys: string[]): boolean => keys.some((k) => k in s);

/** When at most one of `a` and `b` has any of `keys`: those keywords of that one (nothing to merge); else null. */
function oneSided(a: SchemaObject, b: SchemaObject, keys: string[]): SchemaObject | null {
  const inA = hasAny(a, keys);
  if (inA && hasAny(b, keys)) return null;
  const only = inA ? a : b;
  return Object.fromEntries(keys.filter((k) => k in only).map((k) => [k, only[k]]));
}

/**
 * The conjunction of `parts` as one schema: `true` for none, `false` if any is false, the schema itself for
 * one (equal parts count once).
 */
function conjunction(parts: Schema[]): Schema {
  const kept: Schema[] = [];
  const byHash = new Map<number, number[]>();
  for (const p of parts) if (p !== true && findSame(kept, byHash, p) < 0) addDistinct(kept, byHash, p);
  if (kept.includes(false)) return false;
  if (kept.length === 0) return true;
  return kept.length === 1 ? kept[0]! : { allOf: kept };
}

/** Whether the ECMA-262 regex `pattern` matches `name`; null when JavaScript cannot run the pattern. */
function patternMatch(pattern: string, name: string): boolean | null {
  try {
    return new RegExp(pattern, "u").test(name);
  } catch {
    return null;
  }
}

/** One branch's object-member keywords: declared properties, patterns, and the schema for other keys (undefined: not written, i.e. any value). */
type ObjectShape = {
  declared: SchemaObject;
  patterns: SchemaObject;
  additional: Schema | undefined;
};

function objectShape(s: SchemaObject): ObjectShape {
  return {
    declared: (s.properties as SchemaObject | undefined) ?? {},
    patterns: (s.patternProperties as SchemaObject | undefined) ?? {},
    additional:
      (s.additionalProperties as Schema | undefined) ??
      (s.unevaluatedProperties === false ? false : undefined),
  };
}

/**
 * What one branch requires of the value of member `name`: its declared schema and every pattern that matches
 * (a pattern JavaScript cannot run counts as matching, and then `additional` applies too), else `additional`.
 */
function memberParts(shape: ObjectShape, name: string): Schema[] {
  const parts: Schema[] = [];
  const isDeclared = Object.hasOwn(shape.declared, name);
  if (isDeclared) parts.push(shape.declared[name] as Schema);
  let matched = false;
  for (const [pattern, schema] of Object.entries(shape.patterns)) {
    const m = patternMatch(pattern, name);
    if (m !== false) parts.push(schema as Schema);
    if (m === true) matched = true;
  }
  if (!isDeclared && !matched && shape.additional !== undefined) parts.push(shape.additional);
  return parts;
}

/**
 * The object-member keywords of the conjunction of `a` and `b` (see the module comment). Throws an
 * unsatisfiable {@link MergeError} when a name in `required` is forbidden by either branch.
 */
function mergeObjectShape(a: SchemaObject, b: SchemaObject, required: string[]): SchemaObject {
  const single = oneSided(a, b, OBJECT_SHAPE);
  if (single !== null) return single;
  const x = objectShape(a);
  const y = objectShape(b);
  const out: SchemaObject = {};
  const properties: SchemaObject = {};
  for (const name of new Set([...Object.keys(x.declared), ...Object.keys(y.declared), ...required])) {
    const isDeclared = Object.hasOwn(x.declared, name) || Object.hasOwn(y.declared, name);
    const merged = conjunction([...memberParts(x, name), ...memberParts(y, name)]);
    if (merged === false && required.includes(name))
      throw new MergeError(`required property '${name}' is not allowed by every allOf branch`, true);
    if (isDeclared || merged !== true) setMember(properties, name, merged);
  }
  if ("properties" in a || "properties" in b || Object.keys(properties).length > 0)
    out.properties = properties;
  const patterns: SchemaObject = {};
  for (const [mine, other] of [
    [x, y],
    [y, x],
  ] as const) {
    for (const [pattern, schema] of Object.entries(mine.patterns)) {
      if (Object.hasOwn(patterns, pattern)) continue;
      const parts: Schema[] = [schema as Schema];
      if (Object.hasOwn(other.patterns, pattern)) parts.push(other.patterns[pattern] as Schema);
      else if (other.additional !== undefined) parts.push(other.additional);
      setMember(patterns, pattern, conjunction(parts));
    }
  }
  if (Object.keys(patterns).length > 0) out.patternProperties = patterns;
  const additional = [x.additional, y.additional].filter((v): v is Schema => v !== undefined);
  if (additional.length > 0) out.additionalProperties = conjunction(additional);
  return out;
}

/** One branch's item keywords: the tuple and the schema past it (undefined: not written, i.e. any item). */
function arrayShape(s: SchemaObject): { prefix: Schema[]; rest: Schema | undefined } {
  if (Array.isArray(s.prefixItems))
    return {
      prefix: s.prefixItems as Schema[],
      rest: Array.isArray(s.items) ? undefined : (s.items as Schema),
    };
  if (Array.isArray(s.items)) return { prefix: s.items as Schema[], rest: s.additionalItems as Schema };
  return { prefix: [], rest: s.items as Schema | undefined };
}

/** The item keywords of the conjunction of `a` and `b`, as `prefixItems` and `items` (see the module comment). */
function mergeArrayShape(a: SchemaObject, b: SchemaObject): SchemaObject {
  const single = oneSided(a, b, ARRAY_SHAPE);
  if (single !== null) return single;
  const x = arrayShape(a);
  const y = arrayShape(b);
  const at = (shape: typeof x, i: number): Schema[] => {
    const item = i < shape.prefix.length ? shape.prefix[i] : shape.rest;
    return item === undefined ? [] : [item];
  };
  const out: SchemaObject = {};
  const length = Math.max(x.prefix.length, y.prefix.length);
  if (length > 0) out.prefixItems = Array.from({ length }, (_, i) => conjunction([...at(x, i), ...at(y, i)]));
  const rest = [x.rest, y.rest].filter((v): v is Schema => v !== undefined);
  if (rest.length > 0) out.items = conjunction(rest);
  return out;
}

/** Moves OpenAPI `nullable: true` into `type` (no `type`: no constraint) so that types intersect exactly. */
function nullableAsType(s: SchemaObject): SchemaObject {
  if (!("nullable" in s)) return s;
  const { nullable, ...rest } = s;
  if (nullable === true && "type" in rest) {
    const types = typeSet(rest.type);
    if (!types.includes("null")) rest.type = [...types, "null"];
  }
  return rest;
}

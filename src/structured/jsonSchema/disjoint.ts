/**
 * A sound, incomplete test that two JSON Schemas have no instance in common, for `oneOf`: branches proven
 * disjoint need not exclude each other. Only keywords whose meaning does not depend on the compiler's
 * choices are read (`type` is explicit only: `properties` alone does not make a schema an object), so a
 * "disjoint" answer holds for the schemas as any validator reads them. Keywords it does not read only make
 * a schema narrower, so ignoring them can only turn "disjoint" into "unknown", never the reverse.
 */

import { AutomatonTooLarge, type Dfa } from "../regex/regexAutomaton.ts";
import { RegexError } from "../regex/regexParser.ts";
import { patternDfa } from "../regex/regexToGbnf.ts";
import { ecmaRegex } from "./ecmaRegex.ts";
import { formatDfa, type SupportedFormat } from "./formats.ts";
import {
  allOf,
  isConstraint,
  NON_INTEGER,
  OBJECT_KEYWORDS,
  type Schema,
  type SchemaObject,
  stringNotFormats,
  stringNotPatterns,
  stringPatterns,
  typeSet,
} from "./keywords.ts";
import { canonical } from "./merge.ts";

/** JSON types with integers and other numbers apart, so that `integer` ⊂ `number`. */
type TypeClass = "null" | "boolean" | "string" | "integer" | "fraction" | "array" | "object";

const ALL_CLASSES: readonly TypeClass[] = [
  "null",
  "boolean",
  "string",
  "integer",
  "fraction",
  "array",
  "object",
];

/**
 * Most pair tests for one document by default (the benchmark's compiled schemas need at most 1,911; one
 * pathological schema needed 265,000 and 200+ ms before its refusal, strmprivacy DataConnector 10,000 and
 * 35 ms).
 */
const MAX_PAIR_TESTS = 4_000;

/** How deep `$ref`/`allOf`/`anyOf` are followed before answering "unknown". */
const MAX_DEPTH = 8;

const isObject = (v: unknown): v is SchemaObject => typeof v === "object" && v !== null && !Array.isArray(v);

function classesOfType(type: unknown): TypeClass[] {
  switch (type) {
    case "number":
      return ["integer", "fraction"];
    case "null":
    case "boolean":
    case "string":
    case "integer":
    case "array":
    case "object":
      return [type];
    default:
      return [...ALL_CLASSES]; // not a type name: no information
  }
}

function classOfValue(v: unknown): TypeClass {
  if (v === null) return "null";
  if (typeof v === "boolean") return "boolean";
  if (typeof v === "string") return "string";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "fraction";
  return Array.isArray(v) ? "array" : "object";
}

/** Resolves a local `$ref` to its schema, or undefined when it cannot. */
export type RefResolver = (ref: string) => unknown;

/** Disjointness tests for one document (see {@link provablyDisjoint}); they remember their answers. */
export type DisjointTest = {
  /** True only when no JSON value satisfies both schemas. */
  disjoint(a: Schema, b: Schema): boolean;
  /** True only when `[]` is the only value that can satisfy both (arrays of disjoint items). */
  onlyEmptyArrayInCommon(a: Schema, b: Schema): boolean;
  /**
   * True only when `s` holds for every value that is not an object: it, its `allOf` branches and its `$ref`
   * targets use only object keywords (and annotations). Two such schemas that are disjoint as objects have
   * only non-objects in common, so `s ∧ ¬t` is `s ∧ {type: object}` for them.
   */
  acceptsEveryNonObject(s: Schema): boolean;
  /** True once the document has used up its pair tests (answers are then "not proven"). */
  exhausted(): boolean;
};

/**
 * Tests answering true only when no JSON value satisfies both of their schemas (proven from their types,
 * listed values, the branches of an `anyOf`/`oneOf`, non-empty arrays with disjoint `items`, or a property
 * that one of them requires and that the two give disjoint schemas, or that the other forbids), or only
 * `[]`; false means "not proven". `resolve` reads the document's local `$ref`s. Answers are remembered per
 * schema object, so make one per compilation. Past `budget` pair tests (defaults to {@link MAX_PAIR_TESTS})
 * every answer is "not proven".
 */
export function provablyDisjoint(resolve: RefResolver, budget = MAX_PAIR_TESTS): DisjointTest {
  const refs = new Map<string, unknown>();
  const cached: RefResolver = (ref) => {
    if (!refs.has(ref)) refs.set(ref, resolve(ref));
    return refs.get(ref);
  };
  const m: Memo = {
    budget,
    resolve: cached,
    conjuncts: new WeakMap(),
    classes: new WeakMap(),
    own: new WeakMap(),
    pairs: new WeakMap(),
  };
  return {
    disjoint: (a, b) => disjoint(a, b, m, 0),
    acceptsEveryNonObject: (s) => acceptsEveryNonObject(s, m, 0),
    exhausted: () => m.budget < 0,
    onlyEmptyArrayInCommon: (a, b) => {
      if (typeof a === "boolean" || typeof b === "boolean") return false;
      const as: SchemaObject[] = [];
      const bs: SchemaObject[] = [];
      if (!conjunctsOf(a, m, 0, as) || !conjunctsOf(b, m, 0, bs)) return true;
      return sharesOnlyEmptyArray(as, bs, classesOf(a, m, 0), classesOf(b, m, 0), m, 0);
    },
  };
}

/** The object keywords, as a set. */
const OBJECT_ONLY = new Set(OBJECT_KEYWORDS);

/** See {@link DisjointTest.acceptsEveryNonObject}; false past {@link MAX_DEPTH} (not proven). */
function acceptsEveryNonObject(s: unknown, m: Memo, depth: number): boolean {
  if (s === true) return true;
  if (!isObject(s) || depth >= MAX_DEPTH) return false;
  for (const key in s) {
    if (!isConstraint(key) || OBJECT_ONLY.has(key)) continue;
    const value = s[key];
    if (key === "$ref") {
      if (typeof value !== "string" || !acceptsEveryNonObject(m.resolve(value), m, depth + 1)) return false;
    } else if (key === "allOf") {
      if (!Array.isArray(value) || !value.every((branch) => acceptsEveryNonObject(branch, m, depth + 1)))
        return false;
    } else return false;
  }
  return true;
}

/**
 * The schemas whose conjunction `s` is (itself, its `allOf` branches and `$ref` targets, recursively), or
 * null when one of them is `false` (no instance). `true` and unresolvable references add nothing.
 */
function conjuncts(s: Schema, m: Memo, depth: number, out: SchemaObject[]): boolean {
  if (s === false) return false;
  if (s === true || !isObject(s)) return true;
  out.push(s);
  if (depth >= MAX_DEPTH) return true;
  if (typeof s.$ref === "string") {
    const target = m.resolve(s.$ref);
    if ((target === false || isObject(target)) && !conjuncts(target, m, depth + 1, out)) return false;
  }
  if (Array.isArray(s.allOf)) {
    for (const branch of s.allOf as Schema[]) if (!conjuncts(branch, m, depth + 1, out)) return false;
  }
  return true;
}

/** True when every class in `classes` is `string` (and there is one). */
const onlyStrings = (classes: Set<TypeClass>): boolean => classes.size === 1 && classes.has("string");

const LITERAL_CHAR = String.raw`(?:[^\\^$.|?*+()[\]{}]|\\[\\^$.|?*+()[\]{}/-])`;
const LITERALS_PATTERN = new RegExp(
  String.raw`^\^(?:\((?:\?:)?(LIT(?:\|LIT)*)\)|(LIT))\$$`.replaceAll("LIT", `${LITERAL_CHAR}*`),
);

/**
 * The exact strings an anchored pattern of literals matches (`^abc$`, `^(a|b)$`, `^(?:a|b)$`), or null for
 * any other pattern.
 */
function patternStrings(pattern: string): string[] | null {
  const match = LITERALS_PATTERN.exec(pattern);
  if (match === null) return null;
  const body = match[1] ?? match[2] ?? "";
  const out: string[] = [];
  let current = "";
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c === "\\") current += body[++i]!;
    else if (c === "|") {
      out.push(current);
      current = "";
    } else current += c;
  }
  out.push(current);
  return out;
}

/** {@link conjuncts} of `s` appended to `out`, remembered per schema object. */
function conjunctsOf(s: SchemaObject, m: Memo, depth: number, out: SchemaObject[]): boolean {
  let known = m.conjuncts.get(s);
  if (known === undefined) {
    const parts: SchemaObject[] = [];
    known = conjuncts(s, m, depth, parts) ? parts : null;
    m.conjuncts.set(s, known);
  }
  if (known === null) return false;
  out.push(...known);
  return true;
}

/** The listed values of `s` (`const`, `enum`, both: their intersection) as canonical JSON, or null. */
function listedValues(s: SchemaObject, strings = false): Set<string> | null {
  let values: Set<string> | null = null;
  if (strings && typeof s.pattern === "string") {
    const listed = patternStrings(s.pattern);
    if (listed !== null) values = new Set(listed.map(canonical));
  }
  if ("const" in s) {
    const value = canonical(s.const);
    values = values === null || values.has(value) ? new Set([value]) : new Set();
  }
  if (Array.isArray(s.enum)) {
    const listed = new Set(s.enum.map(canonical));
    values = values === null ? listed : new Set([...values].filter((v) => listed.has(v)));
  }
  return values;
}

/** The classes of `set` that `allowed` has too. */
function kept(set: Set<TypeClass>, allowed: Iterable<TypeClass>): Set<TypeClass> {
  const a = new Set(allowed);
  return new Set([...set].filter((c) => a.has(c)));
}

/**
 * The type classes a schema object's `type` admits, with `null` for OpenAPI's `nullable: true` (a validator
 * may read it so; admitting more is safe here).
 */
function typeClasses(s: SchemaObject): TypeClass[] {
  const classes = typeSet(s.type).flatMap(classesOfType);
  if (s.nullable === true) classes.push("null");
  return classes;
}

/** The type classes a single schema object's own `type`/`nullable`/`const`/`enum`/`anyOf`/`oneOf` admit. */
function ownClasses(s: SchemaObject, m: Memo, depth: number): Set<TypeClass> {
  let set = new Set<TypeClass>(ALL_CLASSES);
  if ("type" in s) set = kept(set, typeClasses(s));
  if ("const" in s) set = kept(set, [classOfValue(s.const)]);
  if (Array.isArray(s.enum)) set = kept(set, s.enum.map(classOfValue));
  if (s[NON_INTEGER] === true)
    set = kept(
      set,
      ALL_CLASSES.filter((c) => c !== "integer"),
    );
  if (depth < MAX_DEPTH) {
    for (const key of ["anyOf", "oneOf"]) {
      const branches = s[key];
      if (!Array.isArray(branches)) continue;
      const union = new Set<TypeClass>();
      for (const branch of branches as Schema[])
        for (const c of classesOf(branch, m, depth + 1)) union.add(c);
      set = kept(set, union);
    }
  }
  return set;
}

/**
 * Answers already computed, per schema object. Any depth's answer is sound (a shallower search only knows
 * less), so they are shared across depths; schemas are not mutated after parsing.
 */
type Memo = {
  /** Pair tests left for this document: past it every answer is "not proven" (a guard on the cost). */
  budget: number;
  resolve: RefResolver;
  conjuncts: WeakMap<SchemaObject, SchemaObject[] | null>;
  classes: WeakMap<SchemaObject, Set<TypeClass>>;
  /** {@link ownClasses} of each conjunct (many conjunctions share their parts). */
  own: WeakMap<SchemaObject, Set<TypeClass>>;
  pairs: WeakMap<SchemaObject, WeakMap<SchemaObject, boolean>>;
};

/** The type classes `s` admits (over all its conjuncts); empty when it has no instance. */
function classesOf(s: Schema, m: Memo, depth: number): Set<TypeClass> {
  if (typeof s === "boolean") return new Set(s ? ALL_CLASSES : []);
  const known = m.classes.get(s);
  if (known !== undefined) return known;
  const set = classesOfObject(s, m, depth);
  m.classes.set(s, set);
  return set;
}

function classesOfObject(s: SchemaObject, m: Memo, depth: number): Set<TypeClass> {
  const parts: SchemaObject[] = [];
  if (!conjunctsOf(s, m, depth, parts)) return new Set();
  let set = new Set<TypeClass>(ALL_CLASSES);
  for (const part of parts) {
    let own = m.own.get(part);
    if (own === undefined) {
      own = ownClasses(part, m, depth);
      m.own.set(part, own);
    }
    if (own.size < ALL_CLASSES.length) set = new Set([...set].filter((c) => own.has(c)));
  }
  return set;
}

/**
 * The schemas that property `name` must satisfy where present (from `properties`, else `additionalProperties`
 * when no `patternProperties` could apply), and whether some conjunct forbids it.
 */
function propertySchemas(parts: SchemaObject[], name: string): { schemas: Schema[]; forbidden: boolean } {
  const schemas: Schema[] = [];
  let forbidden = false;
  for (const part of parts) {
    const props = part.properties;
    if (isObject(props) && Object.hasOwn(props, name)) schemas.push(props[name] as Schema);
    else if ("patternProperties" in part || !("additionalProperties" in part)) continue;
    else if (part.additionalProperties === false) forbidden = true;
    else schemas.push(part.additionalProperties as Schema);
  }
  return { schemas, forbidden };
}

/** {@link provablyDisjoint}'s test, remembered in `m`. */
function disjoint(a: Schema, b: Schema, m: Memo, depth: number): boolean {
  if (a === false || b === false) return true;
  if (a === true || b === true || depth > MAX_DEPTH) return false;
  let row = m.pairs.get(a);
  const known = row?.get(b);
  if (known !== undefined) return known;
  if (--m.budget < 0) return false;
  const answer = disjointObjects(a, b, m, depth);
  if (row === undefined) {
    row = new WeakMap();
    m.pairs.set(a, row);
  }
  row.set(b, answer);
  return answer;
}

function disjointObjects(a: SchemaObject, b: SchemaObject, m: Memo, depth: number): boolean {
  const as: SchemaObject[] = [];
  const bs: SchemaObject[] = [];
  if (!conjunctsOf(a, m, depth, as) || !conjunctsOf(b, m, depth, bs)) return true;
  // A `not: N` on one side whose N the other side implies.
  if (
    as.some((p) => "not" in p && impliedBy(bs, p.not)) ||
    bs.some((p) => "not" in p && impliedBy(as, p.not))
  )
    return true;
  // Types.
  const ca = classesOf(a, m, depth);
  const cb = classesOf(b, m, depth);
  if (![...ca].some((c) => cb.has(c))) return true;
  if (disjointRanges(as, bs, ca, cb)) return true;
  // Listed values (for strings only, also those of a pattern that lists exact strings, like `^(a|b)$`).
  const va = intersectAll(as.map((p) => listedValues(p, onlyStrings(ca))));
  const vb = intersectAll(bs.map((p) => listedValues(p, onlyStrings(cb))));
  if (va !== null && vb !== null && ![...va].some((v) => vb.has(v))) return true;
  if (va !== null && [...va].every((v) => failsSome(JSON.parse(v), bs))) return true;
  if (vb !== null && [...vb].every((v) => failsSome(JSON.parse(v), as))) return true;
  if (disjointPatterns(as, bs, ca, cb)) return true;
  // Union branches: every branch of one side's anyOf/oneOf disjoint from the other side.
  for (const [mine, other] of [
    [as, b],
    [bs, a],
  ] as const) {
    for (const part of mine) {
      for (const key of ["anyOf", "oneOf"]) {
        const branches = part[key];
        if (
          Array.isArray(branches) &&
          (branches as Schema[]).every((branch) => disjoint(branch, other, m, depth + 1))
        )
          return true;
      }
    }
  }
  // Arrays with at least one item whose item schemas (`items` as one schema) are disjoint.
  if (sharesOnlyEmptyArray(as, bs, ca, cb, m, depth)) {
    const minItems = Math.max(
      0,
      ...[...as, ...bs].map((p) => (typeof p.minItems === "number" ? p.minItems : 0)),
    );
    if (minItems >= 1) return true;
  }
  // Objects: a property one side requires that the other forbids or gives a disjoint schema. Only when
  // every common instance is an object: `required` and `properties` say nothing about other values.
  if ([...ca].some((c) => c !== "object" && cb.has(c))) return false;
  const required = new Set<string>();
  for (const part of [...as, ...bs])
    if (Array.isArray(part.required)) for (const name of part.required) required.add(name as string);
  for (const name of required) {
    const pa = propertySchemas(as, name);
    const pb = propertySchemas(bs, name);
    const requiredBy = (parts: SchemaObject[]): boolean =>
      parts.some((p) => Array.isArray(p.required) && p.required.includes(name));
    if ((pa.forbidden && requiredBy(bs)) || (pb.forbidden && requiredBy(as))) return true;
    for (const x of pa.schemas) for (const y of pb.schemas) if (disjoint(x, y, m, depth + 1)) return true;
    // (Each side's schemas together: a type on one conjunct and a pattern on another.)
    if (
      (pa.schemas.length > 1 || pb.schemas.length > 1) &&
      pa.schemas.length > 0 &&
      pb.schemas.length > 0 &&
      disjoint(allOf(pa.schemas), allOf(pb.schemas), m, depth + 1)
    )
      return true;
  }
  return false;
}

/**
 * True when every value both conjunctions admit is a string and their `pattern`s together match none: the
 * intersection of the patterns' automata is empty (false when a pattern has none, or it is too large).
 */
function disjointPatterns(
  as: SchemaObject[],
  bs: SchemaObject[],
  ca: Set<TypeClass>,
  cb: Set<TypeClass>,
): boolean {
  if ([...ca].some((c) => c !== "string" && cb.has(c))) return false;
  const pa = as.flatMap(stringPatterns);
  const pb = bs.flatMap(stringPatterns);
  if (pa.length === 0 || pb.length === 0) return false;
  try {
    let both: Dfa | null = null;
    for (const pattern of [...pa, ...pb]) {
      const dfa = patternDfa(pattern, true);
      both = both === null ? dfa : both.intersect(dfa);
      if (both.isEmpty) return true;
    }
  } catch (error) {
    if (error instanceof RegexError || error instanceof AutomatonTooLarge) return false;
    throw error;
  }
  return false;
}

/**
 * True only when every value satisfying all of `parts` satisfies `n`: `n` says nothing but `properties`
 * that some part gives the very same schema (equal JSON) and `required` names some part requires
 * (annotations aside). Such keywords hold for non-objects too, so no type is needed.
 */
function impliedBy(parts: SchemaObject[], n: unknown): boolean {
  if (n === true) return true;
  if (!isObject(n)) return false;
  for (const key in n) {
    if (!isConstraint(key)) continue;
    const value = n[key];
    if (key === "properties" && isObject(value)) {
      for (const name in value) {
        const wanted = canonical(value[name]);
        const given = parts.some(
          (p) =>
            isObject(p.properties) &&
            Object.hasOwn(p.properties, name) &&
            canonical(p.properties[name]) === wanted,
        );
        if (!given) return false;
      }
    } else if (key === "required" && Array.isArray(value)) {
      for (const name of value)
        if (!parts.some((p) => Array.isArray(p.required) && p.required.includes(name))) return false;
    } else return false;
  }
  return true;
}

/** A range of numbers: `lo`/`hi` (±Infinity when unbounded) and whether each end is excluded. */
type Range = { lo: number; loOpen: boolean; hi: number; hiOpen: boolean };

/** The numbers every one of `parts` allows by its `minimum`/`maximum`/`exclusive*` (draft-4 booleans too). */
function rangeOf(parts: SchemaObject[]): Range {
  const r: Range = { lo: -Infinity, loOpen: false, hi: Infinity, hiOpen: false };
  const raise = (v: unknown, open: boolean): void => {
    if (typeof v !== "number" || v < r.lo || (v === r.lo && (r.loOpen || !open))) return;
    r.lo = v;
    r.loOpen = open;
  };
  const lower = (v: unknown, open: boolean): void => {
    if (typeof v !== "number" || v > r.hi || (v === r.hi && (r.hiOpen || !open))) return;
    r.hi = v;
    r.hiOpen = open;
  };
  for (const p of parts) {
    raise(p.minimum, p.exclusiveMinimum === true);
    raise(p.exclusiveMinimum, true);
    lower(p.maximum, p.exclusiveMaximum === true);
    lower(p.exclusiveMaximum, true);
  }
  return r;
}

/**
 * True when every value both conjunctions admit is a number and their bounds leave no number in common (no
 * integer, when both admit only integers). Bounds compare as the doubles validators read; rounding is
 * monotonic, so the exact decimals the bounds were written as are apart too.
 */
function disjointRanges(
  as: SchemaObject[],
  bs: SchemaObject[],
  ca: Set<TypeClass>,
  cb: Set<TypeClass>,
): boolean {
  const common = [...ca].filter((c) => cb.has(c));
  if (common.some((c) => c !== "integer" && c !== "fraction")) return false;
  const a = rangeOf(as);
  const b = rangeOf(bs);
  let lo = a.lo;
  let loOpen = a.loOpen;
  if (b.lo > lo || (b.lo === lo && b.loOpen)) ({ lo, loOpen } = b);
  let hi = a.hi;
  let hiOpen = a.hiOpen;
  if (b.hi < hi || (b.hi === hi && b.hiOpen)) ({ hi, hiOpen } = b);
  if (lo > hi || (lo === hi && (loOpen || hiOpen))) return true;
  // Only integers in common: the least and greatest integers in range (exact below 2^53).
  if (common.length !== 1 || common[0] !== "integer") return false;
  if (Math.abs(lo) >= 2 ** 53 || Math.abs(hi) >= 2 ** 53) return false;
  const first = Number.isInteger(lo) && loOpen ? lo + 1 : Math.ceil(lo);
  const last = Number.isInteger(hi) && hiOpen ? hi - 1 : Math.floor(hi);
  return first > last;
}

/** True when every value both conjunctions admit is an array whose items both admit: none but `[]`. */
function sharesOnlyEmptyArray(
  as: SchemaObject[],
  bs: SchemaObject[],
  ca: Set<TypeClass>,
  cb: Set<TypeClass>,
  m: Memo,
  depth: number,
): boolean {
  if ([...ca].some((c) => c !== "array" && cb.has(c))) return false;
  const itemSchemas = (parts: SchemaObject[]): Schema[] =>
    parts
      .filter((p) => !("prefixItems" in p) && (isObject(p.items) || typeof p.items === "boolean"))
      .map((p) => p.items as Schema);
  for (const x of itemSchemas(as))
    for (const y of itemSchemas(bs)) if (disjoint(x, y, m, depth + 1)) return true;
  return false;
}

/** The intersection of the non-null sets, or null when all are null. */
function intersectAll(sets: (Set<string> | null)[]): Set<string> | null {
  let out: Set<string> | null = null;
  for (const set of sets) {
    if (set === null) continue;
    const kept: Set<string> =
      out === null ? set : new Set([...(out as Set<string>)].filter((v) => set.has(v)));
    out = kept;
  }
  return out;
}

/**
 * True only when `value` certainly fails one of `parts` (its `type`, listed values, or, for strings, its
 * `pattern`/`minLength`/`maxLength`; for numbers its bounds); false means "not known".
 */
function failsSome(value: unknown, parts: SchemaObject[]): boolean {
  const cls = classOfValue(value);
  for (const part of parts) {
    if ("type" in part && !typeClasses(part).includes(cls)) return true;
    const listed = listedValues(part);
    if (listed !== null && !listed.has(canonical(value))) return true;
    if (typeof value === "string") {
      const length = [...value].length;
      if (typeof part.minLength === "number" && length < part.minLength) return true;
      if (typeof part.maxLength === "number" && length > part.maxLength) return true;
      for (const pattern of stringPatterns(part)) {
        const re = ecmaRegex(pattern);
        if (re !== null && !re.test(value)) return true;
      }
      for (const format of stringNotFormats(part)) {
        if (formatDfa(format as SupportedFormat).matches(value)) return true;
      }
      for (const pattern of stringNotPatterns(part)) {
        const re = ecmaRegex(pattern);
        if (re?.test(value)) return true;
      }
    }
    if (typeof value === "number") {
      const { minimum, maximum, exclusiveMinimum: xmin, exclusiveMaximum: xmax } = part;
      if (typeof minimum === "number" && (xmin === true ? value <= minimum : value < minimum)) return true;
      if (typeof maximum === "number" && (xmax === true ? value >= maximum : value > maximum)) return true;
      if (typeof xmin === "number" && value <= xmin) return true;
      if (typeof xmax === "number" && value >= xmax) return true;
    }
  }
  return false;
}

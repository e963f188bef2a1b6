/**
 * Negation in the JSON Schema compiler (carved out of `compiler.ts`'s `SchemaCompiler`): `not: n` (and the
 * `else` side of `if`, and the branches a `oneOf` must exclude) written as an equivalent positive schema,
 * or a narrower one, or refused; and the finitely many values a schema may list. Schema algebra only: no
 * grammar is written here.
 */
import { type CodePointTrie, codePointTrie } from "../gbnf/gbnf.ts";
import { INTEGER_FORMATS, isSupportedFormat } from "./formats.ts";
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
import { canonical, normalizeExclusive } from "./merge.ts";

/** Deepest `$ref`/`allOf` chain followed (as the compiler's `MAX_RESOLVE_DEPTH`). */
const MAX_RESOLVE_DEPTH = 32;

const isObject = (v: unknown): v is SchemaObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** Most characters of listed strings that {@link otherThan} writes a complement pattern for. */
const MAX_COMPLEMENT_CHARS = 500;

/** `c` as a regex atom of our dialect (`\u{…}` unless an ASCII letter or digit). */
const regexChar = (cp: number): string =>
  /^[A-Za-z0-9]$/.test(String.fromCodePoint(cp)) ? String.fromCodePoint(cp) : `\\u{${cp.toString(16)}}`;

/**
 * A full-match pattern for every string other than `strings` (a trie, as the extra-key rule of objects
 * builds it: at each node, one of the next characters followed by the rest, or any other character and
 * anything after it).
 */
function stringsComplement(strings: string[]): string {
  const root = codePointTrie(strings);
  const any = "[\\u{0}-\\u{10ffff}]";
  const visit = (node: CodePointTrie): string => {
    const alts: string[] = [];
    for (const [cp, next] of node.children) {
      if (next.children.size === 0) alts.push(`${regexChar(cp)}${any}+`);
      else alts.push(`${regexChar(cp)}(?:${visit(next)})${next.end ? "" : "?"}`);
    }
    const excluded = [...node.children.keys()].map(regexChar).join("");
    alts.push(excluded === "" ? `${any}+` : `[^${excluded}]${any}*`);
    return alts.join("|");
  };
  return `^(?:${visit(root)})${root.end ? "" : "?"}$`;
}

/**
 * A schema for every JSON value other than `values`, or null when one is a number, array or object (the
 * values around them cannot be written): other types, strings through {@link stringsComplement}, the other
 * boolean, and `null` unless listed.
 */
function otherThan(values: unknown[]): Schema | null {
  if (values.some((v) => v !== null && typeof v !== "string" && typeof v !== "boolean")) return null;
  const strings = values.filter((v): v is string => typeof v === "string");
  if (strings.reduce((n, text) => n + text.length, 0) > MAX_COMPLEMENT_CHARS) return null;
  const branches: Schema[] = [{ type: ["object", "array", "number"] }];
  branches.push(
    strings.length === 0 ? { type: "string" } : { type: "string", pattern: stringsComplement(strings) },
  );
  const booleans = [true, false].filter((b) => !values.includes(b));
  if (booleans.length > 0) branches.push({ enum: booleans });
  if (!values.includes(null)) branches.push({ type: "null" });
  return { anyOf: branches };
}

/**
 * The formats whose automata are exactly the strings validators (ajv-formats) accept, the only ones `not`
 * can negate: the others are narrowed (`ipv6` in full form only, no leap second in `time`, no trailing dot
 * or sixth label in `hostname`, the `regex` subset, …), and their complements would take valid instances.
 */
const EXACT_FORMATS = new Set(["date", "ipv4", "ip-address"]);

/**
 * What the conjunction `context` says about objects: the names it requires and, per property name, the
 * schemas it gives that property, read from it, its `allOf` branches and (through `resolve`) its `$ref`
 * targets. {@link SchemaNegation.negate} reads the listed values of a negated property from these, and
 * leaves out the disjuncts that cannot hold beside them.
 */
type ContextFacts = { required: Set<string>; properties: Map<string, Schema[]> };

/** The {@link ContextFacts} of `context` (`$ref`s resolved by `resolve`; depth-bounded, each schema once). */
function contextFacts(context: SchemaObject, resolve: (ref: string) => unknown): ContextFacts {
  const facts: ContextFacts = { required: new Set(), properties: new Map() };
  gatherFacts(context, 0, facts, new Set(), resolve);
  return facts;
}

/** Adds what `s` (and its `allOf` branches and `$ref` target, each once) says about objects to `facts`. */
function gatherFacts(
  s: unknown,
  depth: number,
  facts: ContextFacts,
  seen: Set<unknown>,
  resolve: (ref: string) => unknown,
): void {
  if (!isObject(s) || depth > MAX_RESOLVE_DEPTH || seen.has(s)) return;
  seen.add(s);
  if (Array.isArray(s.required)) for (const name of s.required) facts.required.add(name as string);
  if (isObject(s.properties)) {
    for (const name in s.properties) {
      const schema = s.properties[name] as Schema;
      const list = facts.properties.get(name);
      if (list === undefined) facts.properties.set(name, [schema]);
      else list.push(schema);
    }
  }
  if (typeof s.$ref === "string") gatherFacts(resolve(s.$ref), depth + 1, facts, seen, resolve);
  if (Array.isArray(s.allOf))
    for (const branch of s.allOf) gatherFacts(branch, depth + 1, facts, seen, resolve);
}

/** What `facts` say about property `name`, as one schema (the context of its negation). */
function propertyContext(facts: ContextFacts, name: string): SchemaObject {
  const found = facts.properties.get(name) ?? [];
  return found.length === 1 && isObject(found[0]) ? found[0] : { allOf: found };
}

/**
 * The negations of one compilation, with their caches (context facts per context object, complements per
 * set of listed values). `resolveRef` resolves a local `$ref` in the root document; `keyOf` is the
 * compiler's structural key of a schema (`SubschemaKeys.ofSchema`), so that equal schemas built apart are
 * recognised.
 */
export class SchemaNegation {
  /** {@link contextFacts} by context object (a `oneOf` branch's context serves every other branch's negation). */
  private readonly contextFacts = new Map<SchemaObject, ContextFacts>();
  /** Results of {@link otherThan} by the listed values (one object each, so later caches hit). */
  private readonly complements = new Map<string, Schema | null>();

  constructor(
    private readonly resolveRef: (ref: string) => unknown,
    private readonly keyOf: (schema: unknown) => number,
  ) {}

  /**
   * A schema equivalent to `not: n` beside the keywords `context` (or narrower), or null when we cannot
   * write one. `n` is read as the conjunction of its keywords, so its negation is the disjunction of their
   * negations: `type` (the other types; not `integer` also allows the numbers that are not integers, through
   * the internal {@link NON_INTEGER}), `required` (an object lacking one of the names), `properties` whose
   * schemas accept anything (always true, so nothing), `anyOf`/`allOf` (De Morgan), `$ref` (its target),
   * `minimum`/`maximum`/`exclusive*` (a value that is not a number, or a number beyond the bound), `not`
   * (its schema), and `enum`/`const` when `context` lists finitely many values (the others). Disjuncts
   * that cannot hold beside `context` are left out (a name it requires, a property it gives the same
   * schema; see {@link contextFacts}). `true` negates to `false` and `false` to `true`. With `narrow`, a keyword whose negation cannot be written (or a property whose
   * value's negation cannot be written exactly) adds no disjunct instead of returning null: the result is
   * then a subset of `not: n` (possibly `false`), never null.
   */
  negate(n: Schema, context: SchemaObject, depth: number, narrow = false): Schema | null {
    if (n === true) return false;
    if (n === false) return true;
    if (depth > MAX_RESOLVE_DEPTH) return narrow ? false : null;
    const disjuncts: Schema[] = [];
    const keywords = normalizeExclusive(n);
    for (const key of Object.keys(keywords)) {
      if (!isConstraint(key)) continue;
      const value = keywords[key];
      switch (key) {
        case "minimum":
        case "exclusiveMinimum":
        case "maximum":
        case "exclusiveMaximum": {
          // A number on the other side of the bound (every other value satisfies the bound: no disjunct).
          const opposite = {
            minimum: "exclusiveMaximum",
            exclusiveMinimum: "maximum",
            maximum: "exclusiveMinimum",
            exclusiveMaximum: "minimum",
          }[key];
          disjuncts.push({ type: "number", [opposite]: value });
          break;
        }
        case "not":
          disjuncts.push(value as Schema); // not(not X) is X
          break;
        case "type": {
          const types = (Array.isArray(value) ? value : [value]) as TypeName[];
          const numeric = types.includes("number") || types.includes("integer");
          const others = TYPE_NAMES.filter(
            (t) => !types.includes(t) && !(numeric && (t === "number" || t === "integer")),
          );
          disjuncts.push(others.length === 0 ? false : { type: others });
          // Not an integer, but a number: one with a fraction (integer ⊂ number).
          if (types.includes("integer") && !types.includes("number"))
            disjuncts.push({ type: "number", [NON_INTEGER]: true });
          break;
        }
        case "required": {
          // (A name the context requires cannot be missing beside it.)
          const required = this.factsOf(context).required;
          const names = (value as string[]).filter((name) => !required.has(name));
          disjuncts.push(
            names.length === 0
              ? false
              : { type: "object", anyOf: names.map((name) => ({ properties: { [name]: false } })) },
          );
          break;
        }
        case "properties": {
          // An object that has one of the names with a value failing its schema (one disjunct per name).
          for (const [name, schema] of Object.entries(value as SchemaObject)) {
            // Beside a context that gives the name this very schema, its value cannot fail it.
            const key = this.keyOf(schema);
            const facts = this.factsOf(context);
            if (facts.properties.get(name)?.some((c) => c === schema || this.keyOf(c) === key)) continue;
            // (Narrowed or not, a property's value is negated exactly or not at all: narrowing inside
            // nested properties costs more than it keeps.)
            const negated = this.negate(schema as Schema, propertyContext(facts, name), depth + 1);
            if (negated === null) {
              if (narrow) continue;
              return null;
            }
            if (negated !== false)
              disjuncts.push({ type: "object", required: [name], properties: { [name]: negated } });
          }
          break;
        }
        case "format": {
          // An annotation-only format (unknown) always holds: its negation adds nothing.
          if (typeof value !== "string" || !isSupportedFormat(value)) {
            if (typeof value === "string" && INTEGER_FORMATS[value] !== undefined) {
              if (narrow) break;
              return null;
            }
            break;
          }
          // Only a format whose automaton is exactly what validators accept can be negated: the complement
          // of a narrowed one would take valid instances (ipv6's short forms, leap seconds, a trailing dot).
          if (!EXACT_FORMATS.has(value)) {
            if (narrow) break;
            return null;
          }
          disjuncts.push({ type: "string", [NOT_FORMATS]: [value] });
          break;
        }
        case NOT_FORMATS:
          for (const format of value as string[]) disjuncts.push({ type: "string", format });
          break;
        case "pattern":
        case EXTRA_PATTERNS:
        case NOT_PATTERNS:
        case "minLength":
        case "maxLength": {
          // A string failing this keyword (each pattern of a list alone); every other value satisfies it.
          const strings: SchemaObject[] =
            key === "minLength"
              ? (value as number) > 0
                ? [{ maxLength: (value as number) - 1 }]
                : []
              : key === "maxLength"
                ? [{ minLength: (value as number) + 1 }]
                : key === NOT_PATTERNS
                  ? (value as string[]).map((pattern) => ({ pattern }))
                  : (key === "pattern" ? [value as string] : (value as string[])).map((pattern) => ({
                      [NOT_PATTERNS]: [pattern],
                    }));
          for (const branch of strings) disjuncts.push({ type: "string", ...branch });
          break;
        }
        case "anyOf":
        case "allOf": {
          const negated = this.negateEach(value as Schema[], context, depth + 1, narrow);
          if (negated === null) return null;
          disjuncts.push(key === "anyOf" ? { allOf: negated } : { anyOf: negated });
          break;
        }
        case "$ref": {
          const target = this.resolveRef(value as string);
          if (typeof target !== "boolean" && !isObject(target)) {
            if (narrow) break;
            return null;
          }
          const negated = this.negate(target, context, depth + 1, narrow);
          if (negated === null) return null;
          disjuncts.push(negated);
          break;
        }
        case "enum":
        case "const": {
          const values = key === "const" ? [value] : (value as unknown[]);
          const listed = new Set(values.map(canonical));
          const candidates = this.finiteValues(context, 0);
          if (candidates === null) {
            const other = this.complementOf(values, listed);
            if (other === null) {
              if (narrow) break;
              return null;
            }
            disjuncts.push(other);
            break;
          }
          const others = candidates.filter((v) => !listed.has(canonical(v)));
          disjuncts.push(others.length === 0 ? false : { enum: others });
          break;
        }
        default:
          if (narrow) break; // this keyword's negation is left out: the result is narrower
          return null;
      }
    }
    const possible = disjuncts.filter((d) => d !== false);
    if (possible.some((d) => d === true)) return true;
    if (possible.length === 0) return false;
    return possible.length === 1 ? possible[0]! : { anyOf: possible };
  }

  /** The {@link ContextFacts} of `context`, read once per context object. */
  private factsOf(context: SchemaObject): ContextFacts {
    let facts = this.contextFacts.get(context);
    if (facts === undefined) {
      facts = contextFacts(context, this.resolveRef);
      this.contextFacts.set(context, facts);
    }
    return facts;
  }

  /** The {@link negate}s of `list`, or null when one cannot be written. */
  private negateEach(list: Schema[], context: SchemaObject, depth: number, narrow: boolean): Schema[] | null {
    const out: Schema[] = [];
    for (const branch of list) {
      const negated = this.negate(branch, context, depth, narrow);
      if (negated === null) return null;
      out.push(negated);
    }
    return out;
  }

  /**
   * The values `schema` lists when its instances are among finitely many (its `enum` or `const`, those of a
   * `$ref` target or an `allOf` branch that lists them, the union over `anyOf`/`oneOf` branches that all
   * do, or `true`/`false`/`null` for a boolean or null type), distinct as JSON; null when it lists none.
   * These are candidates: the caller still checks each against the whole schema.
   */
  finiteValues(schema: Schema, depth: number): unknown[] | null {
    if (typeof schema === "boolean" || depth > MAX_RESOLVE_DEPTH) return null;
    let values: unknown[] | null = null;
    if ("const" in schema) values = [schema.const];
    else if (Array.isArray(schema.enum)) values = schema.enum;
    else if (typeof schema.$ref === "string") {
      const target = this.resolveRef(schema.$ref);
      if (typeof target === "boolean" || isObject(target)) values = this.finiteValues(target, depth + 1);
    }
    if (values === null && Array.isArray(schema.allOf)) {
      for (const branch of schema.allOf as Schema[]) {
        values = this.finiteValues(branch, depth + 1);
        if (values !== null) break;
      }
    }
    const union = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
    if (values === null && Array.isArray(union)) {
      const parts = union.map((branch) => this.finiteValues(branch, depth + 1));
      if (parts.every((part) => part !== null)) values = parts.flat();
    }
    if (values === null && "type" in schema) {
      const types = typeSet(schema.type);
      if (types.every((t) => t === "boolean" || t === "null"))
        values = types.flatMap((t) => (t === "boolean" ? [true, false] : [null]));
    }
    if (values === null) return null;
    const seen = new Set<string>();
    return values.filter((v) => {
      const key = canonical(v);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  /**
   * {@link otherThan} of `values` (whose canonical JSON texts are `listed`), made once per set of values (the
   * first order seen writes the pattern; any order has the same language).
   */
  private complementOf(values: unknown[], listed: Set<string>): Schema | null {
    const key = [...listed].sort().join("\u0000");
    let other = this.complements.get(key);
    if (other === undefined) {
      other = otherThan(values);
      this.complements.set(key, other);
    }
    return other;
  }
}

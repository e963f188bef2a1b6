/**
 * JSON Schema → GBNF: our own compiler (ideas from llama.cpp's `common/json-schema-to-grammar.cpp`). The
 * output grammar's language is compact JSON (bounded optional whitespace between tokens, see
 * {@link DEFAULT_WS_BODY}) whose values satisfy the schema. Supported keywords and the choices made where
 * JSON Schema is looser than a grammar are listed in `docs/structured-output.md`; in short:
 * - objects: properties are written in declared order; any subset of optional properties may be omitted;
 *   `additionalProperties` defaults to false when `properties` is present (llama.cpp, xgrammar strict mode);
 * - `oneOf`: each branch excludes the others it may overlap (through their negations), else it is left out;
 *   `allOf` is merged;
 * - integers get exact range grammars; numbers get exact grammars for integer-valued bounds (no exponent);
 * - everything unknown or inexpressible is a 400 naming the keyword and its JSON pointer.
 */

import { ConstraintError } from "../errors.ts";
import {
  GbnfBuilder,
  gbnfLiteral,
  isAtomicExpression,
  literalTrie,
  MIN_TRIE_LITERALS,
} from "../gbnf/gbnf.ts";
import { checkGbnf, GbnfSyntaxError } from "../gbnf/gbnfCheck.ts";
import {
  DEFAULT_JSON_DEPTH,
  DEFAULT_WS_BODY,
  jsonBooleanRule,
  jsonNullRule,
  jsonObjectRule,
  jsonValueRule,
  WS,
} from "../gbnf/jsonPrimitives.ts";
import { CodePointSet } from "../regex/codePointSet.ts";
import { type Dfa, MAX_COMPILE_AUTOMATON_WORK, withAutomatonBudget } from "../regex/regexAutomaton.ts";
import { parseRegex, RegexError, type RegexNode } from "../regex/regexParser.ts";
import { echoed, regexBadRequest, regexExpression } from "../regex/regexToGbnf.ts";
import { arrayBody, objectBody, uniqueArrayBody } from "./containers.ts";
import type { CompileContext } from "./context.ts";
import { type DisjointTest, provablyDisjoint } from "./disjoint.ts";
import {
  ARRAY_KEYWORDS,
  checkSchemaKeywords,
  isConstraint,
  NON_INTEGER,
  NUMBER_KEYWORDS,
  OBJECT_KEYWORDS,
  resolveLocalRef,
  type Schema,
  type SchemaObject,
  STRING_KEYWORDS,
  type TypeName,
  typeSet,
} from "./keywords.ts";
import { literalFits } from "./literals.ts";
import { canonical, MergeError, mergeSchemas, normalizeExclusive } from "./merge.ts";
import { multipleOfBody } from "./multiples.ts";
import { SchemaNegation } from "./negation.ts";
import { dependencyPresence, MAX_PRESENCE_NODES, PresenceTooLarge } from "./presence.ts";
import { LocalRefs } from "./refs.ts";
import { integerBody, keyLanguage, numberBody, stringBody } from "./scalars.ts";
import { SubschemaKeys } from "./subschemaKeys.ts";

/** Options of {@link jsonSchemaToGbnf} and {@link jsonObjectToGbnf}. */
export type JsonGrammarOptions = {
  /** A regex for the whitespace allowed between JSON tokens (vLLM's `guided_whitespace_pattern`). */
  whitespacePattern?: string;
  /** The request field named in errors; default `"guided_json"`. */
  param?: string;
};

/** Most nested subschemas compiled inside one another (deeper is refused, instead of overflowing the stack). */
const MAX_NESTING = 1000;

/** Most subschema compilations for one schema (a guard against exponential rewrites). */
const MAX_COMPILE_STEPS = 10_000;

/**
 * Thrown inside the compiler when a subschema has no instance; optional places drop it, others fail. It is
 * control flow, caught by {@link SchemaCompiler.attempt} (often thousands of times for a large schema), so it
 * does not capture a stack trace.
 */
class UnsatisfiableError extends Error {
  constructor(message: string) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}

/**
 * What two `oneOf` branches may have in common (see `disjointPairs`): nothing (true), only `[]`, only
 * non-objects, or not known (false).
 */
type Overlap = boolean | "empty array" | "non-objects";

/**
 * Keywords after which the properties a schema evaluates depend on which alternative of it holds (see
 * `closedStatically`).
 */
const DYNAMIC_KEYWORDS = [
  "anyOf",
  "oneOf",
  "not",
  "if",
  "then",
  "else",
  "dependentSchemas",
  "dependencies",
  "$ref",
];

/** `{type: "object"}`, one object for every `oneOf` exclusion that needs only it (so caches hit). */
const OBJECT_TYPE: SchemaObject = Object.freeze({ type: "object" });

/**
 * Most pair tests {@link SchemaCompiler.provablyEmpty} makes for one document. Over JSONSchemaBench no
 * output changes from 4,000 down to 300 (prometheus's six `if`/`then` pairs need their pruning within it);
 * past it the tests only cost time: task.json spent 4,000 of them, a fifth of its compile time, and none
 * changed its grammar.
 */
const MAX_EMPTINESS_TESTS = 1_000;

/** Thrown to undo a compilation that only probed whether a subschema compiles on its own. */
const PROBED = new Error("probed");

/** Most `oneOf` branches one branch excludes (by conjoining their negations); a branch needing more is left out. */
const MAX_EXCLUSIVE_BRANCHES = 16;

/** Most non-consuming steps (`$ref` → `allOf` → `$ref` ...) followed before giving up on a schema. */
const MAX_RESOLVE_DEPTH = 32;

const isObject = (v: unknown): v is SchemaObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** True when `s` has a keyword that constrains something (not only annotations, definitions, unknown keywords). */
function constrains(s: SchemaObject): boolean {
  return Object.keys(s).some(isConstraint);
}

function matchesType(value: unknown, type: TypeName): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "boolean":
      return typeof value === "boolean";
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number";
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "array":
      return Array.isArray(value);
    case "object":
      return isObject(value);
  }
}

const DEPENDENCY_KEYWORDS = ["dependentRequired", "dependentSchemas", "dependencies"] as const;

/** True when `s` has a non-empty dependency keyword. */
function hasDependencies(s: SchemaObject): boolean {
  return DEPENDENCY_KEYWORDS.some((k) => isObject(s[k]) && Object.keys(s[k] as SchemaObject).length > 0);
}

/**
 * Removes one dependency of `s` (`dependentRequired`, `dependentSchemas`, or draft-04 `dependencies` in either
 * form) by rewriting: a required trigger property merges its dependency in; an optional one splits `s` into
 * `anyOf` [trigger absent, trigger present and the dependency holds]. Repeated, this is exact (and
 * exponential in the number of optional triggers, which the compile-step budget bounds).
 */
function splitDependency(s: SchemaObject): Schema {
  const keyword = DEPENDENCY_KEYWORDS.find(
    (k) => isObject(s[k]) && Object.keys(s[k] as SchemaObject).length > 0,
  )!;
  const entries = { ...(s[keyword] as SchemaObject) };
  const trigger = Object.keys(entries)[0]!;
  const dependency = entries[trigger];
  delete entries[trigger];
  const rest: SchemaObject = { ...s, [keyword]: entries };
  const required = (s.required as string[] | undefined) ?? [];
  const present = (base: SchemaObject): Schema =>
    Array.isArray(dependency)
      ? { ...base, required: [...new Set([...required, trigger, ...(dependency as string[])])] }
      : { allOf: [{ ...base, required: [...new Set([...required, trigger])] }, dependency] };
  if (required.includes(trigger)) return present(rest);
  const absent: SchemaObject = {
    ...rest,
    properties: { ...((s.properties as SchemaObject | undefined) ?? {}), [trigger]: false },
  };
  return { anyOf: [absent, present(rest)] };
}

/**
 * `merged` closed by a sibling `unevaluatedProperties: false` of the `allOf`/`$ref` it came from: the
 * properties every merged branch declares count as evaluated, so the merge result is closed as a whole.
 */
function closeUnevaluated(merged: Schema, unevaluatedProperties: unknown): Schema {
  if (unevaluatedProperties !== false || merged === false) return merged;
  return { ...(merged === true ? {} : merged), unevaluatedProperties: false };
}

/**
 * When every branch of an `anyOf` (or, with `exclusive`, a `oneOf`) only lists values (`enum`/`const`
 * beside annotations, or `false`), the values an instance may be: those some branch lists (for `oneOf`,
 * exactly one branch, as JSON). Else null. The union then compiles as one `enum`, one step instead of one
 * per branch.
 */
function listedUnion(branches: Schema[], exclusive: boolean): unknown[] | null {
  const counts = new Map<string, { value: unknown; count: number }>();
  for (const branch of branches) {
    if (branch === false) continue;
    if (branch === true) return null;
    let values: unknown[] | null = null;
    for (const key of Object.keys(branch)) {
      if (!isConstraint(key)) continue;
      if (key === "enum" && Array.isArray(branch.enum) && values === null) values = branch.enum;
      else if (key === "const" && values === null) values = [branch.const];
      else return null; // other keywords, or both enum and const
    }
    if (values === null) return null;
    const inBranch = new Set<string>();
    for (const value of values) {
      const key = canonical(value);
      if (inBranch.has(key)) continue;
      inBranch.add(key);
      const seen = counts.get(key);
      if (seen === undefined) counts.set(key, { value, count: 1 });
      else seen.count++;
    }
  }
  return [...counts.values()].filter((v) => !exclusive || v.count === 1).map((v) => v.value);
}

/** Types implied by type-specific keywords when `type` is absent (as llama.cpp treats `properties` as object). */
function inferTypes(s: SchemaObject): TypeName[] {
  const out: TypeName[] = [];
  if (OBJECT_KEYWORDS.some((k) => k in s)) out.push("object");
  if (ARRAY_KEYWORDS.some((k) => k in s)) out.push("array");
  if (STRING_KEYWORDS.some((k) => k in s)) out.push("string");
  if (NUMBER_KEYWORDS.some((k) => k in s)) out.push("number");
  return out;
}

/** The keywords that make {@link inferTypes} read a schema without `type` as an array, string or number. */
/** Writes the whitespace rule `ws`: the default body, or `pattern` compiled as a full-match regex. */
function defineWhitespace(b: GbnfBuilder, pattern: string | undefined): void {
  b.reserveExact(WS);
  if (pattern === undefined) {
    b.define(WS, DEFAULT_WS_BODY);
    return;
  }
  try {
    if (!onlyJsonWhitespace(parseRegex(pattern))) {
      throw new ConstraintError(
        `guided_whitespace_pattern "${echoed(pattern)}" matches characters other than JSON whitespace (space, tab, newline, carriage return), which would make the output invalid JSON; use e.g. "[ \\t\\n]{0,4}".`,
        "guided_whitespace_pattern",
      );
    }
    b.define(WS, regexExpression(b, pattern, { mode: "raw", search: false, hint: "ws" }));
  } catch (error) {
    if (error instanceof RegexError) throw regexBadRequest(error, pattern, "guided_whitespace_pattern");
    throw error;
  }
}

const JSON_WHITESPACE = CodePointSet.chars(" \t\n\r");

/** Whether every character the regex can match is JSON whitespace. */
function onlyJsonWhitespace(node: RegexNode): boolean {
  switch (node.type) {
    case "set":
      return node.set.subtract(JSON_WHITESPACE).isEmpty;
    case "seq":
    case "alt":
      return node.items.every(onlyJsonWhitespace);
    case "repeat":
      return node.max === 0 || onlyJsonWhitespace(node.item);
    default:
      return true;
  }
}

/** Checks the finished grammar with our port of llama.cpp's parser; a failure (e.g. a schema that recurses without consuming input) is a 400. */
function finish(b: GbnfBuilder, param: string): string {
  const text = b.render();
  try {
    checkGbnf(text);
  } catch (error) {
    if (error instanceof GbnfSyntaxError) {
      throw new ConstraintError(`The JSON schema cannot be compiled to a grammar: ${error.message}.`, param);
    }
    throw error;
  }
  return text;
}

class SchemaCompiler implements CompileContext {
  readonly b = new GbnfBuilder();
  /** `oneOf` branches that compiled on their own where their exclusions failed (see {@link union}). */
  private readonly probed = new WeakSet<object>();
  /** The `oneOf` disjointness test of this document (made on first use). */
  private disjoint: DisjointTest | undefined;
  /** The disjointness test of {@link provablyEmpty} (made on first use). */
  private apart: DisjointTest | undefined;
  /** Answers of {@link provablyEmpty} by schema object. */
  private readonly emptiness = new WeakMap<object, boolean>();
  private readonly refs = new Map<string, string>();
  /** The document's local `$ref`s (refs.ts). */
  private readonly localRefs: LocalRefs;
  /** Results of {@link flatten} by subschema object. */
  private readonly flattened = new WeakMap<SchemaObject, Schema>();
  /** Results of {@link flatten} by subschema key (see {@link SubschemaKeys.ofSchema}). */
  private readonly mergedByKey = new Map<number, Schema>();
  /** Structural keys of subschemas, so that equal subschemas are compiled once. */
  private readonly keys = new SubschemaKeys();
  /** Resolves a local `$ref` in the root document (for {@link contextFacts} and the disjointness tests). */
  private readonly resolver = (ref: string): unknown => this.localRefs.resolve(ref);
  /** `not` and `if` written as schemas (negation.ts), with its caches. */
  private readonly negation = new SchemaNegation(this.resolver, (schema) => this.keys.ofSchema(schema));
  /** The representative object of each subschema key (see {@link canonicalSchema}). */
  private readonly canonicalSchemas = new Map<number, SchemaObject>();
  /** The symbol {@link value} returned, by subschema key; entries are undone with the rules they name. */
  private readonly symbols = new Map<number, string>();
  /** The keys of {@link symbols} in insertion order (what {@link attempt} undoes from the end). */
  private readonly symbolOrder: number[] = [];
  private nesting = 0;
  private steps = 0;
  /**
   * Failures (400 or no instance) by subschema key: compiling an equal subschema again fails the same way,
   * so it is not tried again (a `oneOf` branch or `allOf` combination retried in many places). Failures a
   * depth limit took part in are not kept (they depend on where the subschema stands).
   */
  private readonly failures = new Map<number, Error>();
  /** Depth-limit failures so far (see {@link failDeep}). */
  private depthErrors = 0;

  constructor(
    private readonly root: Schema,
    readonly param: string,
  ) {
    this.localRefs = new LocalRefs(root, param);
  }

  fail(message: string): never {
    throw new ConstraintError(message, this.param);
  }

  /** {@link fail} for a depth limit: counted, so that no failure it takes part in is remembered. */
  private failDeep(message: string): never {
    this.depthErrors++;
    return this.fail(message);
  }

  unsatisfiable(message: string): never {
    throw new UnsatisfiableError(message);
  }

  attempt<T>(fn: () => T): T | null {
    return this.tryOr(fn, (error) => error instanceof UnsatisfiableError);
  }

  /**
   * Runs `fn`; when it throws an error that `recoverable` accepts, undoes the rules, `$ref` names and
   * symbols it added and returns null. Other errors pass through.
   */
  private tryOr<T>(fn: () => T, recoverable: (error: unknown) => boolean): T | null {
    const mark = this.b.checkpoint();
    const refCount = this.refs.size;
    const symbolCount = this.symbolOrder.length;
    try {
      return fn();
    } catch (error) {
      if (!recoverable(error)) throw error;
      this.b.rollback(mark);
      if (this.refs.size > refCount)
        for (const key of [...this.refs.keys()].slice(refCount)) this.refs.delete(key);
      while (this.symbolOrder.length > symbolCount) this.symbols.delete(this.symbolOrder.pop()!);
      return null;
    }
  }

  compile(whitespacePattern: string | undefined): string {
    checkSchemaKeywords(this.root, this.param);
    this.b.reserveExact("root");
    defineWhitespace(this.b, whitespacePattern);
    this.refs.set("#", "root");
    try {
      this.b.define("root", this.body(this.root, "#", "root", 0));
    } catch (error) {
      if (error instanceof UnsatisfiableError)
        this.fail(`The JSON schema has no satisfiable instance: ${error.message}`);
      if (error instanceof RangeError)
        this.fail(
          error.message.includes("call stack")
            ? "The JSON schema is nested too deeply to compile; flatten it (for example with $defs and $ref)."
            : `The JSON schema cannot be compiled to a grammar: ${error.message}.`,
        );
      throw error;
    }
    return finish(this.b, this.param);
  }

  /**
   * See {@link CompileContext.admits}: decided from `type`, `nullable`, `enum`, `const`, `$ref`, `allOf`,
   * `anyOf`, `oneOf` and the keywords of other types than the value's; any other keyword leaves it to the
   * compiler (undefined).
   */
  admits(schema: Schema, value: string | number | boolean | null, depth = 0): boolean | undefined {
    if (typeof schema === "boolean") return schema;
    if (!isObject(schema) || depth > MAX_RESOLVE_DEPTH) return undefined;
    let answer: boolean | undefined = true;
    for (const key in schema) {
      if (!isConstraint(key) || key === "nullable") continue;
      const v = schema[key];
      if (key === "type") {
        const types = (Array.isArray(v) ? v : [v]) as TypeName[];
        if (!types.some((t) => matchesType(value, t)) && !(value === null && schema.nullable === true))
          return false;
      } else if (key === "enum") {
        if (!Array.isArray(v) || !v.some((x) => x === value)) return false;
      } else if (key === "const") {
        if (v !== value) return false;
      } else if (key === "$ref" || key === "allOf" || key === "anyOf" || key === "oneOf") {
        const parts =
          key === "$ref"
            ? [typeof v === "string" ? this.localRefs.resolve(v) : undefined]
            : Array.isArray(v)
              ? (v as unknown[])
              : [undefined];
        const answers = parts.map((part) =>
          typeof part === "boolean" || isObject(part) ? this.admits(part, value, depth + 1) : undefined,
        );
        const yes = answers.filter((a) => a === true).length;
        const unknown = answers.includes(undefined);
        if (key === "anyOf") {
          if (yes === 0) answer = unknown ? undefined : false;
        } else if (key === "oneOf") {
          if (yes > 1) return false;
          if (unknown) answer = undefined;
          else if (yes === 0) return false;
        } else if (answers.includes(false)) return false;
        else if (unknown) answer = undefined;
      } else if (
        !(OBJECT_KEYWORDS as readonly string[]).includes(key) &&
        !(ARRAY_KEYWORDS as readonly string[]).includes(key) &&
        !(typeof value !== "string" && (STRING_KEYWORDS as readonly string[]).includes(key)) &&
        !(typeof value !== "number" && (NUMBER_KEYWORDS as readonly string[]).includes(key))
      )
        answer = undefined;
    }
    return answer;
  }

  sameSchema(a: Schema, b: Schema): boolean {
    return a === b || this.keys.ofSchema(a) === this.keys.ofSchema(b);
  }

  /** See {@link CompileContext.refuteMerge}: the merge's own "no instance" error, nothing else. */
  refuteMerge(schema: Schema, path: string): void {
    if (typeof schema === "boolean" || !("allOf" in schema || "$ref" in schema)) return;
    try {
      this.flatten(schema, path, 0);
    } catch (error) {
      if (error instanceof UnsatisfiableError) throw error;
    }
  }

  /**
   * A single GBNF symbol (rule name or literal) for `schema`. A subschema equal to one compiled before
   * (same keywords and values, top-level annotations aside) gets that one's symbol without compiling again;
   * {@link bodyOf} compiles its rewrites (`allOf` merges, `not`, dependency splits, `multipleOf` lists)
   * through here too, so schemas that rewrite to equal ones share one compilation.
   */
  value(schema: Schema, path: string, hint: string, depth: number): string {
    const key = this.keys.ofSchema(schema);
    const known = this.symbols.get(key);
    if (known !== undefined) return known;
    const failed = this.failures.get(key);
    if (failed !== undefined) throw failed;
    const depthErrors = this.depthErrors;
    try {
      return this.compileValue(schema, key, path, hint, depth);
    } catch (error) {
      // A subschema's compilation fails the same way wherever it stands, unless a depth limit took part.
      if (
        this.depthErrors === depthErrors &&
        (error instanceof UnsatisfiableError || error instanceof ConstraintError)
      )
        this.failures.set(key, error);
      throw error;
    }
  }

  /** {@link value} for a subschema not compiled (nor failed) before; `key` is its structural key. */
  private compileValue(schema: Schema, key: number, path: string, hint: string, depth: number): string {
    let symbol: string;
    if (
      isObject(schema) &&
      Array.isArray(schema.allOf) &&
      schema.allOf.some((x) => isObject(x) && "$ref" in x)
    ) {
      // An allOf over $refs is inlined by merging; naming it lets a recursive one refer to itself.
      const refKey = `allOf:${key}`;
      const named = this.refs.get(refKey);
      if (named !== undefined) return named;
      symbol = this.b.reserve(hint);
      this.refs.set(refKey, symbol);
      this.b.define(symbol, this.body(schema, path, hint, depth));
    } else {
      const body = this.body(schema, path, hint, depth);
      symbol = isAtomicExpression(body) && !body.startsWith("(") ? body : this.b.rule(hint, body);
    }
    this.symbols.set(key, symbol);
    this.symbolOrder.push(key);
    return symbol;
  }

  /** A GBNF expression (possibly with top-level `|`) for `schema` at JSON pointer `path`. */
  private body(schema: Schema, path: string, hint: string, depth: number): string {
    if (++this.steps > MAX_COMPILE_STEPS)
      this.fail(`The JSON schema is too large or expands to too many alternatives (at ${path}).`);
    if (this.nesting >= MAX_NESTING) this.failDeep(`The JSON schema at ${path} nests too deeply.`);
    this.nesting++;
    try {
      return this.bodyOf(schema, path, hint, depth);
    } finally {
      this.nesting--;
    }
  }

  private bodyOf(schema: Schema, path: string, hint: string, depth: number): string {
    if (depth > MAX_RESOLVE_DEPTH)
      this.failDeep(`The JSON schema at ${path} nests $ref/allOf too deeply or recursively.`);
    if (schema === true) return jsonValueRule(this.b);
    if (schema === false) this.unsatisfiable(`the schema at ${path} is false.`);
    let s = normalizeExclusive(schema as SchemaObject);
    if ("nullable" in s) {
      // OpenAPI 3.0.3: `nullable: true` adds "null" to `type` (an `enum` or `const` still decides whether
      // null is listed), and without `type` it has no effect; as ajv reads it.
      const { nullable, ...rest } = s;
      if (nullable !== true || !("type" in rest)) return this.body(rest, path, hint, depth + 1);
      const types = typeSet(rest.type);
      return this.body(
        { ...rest, type: types.includes("null") ? rest.type : [...types, "null"] },
        path,
        hint,
        depth + 1,
      );
    }
    if ("$ref" in s) {
      const { $ref, ...rest } = s;
      if (!constrains(rest)) return this.refRule($ref as string);
      s = { ...rest, allOf: [{ $ref }, ...((rest.allOf as unknown[] | undefined) ?? [])] };
    }
    if ("not" in s) {
      const { not, ...rest } = s;
      const negated = this.negation.negate(not as Schema, rest, 0);
      if (negated === null) this.fail(`Unsupported JSON Schema keyword 'not' at ${path}`);
      if (negated !== true) {
        if ("unevaluatedProperties" in rest) {
          // What the negation names is never evaluated: the keyword closes `rest` first.
          const closed = this.closedStatically(rest, path, depth);
          if (closed === null)
            this.fail(
              `Unsupported JSON Schema keyword 'not' at ${path}: beside 'unevaluatedProperties' whose evaluated names depend on which alternative holds`,
            );
          return this.value({ allOf: [closed, negated] }, path, hint, depth + 1);
        }
        const allOf = [...((rest.allOf as Schema[] | undefined) ?? []), negated];
        return this.value({ ...rest, allOf }, path, hint, depth + 1);
      }
      s = rest;
    }
    if ("if" in s) s = this.conditional(s, path) as SchemaObject;
    if ("allOf" in s) return this.value(this.flatten(s, path, depth), path, hint, depth + 1);
    if ("anyOf" in s || "oneOf" in s) return this.union(s, path, hint, depth);
    let types: TypeName[] =
      "type" in s ? (Array.isArray(s.type) ? (s.type as TypeName[]) : [s.type as TypeName]) : inferTypes(s);
    if (s[NON_INTEGER] === true) {
      types = types.filter((t) => t !== "integer");
      if (types.length === 0)
        this.unsatisfiable(`the schema at ${path} allows only integers and no integer.`);
    }
    if ("const" in s || "enum" in s) return this.literals(s, path, "type" in s ? types : null);
    if (types.length === 0) return jsonValueRule(this.b);
    if (types.length > 1) {
      return types.map((t) => this.value({ ...s, type: t }, path, `${hint}-${t}`, depth + 1)).join(" | ");
    }
    switch (types[0]!) {
      case "object": {
        const keyNames = this.propertyNames(s, path);
        if (hasDependencies(s)) {
          // Dependencies that only say which members are present are compiled as one object with a
          // presence constraint; others are split into alternatives, one trigger at a time.
          const presence = "minProperties" in s || "maxProperties" in s ? null : dependencyPresence(s);
          if (presence === null) return this.value(splitDependency(s), path, hint, depth + 1);
          try {
            return objectBody(this, s, path, hint, keyNames, presence);
          } catch (error) {
            if (!(error instanceof PresenceTooLarge)) throw error;
            // Splitting would write at least as many objects as the diagram has states.
            const keyword = DEPENDENCY_KEYWORDS.find((k) => k in s)!;
            this.fail(
              `Unsupported JSON Schema keyword '${keyword}' at ${path}: its dependencies combine into more than ${MAX_PRESENCE_NODES} member states`,
            );
          }
        }
        return objectBody(this, s, path, hint, keyNames);
      }
      case "array":
        if (s.uniqueItems === true) {
          const items = Array.isArray(s.items) || !("items" in s) ? null : (s.items as Schema);
          const candidates = items === null ? null : this.negation.finiteValues(items, 0);
          return uniqueArrayBody(this, s, candidates, path, hint);
        }
        return arrayBody(this, s, path, hint);
      case "string":
        return stringBody(this, s, path, hint);
      case "integer":
      case "number":
        if ("multipleOf" in s)
          return multipleOfBody(this, s, path, types[0] === "integer", s[NON_INTEGER] === true);
        return types[0] === "integer"
          ? integerBody(this, s, path)
          : numberBody(this, s, path, s[NON_INTEGER] === true);
      case "boolean":
        return jsonBooleanRule(this.b);
      case "null":
        return jsonNullRule(this.b);
    }
  }

  /**
   * `s` with `if`/`then`/`else` rewritten as `anyOf: [if ∧ then, not(if) ∧ else]` (exact), conjoined with
   * its other keywords; a 400 naming `if` when the negation of `if` cannot be written (see {@link SchemaNegation.negate}).
   * `outer` is the schema around an `allOf` branch, whose keywords the negation may rely on too.
   * `then`/`else` without `if` are ignored, as the specification says.
   */
  private conditional(s: SchemaObject, path: string, outer: SchemaObject = {}): Schema {
    const { if: condition, then: whenTrue = true, else: whenFalse = true, ...rest } = s;
    const negated = this.negation.negate(condition as Schema, { allOf: [outer, rest] }, 0);
    if (negated === null) this.fail(`Unsupported JSON Schema keyword 'if' at ${path}`);
    if ("unevaluatedProperties" in rest) {
      // When `if` fails, the names it mentions are not evaluated: the `else` case is closed before the
      // negation joins it (when `if` holds, its names count, as the `then` case merges them).
      const earlier = (rest.allOf as Schema[] | undefined) ?? [];
      const otherwise = this.closedStatically({ ...rest, allOf: [...earlier, whenFalse] }, path, 0);
      if (otherwise === null)
        this.fail(
          `Unsupported JSON Schema keyword 'if' at ${path}: beside 'unevaluatedProperties' whose evaluated names depend on which alternative holds`,
        );
      return {
        anyOf: [{ ...rest, allOf: [...earlier, condition, whenTrue] }, { allOf: [otherwise, negated] }],
      };
    }
    const cases = { anyOf: [{ allOf: [condition, whenTrue] }, { allOf: [negated, whenFalse] }] };
    return { ...rest, allOf: [...((rest.allOf as Schema[] | undefined) ?? []), cases] };
  }

  /**
   * The names `s.propertyNames` allows, as an automaton (null: any name), its `$ref`s resolved. Throws 400
   * for what {@link keyLanguage} cannot read.
   */
  private propertyNames(s: SchemaObject, path: string): Dfa | null {
    if (!("propertyNames" in s)) return null;
    let names = s.propertyNames as Schema;
    for (let depth = 0; isObject(names) && typeof names.$ref === "string"; depth++) {
      const { $ref, ...rest } = names;
      if (constrains(rest) || depth > MAX_RESOLVE_DEPTH)
        this.fail(`Unsupported JSON Schema keyword 'propertyNames' at ${path}: a $ref with other keywords.`);
      const target = resolveLocalRef(this.root, $ref as string);
      if (target === undefined)
        this.fail(`Unsupported $ref '${echoed($ref as string)}' at ${path}/propertyNames.`);
      names = target as Schema;
    }
    return keyLanguage(this, names, `${path}/propertyNames`);
  }

  /** The rule for a local `$ref` (JSON pointer into the root document), compiled once; recursion allowed. */
  private refRule(ref: string): string {
    const known = this.refs.get(ref);
    if (known !== undefined) return known;
    const target = this.localRefs.target(ref);
    let last = ref.split("/").pop() ?? "ref";
    try {
      last = decodeURIComponent(last);
    } catch {}
    const name = this.b.reserve(last || "ref");
    this.refs.set(ref, name);
    this.b.define(name, this.body(target, ref, name, 0));
    return name;
  }

  /** A schema without top-level `$ref`/`allOf`: the merge of all `allOf` branches (refs resolved). */
  private flatten(s: Schema, path: string, depth: number): Schema {
    if (depth > MAX_RESOLVE_DEPTH)
      this.failDeep(`The JSON schema at ${path} nests $ref/allOf too deeply or recursively.`);
    if (typeof s === "boolean" || !("$ref" in s || "allOf" in s || "if" in s)) return s;
    // The merge of a subschema depends only on its structure: `$ref` targets and `allOf` branches that
    // many places share, and equal conjunctions built apart (oneOf exclusions), are merged once.
    const known = this.flattened.get(s);
    if (known !== undefined) return known;
    const key = this.keys.ofSchema(s);
    let merged = this.mergedByKey.get(key);
    if (merged === undefined) {
      merged = this.flattenObject(s, path, depth);
      this.mergedByKey.set(key, merged);
    }
    this.flattened.set(s, merged);
    return merged;
  }

  private flattenObject(s: SchemaObject, path: string, depth: number): Schema {
    if ("$ref" in s) {
      const { $ref, unevaluatedProperties, ...rest } = s;
      const merged = this.conjoin(
        this.flatten(this.localRefs.target($ref as string), path, depth + 1),
        this.flatten(rest, path, depth + 1),
        path,
      );
      return closeUnevaluated(merged, unevaluatedProperties);
    }
    if ("if" in s) return this.flatten(this.conditional(s, path), path, depth + 1);
    if (!("allOf" in s)) return s;
    const { allOf, unevaluatedProperties, ...rest } = s;
    let acc: Schema = this.flatten(rest, path, depth + 1);
    if (
      unevaluatedProperties !== undefined &&
      (allOf as Schema[]).some((part) => isObject(part) && "if" in part)
    )
      this.fail(
        `Unsupported JSON Schema keyword 'if' at ${path}/allOf: inside an allOf beside 'unevaluatedProperties' (the names a failing 'if' mentions are not evaluated)`,
      );
    for (const part of allOf as Schema[]) {
      const piece = isObject(part) && "if" in part ? this.conditional(part, path, rest) : part;
      acc = this.conjoin(acc, this.flatten(piece, path, depth + 1), path);
    }
    return closeUnevaluated(acc, unevaluatedProperties);
  }

  private conjoin(a: Schema, b: Schema, path: string): Schema {
    try {
      return mergeSchemas(a, b);
    } catch (error) {
      if (error instanceof MergeError) {
        if (error.unsatisfiable) this.unsatisfiable(`the allOf at ${path} cannot hold: ${error.message}.`);
        this.fail(`Unsupported allOf at ${path}: ${error.message}.`);
      }
      throw error;
    }
  }

  /**
   * `anyOf`/`oneOf`; sibling keywords are distributed into each branch. A `oneOf` branch is compiled
   * together with the negations of the other branches it is not provably disjoint from (exact). Where such
   * a negation cannot be written, a narrower one is used (see {@link SchemaNegation.negate}'s `narrow`); a branch that
   * needs too many, or whose conjunction with them cannot be compiled, is left out. Both only narrow: the
   * other branches still exclude it. A `oneOf` with nothing left that way is a 400 naming it.
   */
  private union(s: SchemaObject, path: string, hint: string, depth: number): string {
    const { anyOf, oneOf, unevaluatedProperties, ...rest } = s;
    // Beside a oneOf, an anyOf is a sibling keyword like any other (oneOf[Bi] ∧ A ≡ oneOf[Bi ∧ A]).
    if (anyOf !== undefined && oneOf !== undefined) rest.anyOf = anyOf;
    const keyword = oneOf !== undefined ? "oneOf" : "anyOf";
    const branches = (oneOf ?? anyOf) as Schema[];
    const exclusive = keyword === "oneOf" && branches.length > 1;
    if (unevaluatedProperties === undefined) {
      const listed = listedUnion(branches, exclusive);
      if (listed !== null) {
        const values: Schema = { enum: listed };
        return this.body(constrains(rest) ? { allOf: [rest, values] } : values, path, hint, depth + 1);
      }
    }
    // (With a sibling `unevaluatedProperties`, branches exclude each other by full negations only: what a
    // branch evaluates decides that keyword, and a bare `{type: object}` evaluates nothing.)
    const disjoint = exclusive
      ? this.disjointPairs(rest, branches, path, unevaluatedProperties === undefined)
      : null;
    const alternatives: string[] = [];
    let dropped = 0;
    let narrowed = false;
    for (let i = 0; i < branches.length; i++) {
      const branch = branches[i]!;
      // (A branch with no instance adds nothing: `allOf`s of `if`/`then` expand into many such.)
      if (branch === false || this.provablyEmpty(branch)) continue;
      const at = `${path}/${keyword}/${i}`;
      const union = { rest, branch, unevaluatedProperties, at, hint: `${hint}-${i}`, depth: depth + 1 };
      let alternative: string | null;
      let others: Schema[] | null = [];
      if (exclusive) {
        const excluded = this.exclusions(rest, branches, i, disjoint!);
        others = excluded.negations;
        narrowed ||= excluded.narrowed;
      }
      if (others === null) {
        dropped++;
        continue;
      }
      if (others.includes(false)) continue; // excluding a branch that may hold anything leaves nothing
      if (others.length > 0) {
        // The exclusions can make the branch inexpressible (a 400): the branch is then left out, unless it
        // is inexpressible on its own too (that 400 stands, as in anyOf).
        // (null: that 400 was undone; `{ symbol: null }`: the exclusive branch has no instance.)
        const withOthers = others;
        const exact = this.tryOr(
          () => ({ symbol: this.attempt(() => this.unionBranch(union, withOthers)) }),
          (error) => error instanceof ConstraintError,
        );
        if (exact === null) {
          // (A branch object found to compile alone once is not probed again: either answer is safe.)
          if (typeof branch === "object" && this.probed.has(branch)) {
            dropped++;
            continue;
          }
          this.tryOr(
            () => {
              this.attempt(() => this.unionBranch(union, []));
              throw PROBED;
            },
            (error) => error === PROBED,
          );
          if (typeof branch === "object") this.probed.add(branch);
          dropped++;
          continue;
        }
        alternative = exact.symbol;
      } else alternative = this.attempt(() => this.unionBranch(union, []));
      if (alternative !== null) alternatives.push(alternative);
    }
    if (alternatives.length === 0) {
      if (dropped > 0 || narrowed)
        this.fail(
          `Unsupported JSON Schema keyword 'oneOf' at ${path}: its branches may overlap, and excluding the overlap needs a negation that cannot be written`,
        );
      this.unsatisfiable(
        exclusive
          ? `no value satisfies exactly one branch of the oneOf at ${path} (each branch has no instance, or every instance of it satisfies another branch too).`
          : `the ${keyword} at ${path} has no satisfiable branch.`,
      );
    }
    return [...new Set(alternatives)].join(" | ");
  }

  /**
   * True only when `s` has no instance: an `allOf` (beside its other keywords) two of whose parts are
   * provably disjoint, or one of whose parts is such itself. Remembered per object; it has its own
   * disjointness test, so that it never uses up the `oneOf` test's budget.
   */
  private provablyEmpty(s: Schema): boolean {
    if (s === false) return true;
    if (!isObject(s) || !Array.isArray(s.allOf)) return false;
    const known = this.emptiness.get(s);
    if (known !== undefined) return known;
    this.apart ??= provablyDisjoint(this.resolver, MAX_EMPTINESS_TESTS);
    const { allOf, ...rest } = s;
    const parts = [...(constrains(rest) ? [rest] : []), ...(allOf as Schema[])];
    let empty = parts.some((part) => this.provablyEmpty(part));
    for (let i = 0; i < parts.length && !empty; i++)
      for (let j = i + 1; j < parts.length && !empty; j++) empty = this.apart.disjoint(parts[i]!, parts[j]!);
    this.emptiness.set(s, empty);
    return empty;
  }

  /**
   * The negations of the `oneOf` branches that branch `i` may overlap (beside the keywords `rest`; `disjoint`
   * from {@link disjointPairs}), or null when it needs more than {@link MAX_EXCLUSIVE_BRANCHES}; `narrowed`
   * when a negation could not be written exactly and a narrower one was used (branch i then loses more).
   */
  private exclusions(
    rest: SchemaObject,
    branches: Schema[],
    i: number,
    disjoint: Overlap[][],
  ): { negations: Schema[] | null; narrowed: boolean } {
    const context: SchemaObject = { allOf: [rest, branches[i]!] };
    const out: Schema[] = [];
    let narrowed = false;
    let objectsOnly = false;
    for (let j = 0; j < branches.length; j++) {
      const other = branches[j]!;
      if (j === i || other === false || disjoint[i]![j] === true) continue;
      if (disjoint[i]![j] === "non-objects") {
        objectsOnly = true; // both hold for every non-object, and no object satisfies both (exact)
        continue;
      }
      if (out.length >= MAX_EXCLUSIVE_BRANCHES - 1) return { negations: null, narrowed };
      if (disjoint[i]![j] === "empty array") {
        out.push({ minItems: 1 }); // `[]` matches both: excluded from both (exact)
        continue;
      }
      let negated = this.negation.negate(other, context, 0);
      if (negated === null) {
        narrowed = true;
        negated = this.negation.negate(other, context, 0, true)!;
      }
      out.push(negated);
    }
    // (One `{type: object}` excludes every branch that overlaps this one only in non-objects.)
    if (objectsOnly) out.push(OBJECT_TYPE);
    return { negations: out, narrowed };
  }

  /**
   * The symbol of one `anyOf`/`oneOf` branch conjoined with the union's other keywords `rest` and with
   * `others` (the negations that exclude the other branches).
   */
  private unionBranch(
    u: {
      rest: SchemaObject;
      branch: Schema;
      unevaluatedProperties: unknown;
      at: string;
      hint: string;
      depth: number;
    },
    others: Schema[],
  ): string {
    const parts = [u.branch, ...others];
    // A sibling `unevaluatedProperties: false` sees the branch's properties (it applies after their merge),
    // not those the exclusions name: a failing branch's are never evaluated. With exclusions, the branch is
    // closed first (a 400 when what it evaluates is not fixed, which leaves the branch out).
    let merged: Schema;
    if (u.unevaluatedProperties === false) {
      const closed = { allOf: [u.rest, u.branch], unevaluatedProperties: false };
      if (others.length === 0) merged = closed;
      else {
        const fixed = this.closedStatically(closed, u.at, u.depth);
        if (fixed === null)
          this.fail(
            `Unsupported JSON Schema keyword 'oneOf' at ${u.at}: beside 'unevaluatedProperties', a branch whose evaluated names depend on which alternative holds cannot exclude the others`,
          );
        merged = { allOf: [fixed, ...others] };
      }
    } else
      merged = constrains(u.rest)
        ? { allOf: [u.rest, ...parts] }
        : parts.length === 1
          ? u.branch
          : { allOf: parts };
    return this.value(merged, u.at, u.hint, u.depth);
  }

  /**
   * `s` (which has `unevaluatedProperties`) with that keyword applied once and for all: its `allOf`/`$ref`
   * merged, then `unevaluatedProperties: false` written as `additionalProperties: false` (the names the
   * merge declares, and its pattern keys, stay allowed; an `additionalProperties` already there evaluates
   * every name, so the keyword is dropped). Conjoining the result with more keywords (negations) then lets
   * none of their names in. Null when what `s` evaluates depends on which alternative holds (an
   * `anyOf`/`oneOf`/`not`/`if` or a schema dependency is left after the merge).
   */
  private closedStatically(s: SchemaObject, path: string, depth: number): Schema | null {
    const merged = this.flatten(s, path, depth);
    if (typeof merged === "boolean") return merged;
    if (DYNAMIC_KEYWORDS.some((k) => k in merged)) return null;
    const { unevaluatedProperties, ...rest } = merged;
    if (unevaluatedProperties === undefined || "additionalProperties" in rest) return rest;
    return { ...rest, additionalProperties: unevaluatedProperties };
  }

  /**
   * For the `oneOf` `branches` beside the keywords `rest`: `[i][j]` is true when branches i and j provably
   * have no instance in common (see {@link provablyDisjoint}), so neither needs to exclude the other,
   * `"empty array"` when `[]` is the only one they may share, `"non-objects"` when both hold for every
   * non-object and no object satisfies both (the usual `oneOf` of objects told apart by a property, written
   * without `type: object`; only with `objectsApart`), else false. A 400 naming the `oneOf` at `path` when
   * the document's disjointness tests are used up.
   */
  private disjointPairs(
    rest: SchemaObject,
    branches: Schema[],
    path: string,
    objectsApart: boolean,
  ): Overlap[][] {
    this.disjoint ??= provablyDisjoint(this.resolver);
    const test = this.disjoint;
    // (One object per structure: the test remembers its answers per object pair.)
    const parts = branches.map((branch) =>
      this.canonicalSchema(constrains(rest) ? { allOf: [rest, branch] } : branch),
    );
    const open = branches.map((branch) => objectsApart && test.acceptsEveryNonObject(branch));
    const asObjects = parts.map((part, i) =>
      open[i] ? this.canonicalSchema({ allOf: [part, OBJECT_TYPE] }) : null,
    );
    const out: Overlap[][] = branches.map(() => branches.map(() => false));
    for (let i = 0; i < branches.length; i++) {
      for (let j = i + 1; j < branches.length; j++) {
        const a = parts[i]!;
        const b = parts[j]!;
        const d: Overlap = test.disjoint(a, b)
          ? true
          : test.onlyEmptyArrayInCommon(a, b)
            ? "empty array"
            : open[i] && open[j] && test.disjoint(asObjects[i]!, asObjects[j]!)
              ? "non-objects"
              : false;
        out[i]![j] = d;
        out[j]![i] = d;
      }
    }
    // Without the disjointness answers, such a document expands into far more negations: refuse early.
    if (test.exhausted())
      this.fail(
        `Unsupported JSON Schema keyword 'oneOf' at ${path}: the schema's oneOf branches are too many or too deep to tell apart`,
      );
    return out;
  }

  /**
   * The first schema object seen with the structural key of `s` (see {@link SubschemaKeys.ofSchema}), or
   * `s` itself when it is the first: caches kept per object then serve equal schemas built apart.
   */
  private canonicalSchema(s: Schema): Schema {
    if (typeof s === "boolean") return s;
    const key = this.keys.ofSchema(s);
    const known = this.canonicalSchemas.get(key);
    if (known !== undefined) return known;
    this.canonicalSchemas.set(key, s);
    return s;
  }

  /**
   * `const`/`enum`: alternatives of compact JSON literals, keeping only values that satisfy `type` (when
   * given), both `const` and `enum` when both are present, and the other sibling keywords.
   */
  private literals(s: SchemaObject, path: string, types: TypeName[] | null): string {
    let values = "const" in s ? [s.const] : (s.enum as unknown[]);
    if ("const" in s && "enum" in s) {
      const allowed = new Set((s.enum as unknown[]).map(canonical));
      values = values.filter((v) => allowed.has(canonical(v)));
    }
    const kept = values.filter(
      (v) => (types === null || types.some((t) => matchesType(v, t))) && literalFits(this, v, s, path),
    );
    if (kept.length === 0)
      this.unsatisfiable(`no ${"const" in s ? "const" : "enum"} value at ${path} matches its type.`);
    // Many strings share their prefixes (as a trie: one matcher stack per next character, not per value).
    const strings = kept.filter((v) => typeof v === "string");
    if (strings.length < MIN_TRIE_LITERALS)
      return [...new Set(kept.map((v) => this.constant(v)))].join(" | ");
    const others = kept.filter((v) => typeof v !== "string").map((v) => this.constant(v));
    return [literalTrie([...new Set(strings.map((v) => JSON.stringify(v)))]), ...new Set(others)].join(" | ");
  }

  /** A JSON value as a grammar: scalars as literals, objects/arrays token by token with `ws` between. */
  private constant(value: unknown): string {
    if (Array.isArray(value)) {
      if (value.length === 0) return `"[" ${WS} "]"`;
      return `"[" ${WS} ${value.map((v) => this.constant(v)).join(` "," ${WS} `)} ${WS} "]"`;
    }
    if (isObject(value)) {
      const entries = Object.entries(value);
      if (entries.length === 0) return `"{" ${WS} "}"`;
      const members = entries.map(
        ([k, v]) => `${gbnfLiteral(JSON.stringify(k))} ":" ${WS} ${this.constant(v)}`,
      );
      return `"{" ${WS} ${members.join(` "," ${WS} `)} ${WS} "}"`;
    }
    return gbnfLiteral(JSON.stringify(value));
  }
}

/**
 * Compiles a JSON Schema (draft 2020-12 / draft-07 subset, see `docs/structured-output.md`) into a GBNF
 * grammar whose root matches compact JSON satisfying it. Throws `ConstraintError` (param `options.param`,
 * default `"guided_json"`) naming any unsupported keyword with its JSON pointer, e.g.
 * "Unsupported JSON Schema keyword 'patternProperties' at #/properties/foo".
 */
export function jsonSchemaToGbnf(schema: unknown, options: JsonGrammarOptions = {}): string {
  const param = options.param ?? "guided_json";
  if (typeof schema !== "boolean" && !isObject(schema))
    throw new ConstraintError("The JSON schema must be an object.", param);
  // One budget for all the automata of one schema (each is bounded alone too): many heavy patterns in one
  // schema are a 400 in a fraction of a second instead of blocking the server.
  return withAutomatonBudget(MAX_COMPILE_AUTOMATON_WORK, () =>
    new SchemaCompiler(schema, param).compile(options.whitespacePattern),
  );
}

/**
 * The grammar for `response_format: {type: "json_object"}`: any JSON object, objects/arrays nested at most
 * `depth` levels (default {@link DEFAULT_JSON_DEPTH}), bounded whitespace. Throws 400 only for a bad
 * `whitespacePattern`.
 */
export function jsonObjectToGbnf(options: JsonGrammarOptions & { depth?: number } = {}): string {
  const b = new GbnfBuilder();
  b.reserveExact("root");
  defineWhitespace(b, options.whitespacePattern);
  b.define("root", jsonObjectRule(b, options.depth ?? DEFAULT_JSON_DEPTH));
  return finish(b, options.param ?? "response_format");
}

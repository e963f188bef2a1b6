/**
 * Objects and arrays of the JSON Schema compiler (see `compiler.ts` for the overall contract).
 * Objects: properties in declared order, any subset of optional ones, `additionalProperties` defaulting to
 * false when `properties` is present (llama.cpp, xgrammar strict mode). Arrays: `prefixItems`/`items`/
 * `minItems`/`maxItems` exactly (draft-07 `items: [...]` + `additionalItems` too).
 */

import {
  type CodePointTrie,
  codePointTrie,
  type GbnfBuilder,
  gbnfCharClass,
  gbnfLiteral,
  isAtomicExpression,
} from "../gbnf/gbnf.ts";
import { jsonCharRule, jsonStringRule, jsonValueRule, WS } from "../gbnf/jsonPrimitives.ts";
import { CodePointSet } from "../regex/codePointSet.ts";
import { AutomatonTooLarge, type Dfa, regexDfa } from "../regex/regexAutomaton.ts";
import { ANY_TEXT, parseRegex, RegexError, type RegexNode } from "../regex/regexParser.ts";
import {
  echoed,
  JSON_ESCAPED,
  jsonEncoded,
  patternDfa,
  regexBadRequest,
  regexExpression,
} from "../regex/regexToGbnf.ts";
import type { CompileContext } from "./context.ts";
import { ecmaRegex } from "./ecmaRegex.ts";
import { allOf, pointerSegment, type Schema, type SchemaObject } from "./keywords.ts";
import { type Presence, PresenceDiagram } from "./presence.ts";
import { keyAutomatonExpression, keyExpression } from "./scalars.ts";

/** Most (property index × member count) states of an object with `minProperties`/`maxProperties`. */
const MAX_COUNT_STATES = 5_000;

/** Whether the ECMA-262 regex `pattern` matches `name`; true when JavaScript cannot run it (so its schema applies, which only narrows). */
function patternMatches(pattern: string, name: string): boolean {
  return ecmaRegex(pattern)?.test(name) ?? true;
}

/** What {@link memberSchema} reads of an object schema at JSON pointer `path`. */
type ObjectParts = {
  path: string;
  declared: Record<string, Schema>;
  patterns: [string, Schema][];
  /** The schema of undeclared keys (`additionalProperties`, or the compiler's default). */
  additional: Schema;
  /** Whether `additionalProperties` (or `unevaluatedProperties: false`) is written. */
  explicit: boolean;
};

/**
 * The schema of member `name` of `object` (its declared schema and the patterns it matches, else the
 * patterns, else `additionalProperties`), and the JSON pointer errors name. (Module-level, as the other
 * helpers of {@link objectBody}: under tsx's keepNames every closure made per call costs a defineProperty.)
 */
function memberSchema(object: ObjectParts, name: string): { schema: Schema; where: string } {
  const { path, declared, patterns, additional, explicit } = object;
  const matching = patterns.filter(([pattern]) => patternMatches(pattern, name)).map(([, x]) => x);
  const where = `${path}/properties/${pointerSegment(name)}`;
  if (Object.hasOwn(declared, name)) {
    const own = declared[name] as Schema;
    return { schema: matching.length === 0 ? own : { allOf: [own, ...matching] }, where };
  }
  if (matching.length > 0) return { schema: allOf(matching), where: `${path}/patternProperties` };
  return {
    schema: additional === false && !explicit ? true : additional,
    where: `${path}/additionalProperties`,
  };
}

/** The rule hint of member `name` of the object named by `hint`. */
const childHint = (hint: string, name: string): string => (hint === "root" ? name : `${hint}-${name}`);

/** The rule of member `name` (`"name": value`), its value compiled at `where`. */
function memberKv(ctx: CompileContext, name: string, schema: Schema, where: string, hint: string): string {
  return ctx.b.rule(
    `${childHint(hint, name)}-kv`,
    `${gbnfLiteral(JSON.stringify(name))} ":" ${WS} ${ctx.value(schema, where, childHint(hint, name), 0)}`,
  );
}

/**
 * The GBNF body of an object schema `s` at JSON pointer `path`. Declared properties are written in declared
 * order; an optional property whose schema has no instance is left out. `patternProperties` apply to the
 * declared names they match (as `allOf`) and let undeclared keys matching a pattern be added after them,
 * with a value satisfying the schema of each pattern the key matches, and other keys satisfy
 * `additionalProperties`, exactly; a pattern that matches a declared name adds no keys (its keys could
 * repeat a declared one). (Where a pattern has no automaton, or there are more than
 * {@link MAX_PATTERN_AUTOMATA}, a pattern key's value satisfies every pattern's schema, and so does an
 * other key's: narrower than JSON Schema.)
 * `minProperties`/`maxProperties` count members; at most one added key counts towards `minProperties`
 * (two added keys could be equal). `presence` (declared names only; not with `minProperties`/
 * `maxProperties`) is what the members present must satisfy besides `required` (see
 * {@link presenceMembers}). Throws 400 via `ctx.fail`, or the unsatisfiable error via `ctx`.
 */
export function objectBody(
  ctx: CompileContext,
  s: SchemaObject,
  path: string,
  hint: string,
  keyNames: Dfa | null = null,
  presence?: Presence,
): string {
  const b = ctx.b;
  const declared = (s.properties as Record<string, Schema> | undefined) ?? {};
  const patternList = Object.entries((s.patternProperties as Record<string, Schema> | undefined) ?? {});
  const required = new Set((s.required as string[] | undefined) ?? []);
  const explicit = "additionalProperties" in s || s.unevaluatedProperties === false;
  const additional: Schema =
    s.unevaluatedProperties === false
      ? false
      : ((s.additionalProperties as Schema | undefined) ?? !("properties" in s || "patternProperties" in s));
  const object: ObjectParts = { path, declared, patterns: patternList, additional, explicit };
  const names = [...Object.keys(declared)];
  for (const name of required) if (!Object.hasOwn(declared, name)) names.push(name);
  type Member = { name: string; kv: string; required: boolean };
  const members: Member[] = [];
  // A required member whose schema merges to nothing leaves no instance: found before the members ahead of
  // it are compiled (and then undone).
  for (const name of names) {
    if (!required.has(name)) continue;
    const { schema, where } = namedMember(object, name, keyNames);
    if (schema !== false) ctx.refuteMerge(schema, where);
  }
  for (const name of names) {
    const { schema, where } = namedMember(object, name, keyNames);
    const isRequired = required.has(name);
    if (schema === false) {
      if (!isRequired) continue;
      if (!Object.hasOwn(declared, name) && explicit) {
        ctx.unsatisfiable(`required property '${echoed(name)}' at ${path} is not allowed by its schema.`);
      }
    }
    const kv = isRequired
      ? memberKv(ctx, name, schema, where, hint)
      : ctx.attempt(() => memberKv(ctx, name, schema, where, hint));
    if (kv !== null) members.push({ name, kv, required: isRequired });
  }
  const extras: string[] = [];
  // (When every pattern's schema is `additionalProperties`, any undeclared key takes that schema.)
  const patterns =
    additional !== false && patternList.every(([, x]) => ctx.sameSchema(x, additional)) ? [] : patternList;
  // The patterns' key automata, when other keys or the keys of two patterns need telling apart (null when
  // some pattern has none: then a key may match any pattern, a narrowing), unless each pattern is one name.
  const literals = patterns.length > 0 ? literalNames(patterns) : null;
  // (Patterns that each name one key, or anchored after different literal prefixes, `^title_` and
  // `^name_`, share no key.)
  const apart = literals !== null || (patterns.length > 1 && prefixesApart(patterns));
  const patternKeys =
    literals === null &&
    ((patterns.length > 1 && !apart) || (patterns.length > 0 && additional !== false && keyNames === null))
      ? patternAutomata(patterns)
      : null;
  if (additional !== false) {
    // Other keys are an automaton that leaves out the pattern keys exactly (with `propertyNames`, or the
    // patterns' automata, or as names); else a key might match a pattern, so its value must satisfy those
    // schemas too.
    let key: string | null | undefined;
    if (keyNames === null && literals !== null)
      key = otherKeyRule(b, [...names, ...literals], childHint(hint, "other-key"));
    else if (keyNames === null && patterns.length > 0 && patternKeys !== null) {
      const mark = b.checkpoint();
      try {
        key = keyAutomatonExpression(
          ctx,
          regexDfa(ANY_TEXT),
          names,
          patternKeys,
          childHint(hint, "other-key"),
        );
      } catch (error) {
        if (!(error instanceof AutomatonTooLarge)) throw error;
        b.rollback(mark);
      }
    }
    // (null: the patterns leave no other key, as `.*` does.)
    const exact = keyNames !== null || patterns.length === 0 || key !== undefined;
    const value =
      key === null
        ? null
        : additional === true && exact
          ? jsonValueRule(b)
          : ctx.attempt(() =>
              ctx.value(
                exact ? additional : { allOf: [additional, ...patterns.map(([, x]) => x)] },
                `${path}/additionalProperties`,
                childHint(hint, "additional"),
                0,
              ),
            );
    if (value !== null) {
      if (key === undefined)
        key =
          keyNames !== null
            ? keyExpression(
                ctx,
                keyNames,
                names,
                patterns.map(([pattern]) => pattern),
                `${path}/propertyNames`,
                childHint(hint, "other-key"),
              )
            : names.length === 0
              ? jsonStringRule(b)
              : otherKeyRule(b, names, childHint(hint, "other-key"));
      if (key !== null) extras.push(`${key} ":" ${WS} ${value}`);
    }
  }
  // Pattern keys. With the patterns' automata: the keys that match exactly each set of patterns (declared
  // names left out), valued by all of that set's schemas. Without: the keys of each pattern that matches no
  // declared name, valued by every pattern's schema (a narrowing when a key matches only some).
  const regions = apart
    ? {
        alone: patterns.map(([pattern]) => !names.some((name) => patternMatches(pattern, name))),
        shared: [],
        closure: patterns.map(() => null),
      }
    : patternKeys === null
      ? null
      : patternRegions(ctx, patternKeys, names, keyNames, hint);
  const keyed: { key: string; members: number[] | null }[] = [];
  for (let i = 0; i < patterns.length; i++) {
    const members = regions === null ? null : regions.alone[i] ? [i] : regions.closure[i];
    if (regions === null ? names.some((name) => patternMatches(patterns[i]![0], name)) : !members) continue;
    const key = patternKey(ctx, patterns[i]![0], keyNames, path, hint);
    if (key !== null) keyed.push({ key, members: members ?? null });
  }
  for (const region of regions?.shared ?? []) keyed.push(region);
  const byValue = new Map<string, string[]>();
  const values = new Map<string, string | null>();
  for (const { key, members } of keyed) {
    const set = members === null ? "all" : members.join(",");
    let value = values.get(set);
    if (value === undefined) {
      const schemas = members === null ? patterns.map(([, x]) => x) : members.map((j) => patterns[j]![1]);
      value = ctx.attempt(() =>
        ctx.value(allOf(schemas), `${path}/patternProperties`, childHint(hint, "pattern"), 0),
      );
      values.set(set, value);
    }
    if (value === null) continue;
    const keys = byValue.get(value);
    if (keys === undefined) byValue.set(value, [key]);
    else keys.push(key);
  }
  for (const [value, keys] of byValue)
    extras.push(`${keys.length === 1 ? keys[0] : `(${keys.join(" | ")})`} ":" ${WS} ${value}`);
  const extraKv = extras.length === 0 ? null : b.rule(childHint(hint, "additional-kv"), extras.join(" | "));
  const min = (s.minProperties as number | undefined) ?? 0;
  const max = (s.maxProperties as number | undefined) ?? null;
  if (min > 0 || max !== null) return countedMembers(ctx, members, extraKv, min, max, path, hint);
  if (presence !== undefined) return presenceMembers(ctx, members, extraKv, presence, path, hint);
  return orderedMembers(b, members, extraKv, hint);
}

/** Most `patternProperties` whose automata {@link patternAutomata} builds (pairs of them are intersected). */
const MAX_PATTERN_AUTOMATA = 16;

/**
 * The automata of the keys that match each of `patterns` (ECMA-262 `test`), in order; null when there are
 * more than {@link MAX_PATTERN_AUTOMATA}, or one has no automaton (unsupported syntax, or too large).
 */
function patternAutomata(patterns: [string, Schema][]): Dfa[] | null {
  if (patterns.length > MAX_PATTERN_AUTOMATA) return null;
  try {
    return patterns.map(([pattern]) => patternDfa(pattern, true));
  } catch (error) {
    if (error instanceof RegexError || error instanceof AutomatonTooLarge) return null;
    throw error;
  }
}

/** The syntax tree of `pattern`, or null when the regex parser refuses it. */
function parsedPattern(pattern: string): RegexNode | null {
  try {
    return parseRegex(pattern);
  } catch (error) {
    if (error instanceof RegexError) return null;
    throw error;
  }
}

/**
 * The one key each of `patterns` matches, when each is a literal name between `^` and `$` (as protobuf and
 * OpenAPI generators write aliases, `^batch_jobs$`) and no two name the same key; null otherwise.
 */
function literalNames(patterns: [string, Schema][]): string[] | null {
  const out: string[] = [];
  for (const [pattern] of patterns) {
    const tree = parsedPattern(pattern);
    if (tree === null) return null;
    const items = tree.type === "seq" ? tree.items : [];
    if (items.length < 2 || items[0]!.type !== "start" || items[items.length - 1]!.type !== "end")
      return null;
    let name = "";
    for (const item of items.slice(1, -1)) {
      if (item.type !== "set" || item.set.size !== 1) return null;
      name += String.fromCodePoint(item.set.ranges[0]![0]);
    }
    if (out.includes(name)) return null;
    out.push(name);
  }
  return out;
}

/**
 * The literal text every key matching `pattern` (ECMA-262 `test`) starts with: what follows its leading `^`
 * up to the first item that is not one character (`^(title_(...))$` gives `title_`); null when it does not
 * begin with `^` or has no automaton syntax.
 */
function anchoredPrefix(pattern: string): string | null {
  const tree = parsedPattern(pattern);
  if (tree === null) return null;
  const items = tree.type === "seq" ? tree.items : [tree];
  if (items[0]?.type !== "start") return null;
  let prefix = "";
  const pending = items.slice(1).reverse();
  while (pending.length > 0) {
    const item = pending.pop()!;
    if (item.type === "seq") pending.push(...item.items.slice().reverse());
    else if (item.type === "set" && item.set.size === 1)
      prefix += String.fromCodePoint(item.set.ranges[0]![0]);
    else break;
  }
  return prefix;
}

/** Whether every two of `patterns` are anchored after literal prefixes neither of which begins the other. */
function prefixesApart(patterns: [string, Schema][]): boolean {
  const prefixes = patterns.map(([pattern]) => anchoredPrefix(pattern));
  for (let i = 0; i < prefixes.length; i++)
    for (let j = i + 1; j < prefixes.length; j++) {
      const a = prefixes[i]!;
      const b = prefixes[j]!;
      if (a === null || b === null || a.startsWith(b) || b.startsWith(a)) return false;
    }
  return true;
}

/** Most key regions {@link patternRegions} writes for one set of patterns that share keys. */
const MAX_PATTERN_REGIONS = 16;

/** Most states of an automaton of a key region (or of the sets of keys it is cut from). */
const MAX_REGION_STATES = 64;

/** How {@link patternRegions} splits the keys of an object's `patternProperties`. */
type PatternRegions = {
  /** Pattern `i` shares no key with another and matches no declared name: its keys are written as is. */
  alone: boolean[];
  /** Keys (quoted GBNF) that match exactly the patterns `members`. */
  shared: { key: string; members: number[] }[];
  /**
   * Pattern `i`'s keys are written as is but valued by all the patterns it may share keys with, directly or
   * not (where the regions would be too many or too large: a narrowing); null for the others.
   */
  closure: (number[] | null)[];
};

/**
 * How the keys of `automata` (the object's `patternProperties`, in order) split, see {@link PatternRegions}:
 * patterns that share keys are cut into regions, each the keys (declared `names` left out, within `keyNames`
 * when given) that match exactly some of them. A pattern that matches a declared name adds no keys, alone or
 * in a region (they could repeat the name: narrower, never wider). Null when even telling which patterns
 * share keys is too much work (nothing is added to the grammar then).
 */
function patternRegions(
  ctx: CompileContext,
  automata: Dfa[],
  names: string[],
  keyNames: Dfa | null,
  hint: string,
): PatternRegions | null {
  const n = automata.length;
  // Each pattern's component of the "share a key" relation (by its least member).
  const label = Array.from({ length: n }, (_, i) => i);
  const silent = automata.map((dfa) => names.some((name) => dfa.matches(name)));
  const linked = automata.map(() => false);
  try {
    for (let i = 0; i < n; i++)
      for (let j = i + 1; j < n; j++) {
        if (automata[i]!.intersect(automata[j]!).isEmpty) continue;
        linked[i] = true;
        linked[j] = true;
        const [keep, gone] = [Math.min(label[i]!, label[j]!), Math.max(label[i]!, label[j]!)];
        for (let k = 0; k < n; k++) if (label[k] === gone) label[k] = keep;
      }
  } catch (error) {
    if (error instanceof AutomatonTooLarge) return null;
    throw error;
  }
  const out: PatternRegions = {
    alone: linked.map((x, i) => !x && !silent[i]),
    shared: [],
    closure: automata.map(() => null),
  };
  for (let c = 0; c < n; c++) {
    const component = label.flatMap((l, i) => (linked[i] && l === c ? [i] : []));
    if (component.length === 0) continue;
    const mark = ctx.b.checkpoint();
    const regions = componentRegions(ctx, automata, component, silent, names, keyNames, hint);
    if (regions !== null) out.shared.push(...regions);
    else {
      ctx.b.rollback(mark);
      for (const i of component) if (!silent[i]) out.closure[i] = component;
    }
  }
  return out;
}

/**
 * The key regions of the patterns `component` (indices into `automata`) for {@link patternRegions}, found
 * depth-first (each pattern matched or not, empty sets pruned); null when they are more than
 * {@link MAX_PATTERN_REGIONS} or an automaton is larger than {@link MAX_REGION_STATES}.
 */
function componentRegions(
  ctx: CompileContext,
  automata: Dfa[],
  component: number[],
  silent: boolean[],
  names: string[],
  keyNames: Dfa | null,
  hint: string,
): { key: string; members: number[] }[] | null {
  const all = CodePointSet.all();
  const regions: { key: string; members: number[] }[] = [];
  const pending: { at: number; keys: Dfa | null; members: number[] }[] = [
    { at: 0, keys: keyNames, members: [] },
  ];
  try {
    while (pending.length > 0) {
      const { at, keys, members } = pending.pop()!;
      if (keys !== null && keys.size > MAX_REGION_STATES) return null;
      if (at === component.length) {
        if (members.length === 0 || members.some((i) => silent[i])) continue;
        if (regions.length === MAX_PATTERN_REGIONS) return null;
        const key = keyAutomatonExpression(ctx, keys!, names, [], `${hint}-key`);
        if (key !== null) regions.push({ key, members });
        continue;
      }
      const pattern = automata[component[at]!]!;
      const outside = pattern.complement(all);
      const without = keys === null ? outside : keys.intersect(outside);
      if (!without.isEmpty) pending.push({ at: at + 1, keys: without, members });
      const within = keys === null ? pattern : keys.intersect(pattern);
      if (!within.isEmpty) pending.push({ at: at + 1, keys: within, members: [...members, component[at]!] });
    }
  } catch (error) {
    if (error instanceof AutomatonTooLarge) return null;
    throw error;
  }
  return regions;
}

/** The keys of `pattern` as a quoted GBNF expression (within `keyNames` when given); null when none. */
function patternKey(
  ctx: CompileContext,
  pattern: string,
  keyNames: Dfa | null,
  path: string,
  hint: string,
): string | null {
  try {
    if (keyNames !== null) {
      const both = keyNames.intersect(patternDfa(pattern, true));
      return keyExpression(ctx, both, [], [], `${path}/propertyNames`, `${hint}-key`);
    }
    const expr = regexExpression(ctx.b, pattern, { mode: "json", search: true, hint: `${hint}-key` });
    return `"\\"" ${expr.includes(" | ") ? `(${expr})` : expr} "\\""`;
  } catch (error) {
    if (error instanceof RegexError)
      throw regexBadRequest(error, pattern, ctx.param, ` at ${path}/patternProperties`);
    throw error;
  }
}

/** {@link memberSchema}, or `false` for a name that `propertyNames` (its automaton `keyNames`) rules out. */
function namedMember(
  object: ObjectParts,
  name: string,
  keyNames: Dfa | null,
): { schema: Schema; where: string } {
  const member = memberSchema(object, name);
  return keyNames !== null && !keyNames.matches(name) ? { schema: false, where: member.where } : member;
}

/** `parts` joined by spaces, empty ones left out. */
const joinParts = (parts: string[]): string => parts.filter((x) => x !== "").join(" ");

/** `parts` joined by spaces, empty ones and empty literals left out. */
const joinItems = (parts: string[]): string => parts.filter((x) => x !== "" && x !== '""').join(" ");

/** `{...}` with `members` in order (required ones always, optional ones or not), then any number of `extraKv`. */
function orderedMembers(
  b: GbnfBuilder,
  members: { kv: string; required: boolean }[],
  extraKv: string | null,
  hint: string,
): string {
  if (members.length === 0) {
    if (extraKv === null) return `"{" ${WS} "}"`;
    return `"{" ${WS} (${extraKv} ("," ${WS} ${extraKv})* ${WS})? "}"`;
  }
  const kvs = members.map((m) => m.kv);
  const n = kvs.length;
  const firstRequired = members.findIndex((m) => m.required);
  const r = firstRequired < 0 ? n : firstRequired;
  const parts = kvs.map((kv, i) => (members[i]!.required ? `"," ${WS} ${kv}` : `("," ${WS} ${kv})?`));
  const extraPart = extraKv === null ? "" : `("," ${WS} ${extraKv})*`;
  const lastStart = Math.min(r, n - 1);
  const alternatives: string[] = [];
  const tails: string[] = [];
  tails[lastStart + 1] = joinParts([...parts.slice(lastStart + 1), extraPart]);
  if (lastStart > 0 && tails[lastStart + 1] !== "" && !isAtomicExpression(tails[lastStart + 1]!)) {
    tails[lastStart + 1] = b.rule(`${hint}-rest`, tails[lastStart + 1]!);
  }
  for (let i = lastStart; i >= 1; i--)
    tails[i] = b.rule(`${hint}-rest`, joinParts([parts[i]!, tails[i + 1]!]));
  for (let j = 0; j <= lastStart; j++) alternatives.push(joinParts([kvs[j]!, tails[j + 1]!]));
  if (r === n && extraKv !== null) alternatives.push(joinParts([extraKv, extraPart]));
  const body = alternatives.length === 1 ? alternatives[0]! : `(${alternatives.join(" | ")})`;
  return r === n ? `"{" ${WS} (${body} ${WS})? "}"` : `"{" ${WS} ${body} ${WS} "}"`;
}

/**
 * `{...}` like {@link orderedMembers} whose present members satisfy `presence` (a member it names that is
 * not among `members`, because its schema has no instance, is absent) and `required`: one rule per state
 * of the formula's decision diagram over the members in order (see `presence.ts`) and position, instead of
 * one object per combination of dependency triggers. Throws the unsatisfiable error when no member set
 * satisfies it.
 */
function presenceMembers(
  ctx: CompileContext,
  members: { name: string; kv: string; required: boolean }[],
  extraKv: string | null,
  presence: Presence,
  path: string,
  hint: string,
): string {
  const b = ctx.b;
  const n = members.length;
  const diagram = new PresenceDiagram(n);
  const index = new Map(members.map((m, i) => [m.name, i]));
  let root = diagram.of(presence, (name) => index.get(name));
  for (const [i, m] of members.entries()) if (m.required) root = diagram.and(root, diagram.variable(i));
  if (root === PresenceDiagram.FALSE)
    ctx.unsatisfiable(`no member set of the object at ${path} satisfies its dependencies.`);
  const extrasAfter = extraKv === null ? '""' : `("," ${WS} ${extraKv})*`;
  // after(k, u): the members from k on (each after a comma) and the added keys, in state u; null: none fits.
  const memo = new Map<string, string | null>();
  const after = (k: number, u: number): string | null => {
    if (u === PresenceDiagram.FALSE) return null;
    if (k === n) return extrasAfter;
    const key = `${k},${u}`;
    if (memo.has(key)) return memo.get(key)!;
    const item = `"," ${WS} ${members[k]!.kv}`;
    let body: string;
    if (diagram.level(u) > k) {
      const rest = after(k + 1, u)!;
      body = rest === '""' ? `(${item})?` : `(${item})? ${rest}`;
    } else {
      const alts: string[] = [];
      const present = after(k + 1, diagram.high(u));
      if (present !== null) alts.push(present === '""' ? item : `${item} ${present}`);
      const absent = after(k + 1, diagram.low(u));
      if (absent !== null) alts.push(absent);
      body = alts.join(" | ");
    }
    const symbol = isAtomicExpression(body) ? body : b.rule(`${hint}-rest`, body);
    memo.set(key, symbol);
    return symbol;
  };
  // The first member written (no comma before it): each member that can be first, along the path where
  // every member before it is absent.
  const first: string[] = [];
  let u = root;
  for (let k = 0; k < n && u !== PresenceDiagram.FALSE; k++) {
    const atK = diagram.level(u) === k;
    const rest = after(k + 1, atK ? diagram.high(u) : u);
    if (rest !== null) first.push(rest === '""' ? members[k]!.kv : `${members[k]!.kv} ${rest}`);
    if (atK) u = diagram.low(u);
  }
  const empty = u === PresenceDiagram.TRUE;
  if (empty && extraKv !== null) first.push(`${extraKv} ${extrasAfter}`);
  if (first.length === 0) return `"{" ${WS} "}"`;
  const body = first.length === 1 ? first[0]! : `(${first.join(" | ")})`;
  return empty ? `"{" ${WS} (${body} ${WS})? "}"` : `"{" ${WS} ${body} ${WS} "}"`;
}

/**
 * `{...}` like {@link orderedMembers} with between `min` and `max` members: one rule per (member index,
 * members written so far), counts above `max(min, 1)` merged when there is no `max`. Added keys come last;
 * only the first counts towards `min`, all count towards `max`.
 */
function countedMembers(
  ctx: CompileContext,
  members: { kv: string; required: boolean }[],
  extraKv: string | null,
  min: number,
  max: number | null,
  path: string,
  hint: string,
): string {
  const b = ctx.b;
  const n = members.length;
  const cap = max ?? Math.max(min, 1);
  if ((n + 1) * (cap + 1) > MAX_COUNT_STATES) {
    ctx.fail(
      `Unsupported minProperties/maxProperties at ${path}: too many properties to count (${n} properties, up to ${cap}).`,
    );
  }
  const requiredAfter: number[] = [];
  const optionalAfter: number[] = [];
  requiredAfter[n] = 0;
  optionalAfter[n] = 0;
  for (let i = n - 1; i >= 0; i--) {
    requiredAfter[i] = requiredAfter[i + 1]! + (members[i]!.required ? 1 : 0);
    optionalAfter[i] = optionalAfter[i + 1]! + (members[i]!.required ? 0 : 1);
  }
  const sep = (c: number): string => (c === 0 ? "" : `"," ${WS} `);
  const memo = new Map<string, string | null>();
  const state = (i: number, c: number): string | null => {
    const key = `${i},${c}`;
    if (memo.has(key)) return memo.get(key)!;
    let result: string | null = null;
    const reachable =
      c + requiredAfter[i]! <= (max ?? Number.POSITIVE_INFINITY) &&
      c + requiredAfter[i]! + optionalAfter[i]! + (extraKv === null ? 0 : 1) >= min;
    if (reachable && i === n) {
      const room = max === null ? null : max - c;
      if (c >= min) {
        result = extraKv === null || room === 0 ? '""' : extrasFrom(c, 0, room);
      } else if (c === min - 1 && extraKv !== null && room !== 0) result = extrasFrom(c, 1, room);
    } else if (reachable) {
      const { kv, required } = members[i]!;
      const next = Math.min(c + 1, cap);
      const alts: string[] = [];
      if (max === null || c < max) {
        const rest = state(i + 1, max === null ? next : c + 1);
        if (rest !== null) alts.push(`${sep(c)}${kv}${rest === '""' ? "" : ` ${rest}`}`);
      }
      if (!required) {
        const rest = state(i + 1, c);
        if (rest !== null) alts.push(rest);
      }
      if (alts.length > 0)
        result =
          alts.length === 1 && isAtomicExpression(alts[0]!)
            ? alts[0]!
            : b.rule(`${hint}-n`, alts.join(" | "));
    }
    memo.set(key, result);
    return result;
  };
  const extrasFrom = (c: number, least: number, room: number | null): string => {
    const first = `${sep(c)}${extraKv}`;
    const more = b.repeat(`"," ${WS} ${extraKv}`, 0, room === null ? null : room - 1, `${hint}-more`);
    const seq = more === '""' ? first : `${first} ${more}`;
    return least > 0 ? `(${seq})` : `(${seq})?`;
  };
  const body = state(0, 0);
  if (body === null)
    ctx.unsatisfiable(
      `no member set of the object at ${path} meets minProperties ${min}${max === null ? "" : ` and maxProperties ${max}`}${
        extraKv !== null && n + 1 < min
          ? ` with at most one key beyond its declared properties (the grammar cannot keep two added keys distinct, so it counts one; lmserve's limitation)`
          : ""
      }.`,
    );
  return body === '""' ? `"{" ${WS} "}"` : `"{" ${WS} ${body} ${WS} "}"`;
}

/** Most trie nodes {@link otherKeyRule} nests as groups inside one rule. */
const MAX_INLINE_TRIE = 64;

/**
 * Rule for a JSON string key that is none of `names` (trie construction as llama.cpp's `_not_strings`,
 * JSON-escape aware), made once per list of names.
 */
function otherKeyRule(b: GbnfBuilder, names: string[], hint: string): string {
  return b.once(`other-key\u0000${names.join("\u0000")}`, () => otherKeyTrie(b, names, hint));
}

function otherKeyTrie(b: GbnfBuilder, names: string[], hint: string): string {
  const root = codePointTrie(names);
  const ch = jsonCharRule(b);
  const sizes = new Map<CodePointTrie, number>();
  const size = (node: CodePointTrie): number => {
    let n = sizes.get(node);
    if (n === undefined) {
      n = 1;
      for (const next of node.children.values()) n += size(next);
      sizes.set(node, n);
    }
    return n;
  };
  const visit = (node: CodePointTrie): string => {
    const alts: string[] = [];
    for (const [cp, next] of node.children) {
      const literal = gbnfLiteral(jsonEncoded(cp));
      if (next.children.size === 0) alts.push(`${literal} ${ch}+`);
      else {
        // A large sub-trie becomes a rule: llama.cpp refuses `(...)?` around 2,000 nested groups.
        const inner = visit(next);
        const item = size(next) > MAX_INLINE_TRIE ? b.rule(`${hint}-rest`, inner) : `(${inner})`;
        alts.push(`${literal} ${item}${next.end ? "" : "?"}`);
      }
    }
    const leave = otherEscape(b, node);
    alts.push(`${leave === null ? otherChar(node) : `(${otherChar(node)} | ${leave})`} ${ch}*`);
    return alts.join(" | ");
  };
  return b.rule(hint, `"\\"" (${visit(root)})${root.end ? "" : "?"} "\\""`);
}

/** The one-letter JSON escapes (as GBNF class members) and the code points they stand for. */
const SIMPLE_ESCAPES: readonly (readonly [string, number])[] = [
  ['"', 0x22],
  ["\\\\", 0x5c],
  ["/", 0x2f],
  ["b", 0x08],
  ["f", 0x0c],
  ["n", 0x0a],
  ["r", 0x0d],
  ["t", 0x09],
];

/**
 * The escapes a key may take at a trie node to leave the trie, as a rule (one per set of letters): the
 * one-letter escapes of code points other than the node's next ones, or null when none. `\uXXXX` is left out there (it could spell a next code
 * point, and so a listed name, another way; a narrowing: such a key must leave the trie another way first).
 */
function otherEscape(b: GbnfBuilder, node: CodePointTrie): string | null {
  const letters = SIMPLE_ESCAPES.filter(([, cp]) => !node.children.has(cp)).map(([letter]) => letter);
  if (letters.length === 0) return null;
  return b.rule("key-escape", `"\\\\" [${letters.join("")}]`);
}

/** Most classes {@link otherChar} keeps (it forgets them all when full). */
const MAX_OTHER_CHAR_CLASSES = 4096;
const otherCharClasses = new Map<string, string>();

/**
 * The class of unescaped JSON string characters other than the next ones of a trie node (many nodes, in
 * many tries, have the same ones: one letter), made once per set of next characters.
 */
function otherChar(node: CodePointTrie): string {
  const next = [...node.children.keys()];
  const key = next.join(",");
  let cls = otherCharClasses.get(key);
  if (cls === undefined) {
    const excluded = CodePointSet.of(next.map((cp) => [cp, cp] as const)).union(JSON_ESCAPED);
    cls = gbnfCharClass(excluded.complement());
    if (otherCharClasses.size >= MAX_OTHER_CHAR_CLASSES) otherCharClasses.clear();
    otherCharClasses.set(key, cls);
  }
  return cls;
}

/** The GBNF body of an array schema `s` at JSON pointer `path`. Throws 400 via `ctx.fail` when unsatisfiable. */
export function arrayBody(ctx: CompileContext, s: SchemaObject, path: string, hint: string): string {
  const b = ctx.b;
  let prefix: Schema[] = Array.isArray(s.prefixItems)
    ? (s.prefixItems as Schema[])
    : Array.isArray(s.items)
      ? (s.items as Schema[])
      : [];
  let rest: Schema = Array.isArray(s.items)
    ? ((s.additionalItems as Schema | undefined) ?? prefix.length === 0)
    : "items" in s
      ? (s.items as Schema)
      : prefix.length === 0;
  const restPath = Array.isArray(s.items) ? `${path}/additionalItems` : `${path}/items`;
  const min = (s.minItems as number | undefined) ?? 0;
  let max = (s.maxItems as number | undefined) ?? null;
  // An item schema with no instance only limits the length: the array ends before that position.
  const items: string[] = [];
  for (const [i, schema] of prefix.entries()) {
    if (max !== null && i >= max) break;
    const item = ctx.attempt(() => ctx.value(schema, `${path}/prefixItems/${i}`, `${hint}-${i}`, 0));
    if (item === null) {
      prefix = prefix.slice(0, i);
      rest = false;
      break;
    }
    items.push(item);
  }
  const restItem =
    rest === false || (max !== null && max <= prefix.length)
      ? null
      : ctx.attempt(() => ctx.value(rest, restPath, `${hint}-item`, 0));
  if (restItem === null) rest = false;
  if (rest === false) max = max === null ? prefix.length : Math.min(max, prefix.length);
  if (max !== null && min > max)
    ctx.unsatisfiable(`the array at ${path} cannot satisfy minItems ${min} with at most ${max} items.`);
  if (max !== null && max < prefix.length) {
    prefix = prefix.slice(0, max);
    rest = false;
  }
  if (max === 0) return `"[" ${WS} "]"`;
  const repeatRest = (item: string, from: number, to: number | null): string => {
    if (to !== null && to <= 0) return "";
    try {
      return b.repeat(`"," ${WS} ${item}`, Math.max(0, from), to, `${hint}-next`);
    } catch (error) {
      if (error instanceof RangeError)
        ctx.fail(`minItems/maxItems at ${path} are too large: ${error.message}.`);
      throw error;
    }
  };
  let list: string;
  if (prefix.length === 0) {
    list = joinItems([restItem!, repeatRest(restItem!, min - 1, max === null ? null : max - 1)]);
  } else {
    const k = items.length;
    let after = restItem === null ? "" : repeatRest(restItem, min - k, max === null ? null : max - k);
    for (let i = k - 1; i >= 1; i--) {
      const step = joinItems([`"," ${WS} ${items[i]!}`, after]);
      after = i >= min ? `(${step})?` : step;
    }
    list = joinItems([items[0]!, after]);
  }
  return min === 0 ? `"[" ${WS} (${list} ${WS})? "]"` : `"[" ${WS} ${list} ${WS} "]"`;
}

/** Most distinct values an enumerable `uniqueItems` item schema may have (rules grow with values × length). */
export const MAX_UNIQUE_VALUES = 64;

/**
 * The GBNF body of an array schema `s` with `uniqueItems: true`. When the item schema's instances are a
 * finite set (`candidates`: the values its `enum`/`const`, boolean or null type list; each is kept only if
 * it satisfies the item schema, checked by compiling the item schema with that `const`), the array holds
 * distinct values exactly, written in the order of `candidates` (a narrowing: the same sets, one order). Any
 * other item schema is narrowed to arrays of at most one item, which are always unique; with
 * `minItems` above 1, tuple items or more than {@link MAX_UNIQUE_VALUES} values it is a 400.
 */
export function uniqueArrayBody(
  ctx: CompileContext,
  s: SchemaObject,
  candidates: unknown[] | null,
  path: string,
  hint: string,
): string {
  const min = (s.minItems as number | undefined) ?? 0;
  const tuple = "prefixItems" in s || Array.isArray(s.items);
  if (candidates === null || tuple) {
    if (min > 1)
      ctx.fail(
        `Unsupported JSON Schema keyword 'uniqueItems' at ${path}: distinct items are enforced only for enumerable item schemas (enum, const, boolean), or by allowing at most one item when minItems is at most 1.`,
      );
    const { uniqueItems: _, ...rest } = s;
    const max = (s.maxItems as number | undefined) ?? 1;
    return arrayBody(ctx, { ...rest, maxItems: Math.min(max, 1) }, path, hint);
  }
  if (candidates.length > MAX_UNIQUE_VALUES)
    ctx.fail(
      `Unsupported JSON Schema keyword 'uniqueItems' at ${path}: more than ${MAX_UNIQUE_VALUES} distinct item values.`,
    );
  const item = "items" in s ? (s.items as Schema) : true;
  const values: string[] = [];
  for (const [i, value] of candidates.entries()) {
    // (A scalar the item schema plainly admits is its JSON literal, as the compiler would write it.)
    const plain =
      value === null || typeof value !== "object"
        ? ctx.admits(item, value as string | number | boolean | null)
        : undefined;
    if (plain === false) continue;
    const symbol =
      plain === true
        ? gbnfLiteral(JSON.stringify(value))
        : ctx.attempt(() =>
            ctx.value({ allOf: [item, { const: value }] }, `${path}/items`, `${hint}-item-${i}`, 0),
          );
    if (symbol !== null) values.push(symbol);
  }
  const k = values.length;
  const max = Math.min((s.maxItems as number | undefined) ?? k, k);
  if (min > max)
    ctx.unsatisfiable(`the array at ${path} cannot hold ${min} distinct items (at most ${max} exist).`);
  if (max === 0) return `"[" ${WS} "]"`;
  // pick(i, lo, hi): between lo (>= 1) and hi of values[i..], in order, comma-separated.
  const rules = new Map<string, string>();
  const pick = (i: number, lo: number, hi: number): string => {
    const top = Math.min(hi, k - i);
    const key = `${i},${lo},${top}`;
    const known = rules.get(key);
    if (known !== undefined) return known;
    const take =
      lo > 1
        ? `${values[i]} "," ${WS} ${pick(i + 1, lo - 1, top - 1)}`
        : top > 1 && i + 1 < k
          ? `${values[i]} ("," ${WS} ${pick(i + 1, 1, top - 1)})?`
          : values[i]!;
    const alternatives = k - i - 1 >= lo ? [take, pick(i + 1, lo, top)] : [take];
    const name = ctx.b.rule(`${hint}-unique`, alternatives.join(" | "));
    rules.set(key, name);
    return name;
  };
  const list = pick(0, Math.max(min, 1), max);
  return min === 0 ? `"[" ${WS} (${list} ${WS})? "]"` : `"[" ${WS} ${list} ${WS} "]"`;
}

/**
 * Object dependencies that only say which members are present (`dependentRequired`, draft-04 array
 * `dependencies`, and dependency schemas made of `required`, `properties: {name: false}`, `anyOf`, `allOf`,
 * `oneOf` and `not` of those) as one boolean formula over member presence, and a reduced ordered binary
 * decision diagram (BDD) of such a formula over members in declared order. A BDD node at level `i` is a
 * state "members before `i` are decided, this is what the rest must satisfy"; the object compiler
 * (`containers.ts`) writes one grammar rule per state instead of one object per combination of triggers.
 */
import { isConstraint, type Schema, type SchemaObject } from "./keywords.ts";

/** A boolean formula over the presence of object members, named by their keys. */
export type Presence =
  | boolean
  | { present: string }
  | { not: Presence }
  | { all: Presence[] }
  | { any: Presence[] }
  | { one: Presence[] };

/** Most branches of a `oneOf` read as "exactly one" (the compiler's `oneOf` exclusions stop at 16). */
const MAX_ONE_OF = 15;

const isObject = (v: unknown): v is SchemaObject => typeof v === "object" && v !== null && !Array.isArray(v);

const names = (list: unknown): Presence | null =>
  Array.isArray(list) && list.every((n) => typeof n === "string")
    ? { all: list.map((present) => ({ present })) }
    : null;

/**
 * The presence formula of a dependency schema (or `null` when it says more than which members are present).
 * With `negated`, only keywords whose negation the compiler writes exactly are read (`required`, boolean
 * `properties`, `anyOf`, `allOf`, `type`), so that an unsupported `not` stays unsupported.
 */
function schemaPresence(schema: Schema, negated: boolean): Presence | null {
  if (typeof schema === "boolean") return schema;
  const parts: Presence[] = [];
  for (const [key, value] of Object.entries(schema)) {
    if (!isConstraint(key)) continue;
    switch (key) {
      case "required": {
        const all = names(value);
        if (all === null) return null;
        parts.push(all);
        break;
      }
      case "type": {
        // The instance is an object: a type list that admits objects says nothing more.
        const types = Array.isArray(value) ? value : [value];
        if (!types.includes("object")) return null;
        break;
      }
      case "properties": {
        if (!isObject(value)) return null;
        for (const [name, member] of Object.entries(value)) {
          if (member === false) parts.push({ not: { present: name } });
          else if (member !== true && !(isObject(member) && !Object.keys(member).some(isConstraint)))
            return null;
          // Says nothing, but names the member: merging it would declare an undeclared one.
          else parts.push({ any: [{ present: name }, { not: { present: name } }] });
        }
        break;
      }
      case "anyOf":
      case "allOf":
      case "oneOf": {
        if (!Array.isArray(value) || (key === "oneOf" && (negated || value.length > MAX_ONE_OF))) return null;
        const items: Presence[] = [];
        for (const branch of value as Schema[]) {
          const item = schemaPresence(branch, negated);
          // (The compiler excludes the other branches of a `oneOf` by their negations, exact only for these.)
          if (item === null || (key === "oneOf" && schemaPresence(branch, true) === null)) return null;
          items.push(item);
        }
        parts.push(key === "anyOf" ? { any: items } : key === "allOf" ? { all: items } : { one: items });
        break;
      }
      case "not": {
        if (negated) return null;
        const inner = schemaPresence(value as Schema, true);
        if (inner === null) return null;
        parts.push({ not: inner });
        break;
      }
      default:
        return null;
    }
  }
  return parts.length === 1 ? parts[0]! : { all: parts };
}

/**
 * The conjunction of the dependencies of object schema `s` (`dependentRequired`, `dependentSchemas`,
 * `dependencies`), each read as "trigger absent, or its dependency holds"; null when one of them says more
 * than which members are present, or names a member `s` does not declare in `properties`.
 */
export function dependencyPresence(s: SchemaObject): Presence | null {
  const parts: Presence[] = [];
  for (const keyword of ["dependentRequired", "dependentSchemas", "dependencies"]) {
    const map = s[keyword];
    if (map === undefined) continue;
    if (!isObject(map)) return null;
    for (const [trigger, dependency] of Object.entries(map)) {
      const then = Array.isArray(dependency)
        ? names(dependency)
        : schemaPresence(dependency as Schema, false);
      if (then === null) return null;
      parts.push({ any: [{ not: { present: trigger } }, then] });
    }
  }
  const formula: Presence = { all: parts };
  const declared = isObject(s.properties) ? s.properties : {};
  return mentioned(formula).every((name) => Object.hasOwn(declared, name)) ? formula : null;
}

/** The member names `p` mentions. */
function mentioned(p: Presence, out: string[] = []): string[] {
  if (typeof p === "boolean") return out;
  if ("present" in p) out.push(p.present);
  else if ("not" in p) mentioned(p.not, out);
  else for (const item of "all" in p ? p.all : "any" in p ? p.any : p.one) mentioned(item, out);
  return out;
}

/**
 * Most nodes of one {@link PresenceDiagram} (the benchmark's dependencies need at most 162); the compiler
 * refuses a formula whose diagram grows past it (see {@link PresenceTooLarge}).
 */
export const MAX_PRESENCE_NODES = 10_000;

/** Thrown when a {@link PresenceDiagram} would exceed {@link MAX_PRESENCE_NODES} nodes. */
export class PresenceTooLarge extends Error {
  constructor() {
    super(`a presence diagram of more than ${MAX_PRESENCE_NODES} nodes`);
  }
}

/** {@link PresenceDiagram.FALSE}: no member set satisfies the formula. */
const FALSE = 0;
/** {@link PresenceDiagram.TRUE}: every member set does. */
const TRUE = 1;

/**
 * A reduced ordered BDD over the presence of `size` members (variable `i` is member `i` in declared order).
 * Nodes are numbers: {@link FALSE}, {@link TRUE}, or an internal node with a level, a `low` child (member
 * absent) and a `high` child (member present). Equal nodes are shared, so the nodes at a level are the
 * distinct states an object can be in there. Throws {@link PresenceTooLarge} past
 * {@link MAX_PRESENCE_NODES} nodes.
 */
export class PresenceDiagram {
  static readonly FALSE = FALSE;
  static readonly TRUE = TRUE;
  private readonly levels: number[];
  private readonly lows: number[] = [FALSE, TRUE];
  private readonly highs: number[] = [FALSE, TRUE];
  private readonly unique = new Map<string, number>();
  private readonly memo = new Map<string, number>();

  /** A diagram over `size` members (levels 0 to `size - 1`; the terminals sit at level `size`). */
  constructor(readonly size: number) {
    this.levels = [size, size];
  }

  /** The member index node `u` tests (`size` for the terminals). */
  level(u: number): number {
    return this.levels[u]!;
  }

  /** The child of `u` for "member absent". */
  low(u: number): number {
    return this.lows[u]!;
  }

  /** The child of `u` for "member present". */
  high(u: number): number {
    return this.highs[u]!;
  }

  /** "Member `i` is present". */
  variable(i: number): number {
    return this.node(i, FALSE, TRUE);
  }

  /** The node of `p`, with `index` giving each mentioned name's member (undefined: never present). */
  of(p: Presence, index: (name: string) => number | undefined): number {
    if (typeof p === "boolean") return p ? TRUE : FALSE;
    if ("present" in p) {
      const i = index(p.present);
      return i === undefined ? FALSE : this.variable(i);
    }
    if ("not" in p) return this.not(this.of(p.not, index));
    if ("all" in p) return p.all.reduce((acc, item) => this.and(acc, this.of(item, index)), TRUE as number);
    if ("any" in p) return p.any.reduce((acc, item) => this.or(acc, this.of(item, index)), FALSE as number);
    // Exactly one: one item holds and none of the others.
    const items = p.one.map((item) => this.of(item, index));
    let out: number = FALSE;
    for (const [i, item] of items.entries()) {
      let only = item;
      for (const [j, other] of items.entries()) if (j !== i) only = this.and(only, this.not(other));
      out = this.or(out, only);
    }
    return out;
  }

  /** The negation of `u`. */
  not(u: number): number {
    return this.ite(u, FALSE, TRUE);
  }

  /** The conjunction of `u` and `v`. */
  and(u: number, v: number): number {
    return this.ite(u, v, FALSE);
  }

  /** The disjunction of `u` and `v`. */
  or(u: number, v: number): number {
    return this.ite(u, TRUE, v);
  }

  /** If `f` then `g` else `h` (the usual BDD operation every other one is written with). */
  private ite(f: number, g: number, h: number): number {
    if (f === TRUE) return g;
    if (f === FALSE) return h;
    if (g === h) return g;
    if (g === TRUE && h === FALSE) return f;
    const key = `${f},${g},${h}`;
    const known = this.memo.get(key);
    if (known !== undefined) return known;
    const top = Math.min(this.level(f), this.level(g), this.level(h));
    const at = (u: number, present: boolean): number =>
      this.level(u) !== top ? u : present ? this.high(u) : this.low(u);
    const out = this.node(
      top,
      this.ite(at(f, false), at(g, false), at(h, false)),
      this.ite(at(f, true), at(g, true), at(h, true)),
    );
    this.memo.set(key, out);
    return out;
  }

  private node(level: number, low: number, high: number): number {
    if (low === high) return low;
    const key = `${level},${low},${high}`;
    const known = this.unique.get(key);
    if (known !== undefined) return known;
    const u = this.levels.length;
    if (u >= MAX_PRESENCE_NODES) throw new PresenceTooLarge();
    this.levels.push(level);
    this.lows.push(low);
    this.highs.push(high);
    this.unique.set(key, u);
    return u;
  }
}

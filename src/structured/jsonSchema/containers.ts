/**
 * Objects and arrays of the JSON Schema compiler (see `jsonSchemaToGbnf.ts` for the overall contract).
 * Objects: properties in declared order, any subset of optional ones, `additionalProperties` defaulting to
 * false when `properties` is present (llama.cpp, xgrammar strict mode). Arrays: `prefixItems`/`items`/
 * `minItems`/`maxItems` exactly (draft-07 `items: [...]` + `additionalItems` too).
 */
import { CodePointSet } from "../codePointSet.ts";
import { type GbnfBuilder, gbnfCharClass, gbnfLiteral, isAtomicExpression } from "../gbnf.ts";
import {
  jsonCharRule,
  jsonEscapeRule,
  jsonObjectRule,
  jsonStringRule,
  jsonValueRule,
  WS,
} from "../jsonPrimitives.ts";
import { JSON_ESCAPED, jsonEncoded } from "../regexToGbnf.ts";
import type { CompileContext } from "./context.ts";
import { pointerSegment, type Schema, type SchemaObject } from "./keywords.ts";

/** The GBNF body of an object schema `s` at JSON pointer `path`. Throws 400 via `ctx.fail` when unsatisfiable. */
export function objectBody(ctx: CompileContext, s: SchemaObject, path: string, hint: string): string {
  const b = ctx.b;
  const props: [string, Schema][] = Object.entries(
    (s.properties as Record<string, Schema> | undefined) ?? {},
  );
  const required = new Set((s.required as string[] | undefined) ?? []);
  const explicit = "additionalProperties" in s || s.unevaluatedProperties === false;
  const additional: Schema =
    s.unevaluatedProperties === false
      ? false
      : ((s.additionalProperties as Schema | undefined) ?? !("properties" in s));
  for (const name of required) {
    if (props.some(([n]) => n === name)) continue;
    if (additional === false && explicit) {
      ctx.fail(
        `Required property '${name}' at ${path} is not in 'properties' and additionalProperties is false.`,
      );
    }
    props.push([name, additional === false ? true : additional]);
  }
  const child = (name: string): string => (hint === "root" ? name : `${hint}-${name}`);
  if (props.length === 0) {
    if (additional === false) return `"{" ${WS} "}"`;
    if (additional === true) return jsonObjectRule(b);
  }
  let extraKv: string | null = null;
  if (additional !== false) {
    const value =
      additional === true
        ? jsonValueRule(b)
        : ctx.value(additional, `${path}/additionalProperties`, child("additional"), 0);
    const key =
      props.length === 0
        ? jsonStringRule(b)
        : otherKeyRule(
            b,
            props.map(([n]) => n),
            child("other-key"),
          );
    extraKv = b.rule(child("additional-kv"), `${key} ":" ${WS} ${value}`);
  }
  const kvs = props.map(([name, schema]) => {
    const value = ctx.value(schema, `${path}/properties/${pointerSegment(name)}`, child(name), 0);
    return b.rule(`${child(name)}-kv`, `${gbnfLiteral(JSON.stringify(name))} ":" ${WS} ${value}`);
  });
  const n = kvs.length;
  const firstRequired = props.findIndex(([name]) => required.has(name));
  const r = firstRequired < 0 ? n : firstRequired;
  const parts = kvs.map((kv, i) => (required.has(props[i]![0]) ? `"," ${WS} ${kv}` : `("," ${WS} ${kv})?`));
  const extraPart = extraKv === null ? "" : `("," ${WS} ${extraKv})*`;
  const seq = (items: string[]): string => items.filter((x) => x !== "").join(" ");
  const lastStart = Math.min(r, n - 1);
  const alternatives: string[] = [];
  if (n > 0) {
    const tails: string[] = [];
    tails[lastStart + 1] = seq([...parts.slice(lastStart + 1), extraPart]);
    if (lastStart > 0 && tails[lastStart + 1] !== "" && !isAtomicExpression(tails[lastStart + 1]!)) {
      tails[lastStart + 1] = b.rule(`${hint}-rest`, tails[lastStart + 1]!);
    }
    for (let i = lastStart; i >= 1; i--) tails[i] = b.rule(`${hint}-rest`, seq([parts[i]!, tails[i + 1]!]));
    for (let j = 0; j <= lastStart; j++) alternatives.push(seq([kvs[j]!, tails[j + 1]!]));
  }
  if (r === n && extraKv !== null) alternatives.push(seq([extraKv, extraPart]));
  const members = alternatives.length === 1 ? alternatives[0]! : `(${alternatives.join(" | ")})`;
  return r === n ? `"{" ${WS} (${members} ${WS})? "}"` : `"{" ${WS} ${members} ${WS} "}"`;
}

/** A JSON string key that is none of `names` (trie construction as llama.cpp's `_not_strings`, JSON-escape aware). */
/** Rule for a JSON string key that is none of `names` (trie construction as llama.cpp's `_not_strings`, JSON-escape aware). */
function otherKeyRule(b: GbnfBuilder, names: string[], hint: string): string {
  type Trie = { children: Map<number, Trie>; end: boolean };
  const root: Trie = { children: new Map(), end: false };
  for (const name of names) {
    let node = root;
    for (const ch of name) {
      const cp = ch.codePointAt(0)!;
      let next = node.children.get(cp);
      if (next === undefined) {
        next = { children: new Map(), end: false };
        node.children.set(cp, next);
      }
      node = next;
    }
    node.end = true;
  }
  const ch = jsonCharRule(b);
  const visit = (node: Trie): string => {
    const alts: string[] = [];
    for (const [cp, next] of node.children) {
      const literal = gbnfLiteral(jsonEncoded(cp));
      if (next.children.size === 0) alts.push(`${literal} ${ch}+`);
      else alts.push(`${literal} (${visit(next)})${next.end ? "" : "?"}`);
    }
    const excluded = CodePointSet.of([...node.children.keys()].map((cp) => [cp, cp] as const)).union(
      JSON_ESCAPED,
    );
    alts.push(`(${gbnfCharClass(excluded.complement())} | ${jsonEscapeRule(b)}) ${ch}*`);
    return alts.join(" | ");
  };
  return b.rule(hint, `"\\"" (${visit(root)})${root.end ? "" : "?"} "\\""`);
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
  if (rest === false) max = max === null ? prefix.length : Math.min(max, prefix.length);
  if (max !== null && min > max)
    ctx.fail(`The array at ${path} cannot satisfy minItems ${min} with at most ${max} items.`);
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
  const seq = (items: string[]): string => items.filter((x) => x !== "" && x !== '""').join(" ");
  const restItem = rest === false ? null : ctx.value(rest, restPath, `${hint}-item`, 0);
  let list: string;
  if (prefix.length === 0) {
    list = seq([restItem!, repeatRest(restItem!, min - 1, max === null ? null : max - 1)]);
  } else {
    const items = prefix.map((schema, i) => ctx.value(schema, `${path}/prefixItems/${i}`, `${hint}-${i}`, 0));
    const k = items.length;
    let after = restItem === null ? "" : repeatRest(restItem, min - k, max === null ? null : max - k);
    for (let i = k - 1; i >= 1; i--) {
      const step = seq([`"," ${WS} ${items[i]!}`, after]);
      after = i >= min ? `(${step})?` : step;
    }
    list = seq([items[0]!, after]);
  }
  return min === 0 ? `"[" ${WS} (${list} ${WS})? "]"` : `"[" ${WS} ${list} ${WS} "]"`;
}

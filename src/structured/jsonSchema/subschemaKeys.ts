/**
 * Structural keys of JSON values (hash-consing): two values get the same key exactly when they are equal as
 * JSON with the same key order. The JSON Schema compiler uses them to compile each distinct subschema once,
 * however many places (inline copies, merge results, `$ref` expansions) produce an equal one.
 */
import { ANNOTATIONS } from "./keywords.ts";

/** Tags that tell apart the kinds of interned signatures (see {@link SubschemaKeys}). */
const ARRAY = 1;
const OBJECT = 2;
const SCHEMA = 3;
const REQUIRED_SET = 4;

/**
 * Interns JSON values into small integer keys in time linear in their size: an object's key is computed from
 * its members' keys, so a nested subschema is read once, however often its ancestors are keyed. Objects are
 * remembered by identity, so keying the same object again costs one lookup. Object key order counts (it is
 * significant in `properties`), so equal objects written in another order get different keys (a cache miss,
 * never a wrong hit). An object's or array's *signature* is a tag and its items' keys, or its members' name
 * and value keys, as numbers; signatures are found by a numeric hash and compared in full, so no text is
 * built for them.
 */
export class SubschemaKeys {
  /** Keys of non-string scalars, by their JSON text. */
  private readonly scalars = new Map<string, number>();
  /** Keys of strings, by the string itself (no JSON escaping of long descriptions). */
  private readonly strings = new Map<string, number>();
  /** Interned signatures by hash: each entry lists signatures (tag first) and their keys. */
  private readonly signatures = new Map<number, { signature: number[]; key: number }[]>();
  /**
   * Keys by object identity. Plain maps (faster than weak ones here): an instance lives for one compilation,
   * so the objects it holds are released with it.
   */
  private readonly byObject = new Map<object, number>();
  private readonly bySchema = new Map<object, number>();
  /** The next key handed out (one counter for all maps, so keys never collide). */
  private next = 0;

  /** The key of a JSON value: equal for values equal as JSON (with the same object key order). */
  of(value: unknown): number {
    if (typeof value === "string") {
      let key = this.strings.get(value);
      if (key === undefined) {
        key = this.next++;
        this.strings.set(value, key);
      }
      return key;
    }
    if (typeof value !== "object" || value === null) {
      const text = JSON.stringify(value) ?? "null";
      let key = this.scalars.get(text);
      if (key === undefined) {
        key = this.next++;
        this.scalars.set(text, key);
      }
      return key;
    }
    const known = this.byObject.get(value);
    if (known !== undefined) return known;
    const key = this.intern(this.signature(value, false));
    this.byObject.set(value, key);
    return key;
  }

  /**
   * The key of `schema` as a schema: like {@link of}, but the annotations at its top level (`title`,
   * `description`, …, see {@link ANNOTATIONS}) are left out, since they do not change what it accepts, and
   * a top-level `required` whose names are all declared in its `properties` counts as a set (the compiler
   * writes declared members in declared order, so the order of such a list changes nothing; `allOf` and
   * dependency rewrites list the same names in different orders). Nested subschemas count as JSON (a cache
   * miss at worst).
   */
  ofSchema(schema: unknown): number {
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return this.of(schema);
    const known = this.bySchema.get(schema);
    if (known !== undefined) return known;
    const key = this.intern(this.signature(schema, true));
    this.bySchema.set(schema, key);
    return key;
  }

  /**
   * The signature of an object or array: its tag, then its items' keys, or its members' name and value keys
   * (with `skipAnnotations`, the schema form of {@link ofSchema}).
   */
  private signature(value: object, skipAnnotations: boolean): number[] {
    if (Array.isArray(value)) {
      const out = [ARRAY];
      for (const item of value) out.push(this.of(item));
      return out;
    }
    const out = [skipAnnotations ? SCHEMA : OBJECT];
    const record = value as Record<string, unknown>;
    for (const k in record) {
      if (skipAnnotations && ANNOTATIONS.has(k)) continue;
      const set = skipAnnotations && k === "required" ? this.requiredSet(record) : undefined;
      out.push(this.of(k), set ?? this.of(record[k]));
    }
    return out;
  }

  /**
   * The key of `schema.required` as a set (its names' keys in ascending order), when it lists strings that
   * `schema.properties` all declares; undefined otherwise (the list then counts in its order).
   */
  private requiredSet(schema: Record<string, unknown>): number | undefined {
    const names = schema.required;
    const declared = schema.properties;
    if (!Array.isArray(names) || typeof declared !== "object" || declared === null) return undefined;
    if (!names.every((name) => typeof name === "string" && Object.hasOwn(declared, name))) return undefined;
    const keys = names.map((name: string) => this.of(name)).sort((a, b) => a - b);
    return this.intern([REQUIRED_SET, ...keys]);
  }

  /** The key of a signature: the one it was given before, or a new one. */
  private intern(signature: number[]): number {
    let hash = 0x811c9dc5;
    for (const x of signature) hash = Math.imul(hash ^ x, 0x01000193);
    let bucket = this.signatures.get(hash);
    if (bucket === undefined) {
      bucket = [];
      this.signatures.set(hash, bucket);
    }
    for (const entry of bucket) if (sameNumbers(entry.signature, signature)) return entry.key;
    const key = this.next++;
    bucket.push({ signature, key });
    return key;
  }
}

/** True when both lists hold the same numbers in the same order. */
function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

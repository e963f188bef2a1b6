/**
 * Structural keys of JSON values (hash-consing): two values get the same key exactly when they are equal as
 * JSON with the same key order. The JSON Schema compiler uses them to compile each distinct subschema once,
 * however many places (inline copies, merge results, `$ref` expansions) produce an equal one.
 */
import { ANNOTATIONS } from "./keywords.ts";

/** A key as two UTF-16 code units (keys are below 2^32), the unit {@link SubschemaKeys} shapes are written in. */
const unit = (key: number): string => String.fromCharCode(key & 0xffff, key >>> 16);

/**
 * Interns JSON values into small integer keys in time linear in their size: an object's key is computed from
 * its members' keys, so a nested subschema is read once, however often its ancestors are keyed. Objects are
 * remembered by identity, so keying the same object again costs one lookup. Object key order counts (it is
 * significant in `properties`), so equal objects written in another order get different keys (a cache miss,
 * never a wrong hit).
 */
export class SubschemaKeys {
  /** Keys of object/array shapes and of non-string scalars, by their text. */
  private readonly interned = new Map<string, number>();
  /** Keys of strings, by the string itself (no JSON escaping of long descriptions). */
  private readonly strings = new Map<string, number>();
  private readonly byObject = new WeakMap<object, number>();
  private readonly bySchema = new WeakMap<object, number>();
  /** The next key handed out (one counter for both maps, so keys never collide). */
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
    if (typeof value !== "object" || value === null) return this.intern(JSON.stringify(value) ?? "null");
    const known = this.byObject.get(value);
    if (known !== undefined) return known;
    const key = this.intern(this.shape(value, false));
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
    const key = this.intern(`s${this.shape(schema, true)}`);
    this.bySchema.set(schema, key);
    return key;
  }

  /**
   * The text an object or array is interned by: `[` or `{` and its items' keys, or its members' name and
   * value keys, each as two UTF-16 units (see {@link unit}; fixed width, so no separators are needed).
   */
  private shape(value: object, skipAnnotations: boolean): string {
    if (Array.isArray(value)) {
      let out = "[";
      for (const item of value) out += unit(this.of(item));
      return out;
    }
    // Member names are written as their string keys: shorter than the names, and as unambiguous.
    let out = "{";
    const record = value as Record<string, unknown>;
    for (const k in record) {
      if (skipAnnotations && ANNOTATIONS.has(k)) continue;
      const value = skipAnnotations && k === "required" ? this.requiredSet(record) : undefined;
      out += unit(this.of(k)) + unit(value ?? this.of(record[k]));
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
    return this.intern(`r${keys.map(unit).join("")}`);
  }

  private intern(text: string): number {
    let key = this.interned.get(text);
    if (key === undefined) {
      key = this.next++;
      this.interned.set(text, key);
    }
    return key;
  }
}

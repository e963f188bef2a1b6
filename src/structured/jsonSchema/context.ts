/** What the per-type compilers (`containers.ts`, `scalars.ts`) need from the JSON Schema compiler. */
import type { GbnfBuilder } from "../gbnf/gbnf.ts";
import type { Schema } from "./keywords.ts";

/** The compiler state shared with the per-type compilers. */
export type CompileContext = {
  /** The grammar being built. */
  readonly b: GbnfBuilder;
  /** The request field named in errors. */
  readonly param: string;
  /** Throws `ConstraintError` with `message` and {@link param}. */
  fail(message: string): never;
  /** Throws the compiler's "no instance" error: optional places drop the subschema, others fail with 400. */
  unsatisfiable(message: string): never;
  /**
   * Runs `fn`; when it finds its subschema unsatisfiable, undoes the rules it added and returns null.
   * Other errors (400 for unsupported keywords) pass through.
   */
  attempt<T>(fn: () => T): T | null;
  /**
   * Throws the "no instance" error when merging `schema`'s `allOf`/`$ref` already shows it has none (a
   * quick test, before costlier work that would be undone); returns otherwise, whatever else is wrong.
   */
  refuteMerge(schema: Schema, path: string): void;
  /**
   * Whether the scalar `value` satisfies `schema`, where that is plain to see (its type, listed values and
   * their combinations); undefined when the compiler must decide.
   */
  admits(schema: Schema, value: string | number | boolean | null): boolean | undefined;
  /** Whether `a` and `b` are the same subschema (equal keywords and values, top-level annotations aside). */
  sameSchema(a: Schema, b: Schema): boolean;
  /** A single GBNF symbol (rule name or literal) for a subschema at JSON pointer `path`. */
  value(schema: Schema, path: string, hint: string, depth: number): string;
};

/**
 * Local `$ref`s of one JSON Schema document (carved out of `compiler.ts`'s `SchemaCompiler`): JSON pointers
 * into the root document, each resolved once. Only `#…` pointers are supported (no remote or `$id`-based
 * references); see `docs/structured-output.md`.
 */
import { ConstraintError } from "../errors.ts";
import { echoed } from "../regex/regexToGbnf.ts";
import { resolveLocalRef, type Schema } from "./keywords.ts";

/** The local `$ref`s of the document `root`, resolved once per `$ref` text. */
export class LocalRefs {
  /** The targets of local `$ref`s by their text. */
  private readonly resolved = new Map<string, unknown>();

  /**
   * @param root the root document the pointers point into.
   * @param param the request field named in the errors of {@link target}.
   */
  constructor(
    private readonly root: unknown,
    private readonly param: string,
  ) {}

  /** {@link resolveLocalRef} in the root document (undefined when nothing is there), looked up once per text. */
  resolve(ref: string): unknown {
    if (this.resolved.has(ref)) return this.resolved.get(ref);
    const node = resolveLocalRef(this.root, ref);
    this.resolved.set(ref, node);
    return node;
  }

  /**
   * The schema `ref` points to. Throws {@link ConstraintError} (naming `param`) for a `$ref` that is not a
   * JSON pointer, points nowhere, or points to something that is not a schema.
   */
  target(ref: string): Schema {
    if (!/^#(\/|$)/.test(ref))
      throw new ConstraintError(
        `Unsupported $ref '${echoed(ref)}': only JSON pointers are supported.`,
        this.param,
      );
    const node = this.resolve(ref);
    if (node === undefined) throw new ConstraintError(`Unresolvable $ref '${echoed(ref)}'.`, this.param);
    if (typeof node !== "boolean" && (typeof node !== "object" || node === null || Array.isArray(node)))
      throw new ConstraintError(`$ref '${echoed(ref)}' does not point to a schema.`, this.param);
    return node as Schema;
  }
}

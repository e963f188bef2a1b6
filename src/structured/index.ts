/**
 * Guided decoding (structured output): constraint → GBNF compilers and grammar validation.
 * See `docs/structured-output.md` for the supported JSON Schema / regex / GBNF dialects.
 */
export {
  type CompiledConstraint,
  type CompileOptions,
  type ConstraintKind,
  clearCompileCache,
  compileConstraint,
} from "./compile.ts";
export { CompilerFailureError, ConstraintError } from "./errors.ts";
export { checkGbnfText, confirmGbnf, validateGbnf } from "./gbnf/validateGbnf.ts";
export { warmFormatAutomata } from "./jsonSchema/formats.ts";

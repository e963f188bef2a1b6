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
export { warmFormatAutomata } from "./jsonSchema/formats.ts";
export { checkGbnfText, confirmGbnf, validateGbnf } from "./validateGbnf.ts";

/**
 * JSON Schema `pattern`s as JavaScript regexes (ECMA-262 with the `u` flag, as validators read them), for the
 * places that test names or listed values against a pattern rather than compiling it to a grammar.
 */

/** Most patterns {@link ecmaRegex} keeps compiled (it forgets them all when full). */
const MAX_COMPILED_PATTERNS = 256;
const compiled = new Map<string, RegExp | null>();

/**
 * `pattern` as a `u` regex, or null when JavaScript cannot compile it; compiled once for the many names or
 * values one pattern is tested against (a `oneOf` exclusion can list hundreds).
 */
export function ecmaRegex(pattern: string): RegExp | null {
  let re = compiled.get(pattern);
  if (re === undefined) {
    try {
      re = new RegExp(pattern, "u");
    } catch {
      re = null;
    }
    if (compiled.size >= MAX_COMPILED_PATTERNS) compiled.clear();
    compiled.set(pattern, re);
  }
  return re;
}

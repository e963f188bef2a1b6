/**
 * Shared GBNF rules for JSON text (RFC 8259): whitespace, string characters, numbers, literals, and a
 * depth-bounded "any JSON value" used for `json_object` and for unconstrained parts of a schema. Rule shapes
 * follow llama.cpp's `json-schema-to-grammar` primitives (`SPACE_RULE`, `char`, `integral-part`, ...), with
 * surrogate `\u` escapes excluded so every string character is one code point.
 */
import type { GbnfBuilder } from "./gbnf.ts";

/**
 * Default whitespace between JSON tokens: nothing, one space, or one or two newlines followed by up to 20
 * spaces/tabs — llama.cpp's `SPACE_RULE`. Bounded, so a model cannot loop on whitespace.
 */
export const DEFAULT_WS_BODY = '| " " | "\\n"{1,2} [ \\t]{0,20}';

/** Default nesting depth of a `json_object` / unconstrained value: objects and arrays nest at most this deep. */
export const DEFAULT_JSON_DEPTH = 6;

/** Rule `ws`: the whitespace allowed between JSON tokens (body set by the compiler; see {@link DEFAULT_WS_BODY}). */
export const WS = "ws";

/** A JSON escape sequence: `\` then one of `"\/bfnrt`, or `u` and 4 hex digits that are not a surrogate. */
export function jsonEscapeRule(b: GbnfBuilder): string {
  return b.fixed(
    "json-escape",
    '"\\\\" (["\\\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))',
  );
}

/** One JSON string character: anything but `"`, `\` and controls, or a {@link jsonEscapeRule} escape. */
export function jsonCharRule(b: GbnfBuilder): string {
  return b.fixed("json-char", () => `[^"\\\\\\x00-\\x1F] | ${jsonEscapeRule(b)}`);
}

/** Any JSON string: `"` json-char* `"`. */
export function jsonStringRule(b: GbnfBuilder): string {
  const ch = jsonCharRule(b);
  return b.fixed("json-string", `"\\"" ${ch}* "\\""`);
}

/** Integer part without sign: `0` or up to 16 digits without a leading zero (as llama.cpp's `integral-part`). */
export function integralPartRule(b: GbnfBuilder): string {
  return b.fixed("integral-part", '"0" | [1-9] [0-9]{0,15}');
}

/** Any JSON integer (at most 16 digits), as llama.cpp's `integer` primitive but without `-0`. */
export function jsonIntegerRule(b: GbnfBuilder): string {
  return b.fixed("json-integer", '"0" | "-"? [1-9] [0-9]{0,15}');
}

/** Any JSON number: sign, integer part, up to 16 fraction digits, optional exponent (llama.cpp's `number`). */
export function jsonNumberRule(b: GbnfBuilder): string {
  const ip = integralPartRule(b);
  return b.fixed("json-number", `"-"? ${ip} ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?`);
}

/** `true` or `false`. */
export function jsonBooleanRule(b: GbnfBuilder): string {
  return b.fixed("json-boolean", '"true" | "false"');
}

/** `null`. */
export function jsonNullRule(b: GbnfBuilder): string {
  return b.fixed("json-null", '"null"');
}

/**
 * Any JSON value whose objects/arrays nest at most `depth` levels (depth 0: scalars only). Generated as one
 * rule per level (`json-value-d`, `json-object-d`, `json-array-d`), so the grammar itself bounds nesting.
 */
export function jsonValueRule(b: GbnfBuilder, depth = DEFAULT_JSON_DEPTH): string {
  const name = `json-value-${depth}`;
  if (b.has(name)) return name;
  const scalars = [jsonStringRule(b), jsonNumberRule(b), jsonBooleanRule(b), jsonNullRule(b)].join(" | ");
  if (depth <= 0) return b.fixed(name, scalars);
  b.fixed(name, () => {
    const object = jsonObjectRule(b, depth);
    const array = b.fixed(`json-array-${depth}`, () => {
      const inner = jsonValueRule(b, depth - 1);
      return `"[" ${WS} (${inner} ("," ${WS} ${inner})* ${WS})? "]"`;
    });
    return `${object} | ${array} | ${scalars}`;
  });
  return name;
}

/** Any JSON object whose values nest at most `depth - 1` further levels (rule `json-object-d`). */
export function jsonObjectRule(b: GbnfBuilder, depth = DEFAULT_JSON_DEPTH): string {
  return b.fixed(`json-object-${depth}`, () => {
    const key = jsonStringRule(b);
    const inner = jsonValueRule(b, depth - 1);
    const kv = `${key} ":" ${WS} ${inner}`;
    return `"{" ${WS} (${kv} ("," ${WS} ${kv})* ${WS})? "}"`;
  });
}

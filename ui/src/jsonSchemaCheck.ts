/**
 * The playground's check of a structured reply against the request's JSON Schema, by
 * `@cfworker/json-schema` (drafts 4 to 2020-12). It interprets schemas without `eval`, which the page's
 * Content-Security-Policy (`default-src 'self'`, no `'unsafe-eval'`, `server/ui.ts`) requires: ajv, the
 * other validator installed, compiles each schema with `new Function` and would grow the bundle from 40
 * to 168 KB (this one adds about 19 KB, 5 KB gzipped; measured with `npm run build`, issue 30).
 */
import { type OutputUnit, type Schema, Validator } from "@cfworker/json-schema";

/**
 * Keywords whose errors only say that something inside failed (a property, an extra property, an item,
 * a `$ref`'s target, an `allOf` branch); the inner error that follows says what.
 */
const SUMMARIES = new Set([
  "properties",
  "patternProperties",
  "additionalProperties",
  "items",
  "prefixItems",
  "$ref",
  "allOf",
]);

/**
 * Checks `value` against `schema`; returns the problems found, each as `path: what is wrong` with the
 * path in JSONPath form (`$`, `$.name`, `$.tags[0]`), the validator's message otherwise; empty when the
 * value is valid. The errors inside an `anyOf` / `oneOf` branch are left out: the branch's own
 * "matches none" error stands for them. A schema the validator cannot read is one problem at `$`.
 */
export function checkJsonSchema(schema: unknown, value: unknown): string[] {
  let errors: OutputUnit[];
  try {
    errors = new Validator(schema as Schema, "2020-12", false).validate(value).errors;
  } catch (error) {
    return [`$: the schema cannot be checked: ${error instanceof Error ? error.message : String(error)}`];
  }
  return errors
    .filter(
      (unit) => !SUMMARIES.has(unit.keyword) && !/\/(anyOf|oneOf)\/\d+(\/|$)/.test(unit.keywordLocation),
    )
    .map((unit) => `${jsonPath(unit.instanceLocation)}: ${message(unit)}`);
}

/** `#/tags/0/name` (a JSON Pointer fragment) as `$.tags[0].name`. */
function jsonPath(location: string): string {
  const segments = location
    .replace(/^#\/?/, "")
    .split("/")
    .filter((segment) => segment !== "");
  return segments
    .map((segment) => segment.replaceAll("~1", "/").replaceAll("~0", "~"))
    .reduce((path, segment) => (/^\d+$/.test(segment) ? `${path}[${segment}]` : `${path}.${segment}`), "$");
}

function message(unit: OutputUnit): string {
  if (unit.keyword === "false") return "no value is allowed here";
  return unit.error.replace(/\.$/, "");
}

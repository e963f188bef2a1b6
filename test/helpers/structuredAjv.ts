/**
 * Test helper for guided decoding: ajv validators for JSON Schema fixtures with our own `format` checkers
 * (ajv-formats is not a dependency). Formats follow RFC 3339 (`date`, `time` with offset, `date-time`),
 * RFC 4122 `uuid`, ajv-formats' fast `email`, RFC 1123 `hostname` and dotted-quad `ipv4`; loose checks of
 * `uri` (scheme, no whitespace), `uri-reference` (no whitespace), `duration`, `json-pointer`; `ipv6` by node:net.
 */
import { createRequire } from "node:module";
import { isIPv6 } from "node:net";
import type { ValidateFunction } from "ajv";

const require = createRequire(import.meta.url);
type AjvCtor = new (
  options: object,
) => {
  addFormat(name: string, validate: (value: string) => boolean): unknown;
  compile(schema: unknown): ValidateFunction;
};
const Ajv2020 = (require("ajv/dist/2020") as { default: AjvCtor }).default;
const AjvDraft7 = (require("ajv") as { default: AjvCtor }).default;

const daysIn = (year: number, month: number): number =>
  month === 2
    ? year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
      ? 29
      : 28
    : [4, 6, 9, 11].includes(month)
      ? 30
      : 31;

/** RFC 3339 full-date with real days per month. */
export function isDate(value: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  return month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month);
}

/** RFC 3339 full-time (offset required), no leap seconds. */
export function isTime(value: string): boolean {
  return /^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([zZ]|[+-]([01]\d|2[0-3]):[0-5]\d)$/.test(value);
}

/** The format checkers by name. */
export const FORMATS: Record<string, (value: string) => boolean> = {
  date: isDate,
  time: isTime,
  "date-time": (v) => {
    const i = v.search(/[tT]/);
    return i === 10 && isDate(v.slice(0, 10)) && isTime(v.slice(11));
  },
  uuid: (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v),
  email: (v) =>
    /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i.test(
      v,
    ),
  ipv4: (v) => /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/.test(v),
  uri: (v) => /^[a-z][a-z0-9+.-]*:[^\s]+$/i.test(v),
  "uri-reference": (v) => /^[^\s]*$/.test(v),
  ipv6: (v) => isIPv6(v),
  duration: (v) =>
    /^P(?!$)((\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?|\d+W)$/.test(v) && !v.endsWith("T"),
  "json-pointer": (v) => /^(?:\/(?:[^~/]|~0|~1)*)*$/.test(v),
  hostname: (v) =>
    v.length <= 253 &&
    /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i.test(v),
  // As ajv-formats' `regex`: a valid ECMA-262 pattern under the `u` flag, without `\Z`.
  regex: (v) => {
    if (/[^\\]\\Z/.test(v)) return false;
    try {
      new RegExp(v, "u");
      return true;
    } catch {
      return false;
    }
  },
};

/** Keywords whose values map names (not keywords) to schemas. */
const NAME_MAPS = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]);

/**
 * Converts draft-4 boolean `exclusiveMinimum`/`exclusiveMaximum` (which ajv rejects) to the numeric form,
 * draft-07 `dependencies` to `dependentRequired`/`dependentSchemas` (unless `draft7`, ajv's draft-07 class), and drops draft-4 `id` and `$schema`,
 * deeply.
 */
function modernize(schema: unknown, draft7: boolean): unknown {
  if (Array.isArray(schema)) return schema.map((x) => modernize(x, draft7));
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Record<string, unknown> = {};
  const s = schema as Record<string, unknown>;
  for (const [key, value] of Object.entries(s)) {
    if (key === "const" || key === "enum" || key === "default" || key === "examples") out[key] = value;
    else if (NAME_MAPS.has(key) && typeof value === "object" && value !== null && !Array.isArray(value)) {
      // Keys of these maps are names (a property may be called "dependencies" or "id"), not keywords.
      out[key] = Object.fromEntries(Object.entries(value).map(([name, v]) => [name, modernize(v, draft7)]));
    } else if ((key === "id" || key === "$schema") && typeof value === "string")
      continue; // draft-04 `id` and meta-schema URIs (ajv would try to load the draft-04/07 meta-schema)
    else if (key === "dependencies" && !draft7 && typeof value === "object" && value !== null) {
      // draft-07 `dependencies` (ignored by ajv's 2020-12 class): its two 2019-09 forms
      for (const [name, dep] of Object.entries(value)) {
        const target = Array.isArray(dep) ? "dependentRequired" : "dependentSchemas";
        out[target] = { ...((out[target] as object | undefined) ?? {}), [name]: modernize(dep, draft7) };
      }
    } else if ((key === "exclusiveMinimum" || key === "exclusiveMaximum") && typeof value === "boolean") {
      const bound = key === "exclusiveMinimum" ? "minimum" : "maximum";
      if (value && typeof s[bound] === "number") out[key] = s[bound];
    } else out[key] = modernize(value, draft7);
  }
  if (s.exclusiveMinimum === true) delete out.minimum;
  if (s.exclusiveMaximum === true) delete out.maximum;
  return out;
}

/** True when the schema uses draft-07 tuple syntax (`items: [...]`), which needs ajv's draft-07 class. */
function usesDraft7Tuples(schema: unknown): boolean {
  if (typeof schema !== "object" || schema === null) return false;
  if (!Array.isArray(schema) && Array.isArray((schema as Record<string, unknown>).items)) return true;
  return Object.values(schema).some(usesDraft7Tuples);
}

/** An ajv validate function for `schema` (draft 2020-12, or draft-07 for `items: [...]` tuples), formats above. */
export function ajvValidator(schema: unknown): ValidateFunction {
  const draft7 = usesDraft7Tuples(schema);
  const Ctor = draft7 ? AjvDraft7 : Ajv2020;
  const ajv = new Ctor({ strict: false, validateFormats: true, logger: false });
  for (const [name, check] of Object.entries(FORMATS)) ajv.addFormat(name, check);
  return ajv.compile(modernize(schema, draft7));
}

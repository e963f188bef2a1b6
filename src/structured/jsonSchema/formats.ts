/**
 * GBNF for JSON Schema string `format`s (the content between the quotes). Shapes follow RFC 3339
 * (`date`, `time`, `date-time`, with leap years and days per month exact, as ajv-formats' `date` checks),
 * RFC 4122 (`uuid`), ajv-formats' fast `email`, RFC 1123 `hostname`, dotted-quad `ipv4`, RFC 3339 appendix A
 * `duration`, RFC 3986 `uri`/`uri-reference`, RFC 6901 `json-pointer`, OpenAPI's `byte` (base64) and the
 * integer ranges of OpenAPI's `int32`/`int64`. Some grammars are narrower than their format, never wider:
 * `ipv6` is the full eight-group form, a `uri` host is a registered name (no `[IP-literal]`), `iri`,
 * `idn-email` and `idn-hostname` are written with ASCII only. llama.cpp's `STRING_FORMAT_RULES` cover
 * date/time/date-time/uuid with looser days.
 */
import type { GbnfBuilder } from "../gbnf.ts";

/** The string formats {@link formatRule} supports. */
export const SUPPORTED_FORMATS = [
  "date",
  "time",
  "date-time",
  "duration",
  "uuid",
  "email",
  "idn-email",
  "ipv4",
  "ipv6",
  "hostname",
  "idn-hostname",
  "uri",
  "iri",
  "uri-reference",
  "iri-reference",
  "json-pointer",
  "relative-json-pointer",
  "byte",
] as const;

/** One of {@link SUPPORTED_FORMATS}. */
export type SupportedFormat = (typeof SUPPORTED_FORMATS)[number];

/** The formats of JSON Schema drafts 4 to 2020-12 (other `format` values are unknown and ignored). */
const STANDARD_FORMATS = new Set([...SUPPORTED_FORMATS, "uri-template", "regex", "host-name", "ip-address"]);

/** Integer ranges of OpenAPI's integer formats, applied to `integer` and `number` instances. */
export const INTEGER_FORMATS: Record<string, [bigint, bigint]> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
};

/** True when `format` is one of {@link SUPPORTED_FORMATS}. */
export function isSupportedFormat(format: string): format is SupportedFormat {
  return (SUPPORTED_FORMATS as readonly string[]).includes(format);
}

/** True for a standard JSON Schema format we cannot enforce (`uri-template`, `regex`, ...): a 400. */
export function isUnsupportedStandardFormat(format: string): boolean {
  return STANDARD_FORMATS.has(format) && !isSupportedFormat(format);
}

const LEAP_YY = '"0" [48] | [2468] [048] | [13579] [26]';

function dateRule(b: GbnfBuilder): string {
  return b.fixed(
    "fmt-date",
    [
      '[0-9]{4} "-" ("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])',
      '[0-9]{4} "-" ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30")',
      '[0-9]{4} "-02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])',
      `([0-9]{2} (${LEAP_YY}) | (${LEAP_YY} | "00") "00") "-02-29"`,
    ].join(" | "),
  );
}

function timeRule(b: GbnfBuilder): string {
  return b.fixed(
    "fmt-time",
    '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ([zZ] | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])',
  );
}

function labelRule(b: GbnfBuilder): string {
  return b.fixed("fmt-label", "[a-zA-Z0-9] ([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])?");
}

/**
 * Adds the rule for `format` and returns its name. The rule matches the string content only (no quotes);
 * all of its characters are plain ASCII that need no JSON escaping.
 */
export function formatRule(b: GbnfBuilder, format: SupportedFormat): string {
  switch (format) {
    case "date":
      return dateRule(b);
    case "time":
      return timeRule(b);
    case "date-time":
      return b.fixed("fmt-date-time", `${dateRule(b)} [tT] ${timeRule(b)}`);
    case "uuid":
      return b.fixed(
        "fmt-uuid",
        '[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}',
      );
    case "email":
      return b.fixed("fmt-email", () => {
        const label = labelRule(b);
        return `[a-zA-Z0-9.!#$%&'*+/=?^_\`{|}~-]{1,64} "@" ${label} ("." ${label}){0,4}`;
      });
    case "ipv4":
      return b.fixed("fmt-ipv4", () => {
        const octet = b.fixed(
          "fmt-octet",
          '"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]',
        );
        return `${octet} "." ${octet} "." ${octet} "." ${octet}`;
      });
    case "duration":
      return b.fixed("fmt-duration", () => {
        const n = "[0-9]{1,9}";
        const second = `${n} "S"`;
        const minute = `${n} "M" (${second})?`;
        const hour = `${n} "H" (${minute})?`;
        const time = `"T" (${hour} | ${minute} | ${second})`;
        const day = `${n} "D"`;
        const month = `${n} "M" (${day})?`;
        const year = `${n} "Y" (${month})?`;
        return `"P" ((${day} | ${month} | ${year}) (${time})? | ${time} | ${n} "W")`;
      });
    case "ipv6":
      return b.fixed("fmt-ipv6", '[0-9a-fA-F]{1,4} (":" [0-9a-fA-F]{1,4}){7}');
    case "uri":
    case "iri":
      return uriRule(b);
    case "uri-reference":
    case "iri-reference":
      return b.fixed("fmt-uri-reference", () => {
        const { pchar, authority, tail } = uriParts(b);
        const segmentNc = `([a-zA-Z0-9._~!$&'()*+,;=@-] | "%" [0-9a-fA-F]{2})+`;
        const relative = `("//" ${authority} ("/" ${pchar}*)* | "/" (${pchar}+ ("/" ${pchar}*)*)? | ${segmentNc} ("/" ${pchar}*)*)?`;
        return `${uriRule(b)} | ${relative} ${tail}`;
      });
    case "json-pointer":
      return jsonPointerRule(b);
    case "relative-json-pointer":
      return b.fixed("fmt-relative-json-pointer", `("0" | [1-9] [0-9]*) ("#" | ${jsonPointerRule(b)})`);
    case "byte":
      return b.fixed("fmt-byte", '([A-Za-z0-9+/]{4})* ([A-Za-z0-9+/]{2} "==" | [A-Za-z0-9+/]{3} "=")?');
    case "idn-email":
      return formatRule(b, "email");
    case "idn-hostname":
      return formatRule(b, "hostname");
    case "hostname":
      return b.fixed("fmt-hostname", () => {
        const label = labelRule(b);
        return `${label} ("." ${label}){0,4}`;
      });
  }
}

/** RFC 6901 JSON pointer, reference tokens of printable ASCII (other than `"` and `\\`). */
function jsonPointerRule(b: GbnfBuilder): string {
  return b.fixed("fmt-json-pointer", '("/" ([\\x20-\\x21\\x23-\\x2E\\x30-\\x5B\\x5D-\\x7D] | "~" [01])*)*');
}

/** Pieces of RFC 3986 (`pchar`, `authority`, query and fragment `tail`) shared by `uri` and `uri-reference`. */
function uriParts(b: GbnfBuilder): { pchar: string; authority: string; tail: string } {
  const pchar = b.fixed("fmt-uri-pchar", `[a-zA-Z0-9._~!$&'()*+,;=:@-] | "%" [0-9a-fA-F]{2}`);
  const authority = b.fixed(
    "fmt-uri-authority",
    `(([a-zA-Z0-9._~!$&'()*+,;=:-] | "%" [0-9a-fA-F]{2})* "@")? ([a-zA-Z0-9._~!$&'()*+,;=-] | "%" [0-9a-fA-F]{2})* (":" [0-9]*)?`,
  );
  const tail = b.fixed("fmt-uri-tail", `("?" (${pchar} | [/?])*)? ("#" (${pchar} | [/?])*)?`);
  return { pchar, authority, tail };
}

/** RFC 3986 absolute URI with a non-empty hier-part (as ajv-formats' `uri` requires). */
function uriRule(b: GbnfBuilder): string {
  return b.fixed("fmt-uri", () => {
    const { pchar, authority, tail } = uriParts(b);
    const hier = `"//" ${authority} ("/" ${pchar}*)* | "/" (${pchar}+ ("/" ${pchar}*)*)? | ${pchar}+ ("/" ${pchar}*)*`;
    return `[a-zA-Z] [a-zA-Z0-9+.-]* ":" (${hier}) ${tail}`;
  });
}

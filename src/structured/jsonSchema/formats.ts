/**
 * GBNF for JSON Schema string `format`s (the content between the quotes). Shapes follow RFC 3339
 * (`date`, `time`, `date-time`, with leap years and days per month exact, as ajv-formats' `date` checks),
 * RFC 4122 (`uuid`), ajv-formats' fast `email`, RFC 1123 `hostname`, and dotted-quad `ipv4`.
 * llama.cpp's `STRING_FORMAT_RULES` cover date/time/date-time/uuid with looser days.
 */
import type { GbnfBuilder } from "../gbnf.ts";

/** The formats {@link formatRule} supports; any other `format` is refused with a 400. */
export const SUPPORTED_FORMATS = ["date", "time", "date-time", "uuid", "email", "ipv4", "hostname"] as const;

/** One of {@link SUPPORTED_FORMATS}. */
export type SupportedFormat = (typeof SUPPORTED_FORMATS)[number];

/** True when `format` is one of {@link SUPPORTED_FORMATS}. */
export function isSupportedFormat(format: string): format is SupportedFormat {
  return (SUPPORTED_FORMATS as readonly string[]).includes(format);
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
    case "hostname":
      return b.fixed("fmt-hostname", () => {
        const label = labelRule(b);
        return `${label} ("." ${label}){0,4}`;
      });
  }
}

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
import type { GbnfBuilder } from "../gbnf/gbnf.ts";
import { type Dfa, regexDfa } from "../regex/regexAutomaton.ts";
import { parseRegex, type RegexNode, splitAnchors } from "../regex/regexParser.ts";
import { regexTreeExpression } from "../regex/regexToGbnf.ts";

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
  "regex",
  "host-name",
  "ip-address",
] as const;

/** One of {@link SUPPORTED_FORMATS}. */
export type SupportedFormat = (typeof SUPPORTED_FORMATS)[number];

/** The formats of JSON Schema drafts 4 to 2020-12 (other `format` values are unknown and ignored). */
const STANDARD_FORMATS = new Set([...SUPPORTED_FORMATS, "uri-template"]);

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

const DIGIT2 = String.raw`\d{2}`;
const LEAP_YY = "0[48]|[2468][048]|[13579][26]";
const DATE = [
  String.raw`\d{4}-(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])`,
  String.raw`\d{4}-(?:0[469]|11)-(?:0[1-9]|[12]\d|30)`,
  String.raw`\d{4}-02-(?:0[1-9]|1\d|2[0-8])`,
  `(?:${DIGIT2}(?:${LEAP_YY})|(?:${LEAP_YY}|00)00)-02-29`,
].join("|");
const HOUR = String.raw`(?:[01]\d|2[0-3])`;
const TIME = String.raw`${HOUR}:[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:[zZ]|[+-]${HOUR}:[0-5]\d)`;
const LABEL = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";
const HOSTNAME = String.raw`${LABEL}(?:\.${LABEL}){0,4}`;
const OCTET = String.raw`(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)`;
const N = String.raw`\d{1,9}`;
const DURATION_TIME = `T(?:${N}H(?:${N}M(?:${N}S)?)?|${N}M(?:${N}S)?|${N}S)`;
const PCHAR = "(?:[a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-F]{2})";
const AUTHORITY = String.raw`(?:(?:[a-zA-Z0-9._~!$&'()*+,;=:-]|%[0-9a-fA-F]{2})*@)?(?:[a-zA-Z0-9._~!$&'()*+,;=-]|%[0-9a-fA-F]{2})*(?::\d*)?`;
const URI_TAIL = String.raw`(?:\?(?:${PCHAR}|[/?])*)?(?:#(?:${PCHAR}|[/?])*)?`;
const HIER = `//${AUTHORITY}(?:/${PCHAR}*)*|/(?:${PCHAR}+(?:/${PCHAR}*)*)?|${PCHAR}+(?:/${PCHAR}*)*`;
const URI = `[a-zA-Z][a-zA-Z0-9+.-]*:(?:${HIER})${URI_TAIL}`;
const SEGMENT_NC = "(?:[a-zA-Z0-9._~!$&'()*+,;=@-]|%[0-9a-fA-F]{2})+";
const RELATIVE_REF = `(?://${AUTHORITY}(?:/${PCHAR}*)*|/(?:${PCHAR}+(?:/${PCHAR}*)*)?|${SEGMENT_NC}(?:/${PCHAR}*)*)?${URI_TAIL}`;
const JSON_POINTER = String.raw`(?:/(?:[\x20-\x21\x23-\x2E\x30-\x5B\x5D-\x7D]|~[01])*)*`;
const EMAIL = `[a-zA-Z0-9.!#$%&'*+/=?^_\`{|}~-]{1,64}@${HOSTNAME}`;

/**
 * ECMA-262 regular expressions (`format: "regex"`, valid for `new RegExp(text, "u")` as ajv-formats checks),
 * narrowed to a regular subset: literal letters, digits and punctuation that need no escape, escaped syntax
 * characters and `\d\D\w\W\s\S`, `.`, classes of single such characters, `*`/`+`/`?` (optionally lazy),
 * `{n}`, `|`, `^`/`$`, and groups `(...)`/`(?:...)` nested at most three deep.
 */
function regexFormat(): string {
  const literal = "[A-Za-z0-9 _,:;@#%&=~<>/!'-]";
  const escaped = String.raw`\\[.*+?()\[\]{}|^$\\/dDwWsS]`;
  const classItem = String.raw`(?:[A-Za-z0-9 _,:;@#%&=~<>/!'.*+?(){}|$]|a-z|A-Z|0-9|a-f|A-F|\\[\]\\\-^dDwWsS])`;
  const charClass = String.raw`\[\^?${classItem}+\]`;
  const quantifier = String.raw`(?:[*+?]\??|\{[1-9]\d?\})?`;
  let group = "";
  for (let depth = 0; depth < 3; depth++) {
    const atom = `(?:${literal}|${escaped}|${charClass}|\\.${group === "" ? "" : `|${group}`})`;
    const alternative = `(?:${atom}${quantifier})*`;
    group = String.raw`\((?:\?:)?${alternative}(?:\|${alternative})*\)`;
  }
  const atom = `(?:${literal}|${escaped}|${charClass}|\\.|${group})`;
  const alternative = `\\^?(?:${atom}${quantifier})*\\$?`;
  return `${alternative}(?:\\|${alternative})*`;
}

/**
 * Each supported format as an ECMA-262 pattern its strings fully match (no anchors). The `format` grammar,
 * and its intersections with `pattern` and lengths, are compiled from these, so both always agree.
 */
export const FORMAT_PATTERNS: Record<SupportedFormat, string> = {
  date: DATE,
  time: TIME,
  "date-time": `(?:${DATE})[tT]${TIME}`,
  duration: `P(?:(?:${N}D|${N}M(?:${N}D)?|${N}Y(?:${N}M(?:${N}D)?)?)(?:${DURATION_TIME})?|${DURATION_TIME}|${N}W)`,
  uuid: "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
  email: EMAIL,
  "idn-email": EMAIL,
  ipv4: String.raw`${OCTET}\.${OCTET}\.${OCTET}\.${OCTET}`,
  "ip-address": String.raw`${OCTET}\.${OCTET}\.${OCTET}\.${OCTET}`,
  ipv6: "[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}){7}",
  hostname: HOSTNAME,
  "idn-hostname": HOSTNAME,
  "host-name": HOSTNAME,
  uri: URI,
  iri: URI,
  "uri-reference": `(?:${URI})|${RELATIVE_REF}`,
  "iri-reference": `(?:${URI})|${RELATIVE_REF}`,
  "json-pointer": JSON_POINTER,
  "relative-json-pointer": String.raw`(?:0|[1-9]\d*)(?:#|${JSON_POINTER})`,
  byte: "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?",
  regex: regexFormat(),
};

const formatTrees = new Map<SupportedFormat, RegexNode>();

/** The tree of the strings `pattern` (anchors at its ends optional) fully matches. */
function fullMatchTree(pattern: string): RegexNode {
  const alternatives = splitAnchors(parseRegex(pattern)).map((a) => a.node);
  return alternatives.length === 1 ? alternatives[0]! : { type: "alt", items: alternatives };
}

/** The parsed (full-match) tree of a format's pattern; parsed once per process. */
export function formatTree(format: SupportedFormat): RegexNode {
  let tree = formatTrees.get(format);
  if (tree === undefined) {
    tree = fullMatchTree(FORMAT_PATTERNS[format]);
    formatTrees.set(format, tree);
  }
  return tree;
}

const COMPACT_LABEL = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,18}[a-zA-Z0-9])?";
const COMPACT_HOSTNAME = String.raw`${COMPACT_LABEL}(?:\.${COMPACT_LABEL}){0,4}`;
/**
 * Narrower patterns of the formats whose exact automata are large (they count label lengths up to 63): labels
 * of at most 20 characters and local parts of at most 32. Used where a format is intersected with other
 * constraints, never where it is negated.
 */
const COMPACT_PATTERNS: Partial<Record<SupportedFormat, string>> = {
  hostname: COMPACT_HOSTNAME,
  "idn-hostname": COMPACT_HOSTNAME,
  "host-name": COMPACT_HOSTNAME,
  email: `[a-zA-Z0-9.!#$%&'*+/=?^_\`{|}~-]{1,32}@${COMPACT_HOSTNAME}`,
  "idn-email": `[a-zA-Z0-9.!#$%&'*+/=?^_\`{|}~-]{1,32}@${COMPACT_HOSTNAME}`,
};

const formatDfas = new Map<string, Dfa>();

/**
 * The trimmed, minimal DFA of a format's strings, built once per process; with `compact`, of its narrower
 * pattern where it has one (for intersections, where the exact automaton would cost too much), else of the
 * format itself. Throws `AutomatonTooLarge`.
 */
export function formatDfa(format: SupportedFormat, compact = false): Dfa {
  const pattern = compact ? (COMPACT_PATTERNS[format] ?? FORMAT_PATTERNS[format]) : FORMAT_PATTERNS[format];
  let dfa = formatDfas.get(pattern);
  if (dfa === undefined) {
    dfa = regexDfa(fullMatchTree(pattern));
    formatDfas.set(pattern, dfa);
  }
  return dfa;
}

/**
 * Builds every format's automata ahead of use, one format per event-loop turn (about 0.5 s of CPU in all),
 * so the first request that intersects or negates a format does not pay for it. Resolves when done.
 */
export async function warmFormatAutomata(): Promise<void> {
  for (const format of SUPPORTED_FORMATS) {
    await new Promise((resolve) => setImmediate(resolve));
    formatDfa(format);
    formatDfa(format, true);
  }
}

/**
 * Adds the rule for `format` and returns its name. The rule matches the string content only (no quotes),
 * written in JSON string mode (a `"` or `\` a format allows is escaped).
 */
export function formatRule(b: GbnfBuilder, format: SupportedFormat): string {
  return b.fixed(`fmt-${format}`, () =>
    regexTreeExpression(b, formatTree(format), { mode: "json", hint: `fmt-${format}` }),
  );
}

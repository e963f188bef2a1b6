/**
 * Exact GBNF for bounded integers and decimal numbers. Integer ranges are decomposed digit by digit like
 * llama.cpp's `_build_min_max_int` (`common/json-schema-to-grammar.cpp`); decimal numbers with integer-valued
 * bounds are split into (integer-part range, fraction kind) pieces, so `minimum`/`maximum`/`exclusive*` are
 * enforced exactly. Bounded numbers are written without exponent.
 */

/** Most digits of an unbounded integer part (as llama.cpp's `integral-part`: 16 digits). */
export const MAX_INT_DIGITS = 16;

const lit = (s: string): string => `"${s}"`;
const digitClass = (from: string, to: string): string => (from === to ? lit(from) : `[${from}-${to}]`);
/** `"a" X`, merging into one literal when X is a literal too. */
const prefixed = (digit: string, rest: string): string =>
  /^"[0-9]+"$/.test(rest) ? lit(digit + rest.slice(1, -1)) : `${lit(digit)} ${wrap(rest)}`;
const nextDigit = (d: string, by: number): string => String.fromCharCode(d.charCodeAt(0) + by);
const anyDigits = (n: number): string => (n === 1 ? "[0-9]" : `[0-9]{${n}}`);

/** Equal-length digit strings `a <= b`: an expression matching every digit string of that length in [a, b]. */
function sameLengthRange(a: string, b: string): string {
  if (a === b) return lit(a);
  let i = 0;
  while (a[i] === b[i]) i++;
  const prefix = i > 0 ? `${lit(a.slice(0, i))} ` : "";
  const x = a[i]!;
  const y = b[i]!;
  const rest = a.length - i - 1;
  if (rest === 0) return `${prefix}${digitClass(x, y)}`;
  const aRest = a.slice(i + 1);
  const bRest = b.slice(i + 1);
  const zeros = "0".repeat(rest);
  const nines = "9".repeat(rest);
  const lowFull = aRest === zeros;
  const highFull = bRest === nines;
  const alts: string[] = [];
  if (!lowFull) alts.push(prefixed(x, sameLengthRange(aRest, nines)));
  const from = lowFull ? x : nextDigit(x, 1);
  const to = highFull ? y : nextDigit(y, -1);
  if (from <= to) alts.push(`${digitClass(from, to)} ${anyDigits(rest)}`);
  if (!highFull) alts.push(prefixed(y, sameLengthRange(zeros, bRest)));
  const body = alts.length === 1 ? alts[0]! : `(${alts.join(" | ")})`;
  return `${prefix}${body}`;
}

const wrap = (expr: string): string => (/\s/.test(expr) && !/^\(.*\)$/.test(expr) ? `(${expr})` : expr);

/**
 * Canonical decimal integers (no sign, no leading zero) in `[lo, hi]`; `hi = null` means any value with at
 * most {@link MAX_INT_DIGITS} digits (or as many as `lo` has). Returns an expression (alternatives joined by
 * ` | `), or null when the range is empty. Example: `intRange(5n, 12n)` → `[5-9] | "1" [0-2]`.
 */
export function intRange(lo: bigint, hi: bigint | null): string | null {
  if (lo < 0n) throw new RangeError("intRange takes non-negative bounds");
  if (hi !== null && hi < lo) return null;
  const loText = lo.toString();
  const alts: string[] = [];
  if (hi === null) {
    alts.push(sameLengthRange(loText, "9".repeat(loText.length)));
    if (loText.length < MAX_INT_DIGITS) {
      const more =
        loText.length === MAX_INT_DIGITS - 1
          ? `{${loText.length}}`
          : `{${loText.length},${MAX_INT_DIGITS - 1}}`;
      alts.push(`[1-9] [0-9]${more}`);
    }
  } else {
    const hiText = hi.toString();
    for (let digits = loText.length; digits <= hiText.length; digits++) {
      const from = digits === loText.length ? loText : `1${"0".repeat(digits - 1)}`;
      const to = digits === hiText.length ? hiText : "9".repeat(digits);
      alts.push(sameLengthRange(from, to));
    }
  }
  return alts.map((alt) => alt.replace(/^\((.*)\)$/, "$1")).join(" | ");
}

/**
 * JSON integers in `[min, max]` (either may be null = unbounded; unbounded magnitudes have at most 16
 * digits). Returns a GBNF expression or null when no integer fits. Example: `[-3, 2]` → `"-" [1-3] | [0-2]`.
 */
export function integerRange(min: bigint | null, max: bigint | null): string | null {
  if (min !== null && max !== null && max < min) return null;
  const alts: string[] = [];
  if (min === null || min < 0n) {
    const magLo = max !== null && max < 0n ? -max : 1n;
    const magHi = min === null ? null : -min;
    const neg = intRange(magLo, magHi);
    if (neg !== null) alts.push(`"-" ${wrap(neg)}`);
  }
  if (max === null || max >= 0n) {
    const pos = intRange(min !== null && min > 0n ? min : 0n, max);
    if (pos !== null) alts.push(pos);
  }
  return alts.length === 0 ? null : alts.join(" | ");
}

/** One bound of a number range: an integer value and whether it is exclusive. */
export type NumberBound = { value: bigint; exclusive: boolean };

const FRACTION = {
  any: '("." [0-9]{1,16})?',
  zero: '("." "0"{1,16})?',
  nonzero: '"." "0"{0,15} [1-9] [0-9]{0,15}',
};

/** Magnitudes `m` (non-negative decimals `I(.F)?`) with `lo <(=) m <(=) hi`; alternatives, empty if none. */
function magnitudes(lo: NumberBound, hi: NumberBound | null): string[] {
  if (hi !== null && (hi.value < lo.value || (hi.value === lo.value && (lo.exclusive || hi.exclusive))))
    return [];
  const alts: string[] = [];
  if (lo.exclusive) alts.push(`${lit(lo.value.toString())} ${FRACTION.nonzero}`);
  const intLo = lo.exclusive ? lo.value + 1n : lo.value;
  if (hi === null) {
    alts.push(`${wrap(intRange(intLo, null)!)} ${FRACTION.any}`);
    return alts;
  }
  const whole = intRange(intLo, hi.value - 1n);
  if (whole !== null) alts.push(`${wrap(whole)} ${FRACTION.any}`);
  if (!hi.exclusive) alts.push(`${lit(hi.value.toString())} ${FRACTION.zero}`);
  return alts;
}

/**
 * JSON numbers (no exponent) in the range given by integer-valued bounds (null = unbounded). Negative values
 * are written with `-` and a non-zero magnitude (so never `-0`). Returns a GBNF expression or null if the
 * range is empty. Example: `{min: 0 inclusive, max: 1 inclusive}` → `"0" ("." [0-9]{1,16})? | "1" ("." "0"{1,16})?`.
 */
export function numberRange(min: NumberBound | null, max: NumberBound | null): string | null {
  const alts: string[] = [];
  if (min === null || min.value < 0n) {
    const magLo: NumberBound =
      max !== null && max.value < 0n
        ? { value: -max.value, exclusive: max.exclusive }
        : { value: 0n, exclusive: true };
    const magHi: NumberBound | null = min === null ? null : { value: -min.value, exclusive: min.exclusive };
    const neg = magnitudes(magLo, magHi);
    if (neg.length > 0) alts.push(`"-" ${neg.length === 1 ? wrap(neg[0]!) : `(${neg.join(" | ")})`}`);
  }
  if (max === null || max.value > 0n || (max.value === 0n && !max.exclusive)) {
    const lo: NumberBound = min !== null && min.value >= 0n ? min : { value: 0n, exclusive: false };
    alts.push(...magnitudes(lo, max));
  }
  return alts.length === 0 ? null : alts.join(" | ");
}

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

/**
 * One bound of a number range: the decimal `value / 10^scale` (scale default 0, at most
 * {@link MAX_FRACTION_DIGITS}) and whether it is exclusive. Example: `-0.25` → `{value: -25n, scale: 2}`.
 */
export type NumberBound = { value: bigint; exclusive: boolean; scale?: number };

/** Most fraction digits of a bounded number (and of a bound). */
export const MAX_FRACTION_DIGITS = 16;

const FRACTION = {
  any: '("." [0-9]{1,16})?',
  zero: '("." "0"{1,16})?',
  /** A fraction with a non-zero digit, written without trailing zeros (every such value has that form). */
  nonzero: '"." [0-9]{0,15} [1-9]',
};

/**
 * Most significant digits of a non-integer (integer part, counting a lone `0`, plus fraction digits): a
 * decimal of at most 15 significant digits reads back from its double unchanged, so its double is not an
 * integer (`3000000000005.0000000000000005` is the double 3000000000005).
 */
export const MAX_NON_INTEGER_DIGITS = 15;

/** A fraction of 1..n digits with a non-zero digit, written ending in one; null when n < 1. */
const nonzeroFraction = (n: number): string | null =>
  n < 1 ? null : n === 1 ? '"." [1-9]' : `"." [0-9]{0,${n - 1}} [1-9]`;

/** How many fraction digits a non-integer with integer part `int` may have ({@link MAX_NON_INTEGER_DIGITS}). */
const nonIntegerFractionDigits = (int: bigint): number => MAX_NON_INTEGER_DIGITS - int.toString().length;

/** A magnitude bound: integer part, fraction digits (no trailing zero), exclusive. */
type Magnitude = { int: bigint; frac: string; exclusive: boolean };
/** A bound on the value `0.d` of remaining fraction digits; null = no bound. */
type FractionBound = { digits: string; exclusive: boolean } | null;

const compareMagnitudes = (a: Magnitude, b: Magnitude): number =>
  a.int !== b.int ? (a.int < b.int ? -1 : 1) : a.frac === b.frac ? 0 : a.frac < b.frac ? -1 : 1;

/**
 * Digit strings of length 0..n whose value `0.s` lies within `lo`/`hi`; null when none. With `nonzero`, the
 * string must contain a non-zero digit (where no bound is left, it is written ending in one).
 */
function fractionDigits(
  lo: FractionBound,
  hi: FractionBound,
  n: number,
  nonEmpty: boolean,
  nonzero: boolean,
): string | null {
  if (lo === null && hi === null) {
    if (nonzero) return n === 0 ? null : n === 1 ? "[1-9]" : `[0-9]{0,${n - 1}} [1-9]`;
    return nonEmpty ? `[0-9]{1,${n}}` : n === 0 ? '""' : `[0-9]{0,${n}}`;
  }
  const emptyOk =
    !nonEmpty &&
    !nonzero &&
    (lo === null || (lo.digits === "" && !lo.exclusive)) &&
    (hi === null || hi.digits !== "" || !hi.exclusive);
  if (n === 0) return emptyOk ? '""' : null;
  const groups = new Map<string, { digits: number[]; rest: string | null }>();
  for (let c = 0; c <= 9; c++) {
    let nextLo: FractionBound = null;
    if (lo !== null) {
      const d = lo.digits === "" ? 0 : Number(lo.digits[0]);
      if (c < d) continue;
      if (c === d) {
        const rest = lo.digits.slice(1);
        nextLo = rest === "" && !lo.exclusive ? null : { digits: rest, exclusive: lo.exclusive };
      }
    }
    let nextHi: FractionBound = null;
    if (hi !== null) {
      if (hi.digits === "" && hi.exclusive) continue;
      const d = hi.digits === "" ? 0 : Number(hi.digits[0]);
      if (c > d) continue;
      if (c === d) nextHi = { digits: hi.digits.slice(1), exclusive: hi.exclusive };
    }
    const nextNonzero = nonzero && c === 0;
    const key = JSON.stringify([nextLo, nextHi, nextNonzero]);
    let group = groups.get(key);
    if (group === undefined) {
      group = { digits: [], rest: fractionDigits(nextLo, nextHi, n - 1, false, nextNonzero) };
      groups.set(key, group);
    }
    group.digits.push(c);
  }
  const alts: string[] = [];
  for (const { digits, rest } of groups.values()) {
    if (rest === null) continue;
    const first = digits.length === 1 ? lit(String(digits[0])) : `[${digits.join("")}]`;
    alts.push(rest === '""' ? first : `${first} ${wrap(rest)}`);
  }
  if (alts.length === 0) return emptyOk ? '""' : null;
  const body = alts.length === 1 ? alts[0]! : `(${alts.join(" | ")})`;
  return emptyOk ? `${body.startsWith("(") ? body : `(${body})`}?` : body;
}

/**
 * The fraction part (`""` or `"." digits`) of a magnitude with integer part `int`, within `lo`/`hi`; with
 * `nonzero`, only fractions with a non-zero digit (non-integers, at most {@link MAX_NON_INTEGER_DIGITS}
 * significant digits in all).
 */
function fractionPart(lo: FractionBound, hi: FractionBound, nonzero: boolean, int: bigint): string | null {
  const n = nonzero ? nonIntegerFractionDigits(int) : MAX_FRACTION_DIGITS;
  if (lo !== null && lo.digits === "" && !lo.exclusive) lo = null;
  if (lo === null && hi === null) return nonzero ? nonzeroFraction(n) : FRACTION.any;
  if (lo !== null && lo.digits === "" && hi === null) return nonzero ? nonzeroFraction(n) : FRACTION.nonzero;
  if (lo === null && hi !== null && hi.digits === "" && !hi.exclusive) return nonzero ? null : FRACTION.zero;
  if (n < 1) return null;
  const digits = fractionDigits(lo, hi, n, true, nonzero);
  const zeroOk = !nonzero && lo === null && (hi === null || hi.digits !== "" || !hi.exclusive);
  if (digits === null) return zeroOk ? '""' : null;
  return zeroOk ? `("." ${wrap(digits)})?` : `"." ${wrap(digits)}`;
}

/**
 * Magnitudes `m` (non-negative decimals `I(.F)?`) with `lo <(=) m <(=) hi`, only non-integers when
 * `nonzero`; alternatives, empty if none.
 */
function magnitudes(lo: Magnitude, hi: Magnitude | null, nonzero: boolean): string[] {
  if (hi !== null) {
    const order = compareMagnitudes(lo, hi);
    if (order > 0 || (order === 0 && (lo.exclusive || hi.exclusive))) return [];
  }
  const fromLo: FractionBound = { digits: lo.frac, exclusive: lo.exclusive };
  const toHi: FractionBound = hi === null ? null : { digits: hi.frac, exclusive: hi.exclusive };
  const withInt = (int: bigint, fraction: string | null): string[] =>
    fraction === null ? [] : [fraction === '""' ? lit(int.toString()) : `${lit(int.toString())} ${fraction}`];
  if (hi !== null && hi.int === lo.int) return withInt(lo.int, fractionPart(fromLo, toHi, nonzero, lo.int));
  const alts: string[] = [];
  const loMerged = lo.frac === "" && !lo.exclusive;
  if (!loMerged) alts.push(...withInt(lo.int, fractionPart(fromLo, null, nonzero, lo.int)));
  const intLo = loMerged ? lo.int : lo.int + 1n;
  const intHi = hi === null ? null : hi.int - 1n;
  if (!nonzero) {
    const whole = intRange(intLo, intHi);
    if (whole !== null) alts.push(`${wrap(whole)} ${FRACTION.any}`);
  } else {
    // Non-integers: fewer fraction digits as the integer part grows (one range per length).
    for (let k = 1; k < MAX_NON_INTEGER_DIGITS; k++) {
      const from = k === 1 ? intLo : intLo > 10n ** BigInt(k - 1) ? intLo : 10n ** BigInt(k - 1);
      const top = 10n ** BigInt(k) - 1n;
      const part = intRange(from, intHi === null || intHi > top ? top : intHi);
      if (part !== null) alts.push(`${wrap(part)} ${nonzeroFraction(MAX_NON_INTEGER_DIGITS - k)}`);
    }
  }
  if (hi !== null) alts.push(...withInt(hi.int, fractionPart(null, toHi, nonzero, hi.int)));
  return alts;
}

/** The magnitude of a bound (or of its negation when `negate`), as integer part and fraction digits. */
function magnitudeOf(bound: NumberBound, negate: boolean): Magnitude {
  const scale = bound.scale ?? 0;
  if (scale > MAX_FRACTION_DIGITS)
    throw new RangeError(`bounds with more than ${MAX_FRACTION_DIGITS} decimals`);
  const v = negate ? -bound.value : bound.value;
  const abs = v < 0n ? -v : v;
  const unit = 10n ** BigInt(scale);
  const frac = scale === 0 ? "" : (abs % unit).toString().padStart(scale, "0").replace(/0+$/, "");
  return { int: abs / unit, frac, exclusive: bound.exclusive };
}

const sign = (b: NumberBound): number => (b.value < 0n ? -1 : b.value > 0n ? 1 : 0);

/**
 * JSON numbers (no exponent, at most {@link MAX_FRACTION_DIGITS} fraction digits) in the range given by
 * decimal bounds (null = unbounded; an unbounded integer part has at most {@link MAX_INT_DIGITS} digits).
 * With `nonInteger`, only numbers with a non-zero fraction digit (written without trailing zeros). Negative
 * values are written with `-` and a non-zero magnitude (so never `-0`). Returns a GBNF expression or null if
 * the range is empty; throws RangeError for a bound with more fraction digits than that. Example:
 * `{min: 0 inclusive, max: 1 inclusive}` → `"0" ("." [0-9]{1,16})? | "1" ("." "0"{1,16})?`.
 */
export function numberRange(
  min: NumberBound | null,
  max: NumberBound | null,
  nonInteger = false,
): string | null {
  const alts: string[] = [];
  if (min === null || sign(min) < 0) {
    const magLo: Magnitude =
      max !== null && sign(max) < 0 ? magnitudeOf(max, true) : { int: 0n, frac: "", exclusive: true };
    const magHi = min === null ? null : magnitudeOf(min, true);
    const neg = magnitudes(magLo, magHi, nonInteger);
    if (neg.length > 0) alts.push(`"-" ${neg.length === 1 ? wrap(neg[0]!) : `(${neg.join(" | ")})`}`);
  }
  if (max === null || sign(max) > 0 || (sign(max) === 0 && !max.exclusive)) {
    const lo: Magnitude =
      min !== null && sign(min) >= 0 ? magnitudeOf(min, false) : { int: 0n, frac: "", exclusive: false };
    alts.push(...magnitudes(lo, max === null ? null : magnitudeOf(max, false), nonInteger));
  }
  return alts.length === 0 ? null : alts.join(" | ");
}

/** A decimal `value / 10^scale` (scale ≥ 0), e.g. `{value: -25n, scale: 2}` for -0.25. */
export type Decimal = { value: bigint; scale: number };

/**
 * The exact decimal that the shortest round-trip spelling of the finite double `x` denotes (`0.1` is one
 * tenth, not the nearest double's binary value; `1e21` is 10^21). This is what a schema author wrote.
 */
export function shortestDecimal(x: number): Decimal {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(x));
  if (m === null) throw new RangeError(`not a finite number: ${x}`);
  let digits = m[2]! + (m[3] ?? "");
  let scale = (m[3] ?? "").length - Number(m[4] ?? 0);
  if (scale < 0) {
    digits += "0".repeat(-scale);
    scale = 0;
  }
  const magnitude = BigInt(digits);
  return { value: m[1] === "-" ? -magnitude : magnitude, scale };
}

/** The decimal `d` as JSON number text (no exponent), e.g. `-0.25`. */
export function decimalText(d: Decimal): string {
  const abs = (d.value < 0n ? -d.value : d.value).toString().padStart(d.scale + 1, "0");
  const text = d.scale === 0 ? abs : `${abs.slice(0, -d.scale)}.${abs.slice(-d.scale)}`;
  return d.value < 0n ? `-${text}` : text;
}

/** `d` rounded to at most `scale` decimals, upwards (towards +∞) or downwards. */
export function roundDecimal(d: Decimal, scale: number, up: boolean): Decimal {
  if (d.scale <= scale) return d;
  const unit = 10n ** BigInt(d.scale - scale);
  let q = d.value / unit; // truncated towards zero
  const exact = q * unit === d.value;
  if (!exact && up && d.value > 0n) q += 1n;
  if (!exact && !up && d.value < 0n) q -= 1n;
  return { value: q, scale };
}

const bits = new DataView(new ArrayBuffer(8));

/** The double next to the finite double `x` towards +∞ (`up`) or −∞. */
export function adjacentDouble(x: number, up: boolean): number {
  if (x === 0) return up ? Number.MIN_VALUE : -Number.MIN_VALUE;
  bits.setFloat64(0, x);
  const raw = bits.getBigUint64(0);
  // For a positive x the bit pattern grows with the value; for a negative one it shrinks.
  bits.setBigUint64(0, up === x > 0 ? raw + 1n : raw - 1n);
  return bits.getFloat64(0);
}

/**
 * A bound of a number range for the double bound `value` of a schema (a lower bound when `lower`) such
 * that every decimal the range grammar writes (at most {@link MAX_FRACTION_DIGITS} fraction digits) satisfies
 * it both as an exact decimal and as the double a validator parses it to (ajv compares doubles; rounding to
 * the nearest double is monotonic, so `x >= value` holds for the double of any `x` at or above the bound).
 * An exclusive bound stays exclusive when the first decimals past it do not round back onto it; otherwise
 * (e.g. `exclusiveMinimum: 1`: `1.0000000000000001` reads as 1) it becomes the inclusive bound at the next
 * double (narrower by less than one double step). A bound with more decimals than the grammar writes is
 * rounded inwards. Example: `(0.5, true, true)` → `{value: 5n, scale: 1, exclusive: true}`.
 */
export function doubleSafeBound(value: number, exclusive: boolean, lower: boolean): NumberBound {
  let d = shortestDecimal(value);
  if (exclusive) {
    if (d.scale <= MAX_FRACTION_DIGITS) {
      const unit = 10n ** BigInt(MAX_FRACTION_DIGITS - d.scale);
      const next = { value: d.value * unit + (lower ? 1n : -1n), scale: MAX_FRACTION_DIGITS };
      if (Number(decimalText(next)) !== value) return { ...d, exclusive: true };
    }
    d = shortestDecimal(adjacentDouble(value, lower));
  }
  return { ...roundDecimal(d, MAX_FRACTION_DIGITS, lower), exclusive: false };
}

/**
 * The tightest integer bound that the double bound `value` of a schema allows (a lower bound when `lower`):
 * every integer at or beyond it satisfies the bound exactly and as the double a validator parses it to.
 * Bounds beyond ±2^53 are used at their exact binary value (`maximum: 18446744073709552000` is 2^64): an
 * integer n ≤ 2^64 parses to a double ≤ 2^64, since rounding is monotonic. An exclusive bound whose
 * neighbouring integer parses back onto it (only beyond ±2^53) moves to the next double (narrower).
 * Example: `(2.5, false, true)` → `3n`; `(7, true, false)` → `6n`.
 */
export function integerBound(value: number, exclusive: boolean, lower: boolean): bigint {
  if (!exclusive) return BigInt(lower ? Math.ceil(value) : Math.floor(value));
  const next = lower ? BigInt(Math.floor(value)) + 1n : BigInt(Math.ceil(value)) - 1n;
  if (lower ? Number(next) > value : Number(next) < value) return next;
  return BigInt(adjacentDouble(value, lower)); // |value| > 2^53: the next double is an integer
}

/**
 * `multipleOf` on integers and numbers. What validators check is `x / m` being an integer in doubles (ajv:
 * `(x / m) === parseInt(x / m)`; Python's jsonschema alike), which is not the exact condition: with
 * `multipleOf: 0.01`, `0.07 / 0.01` is `7.000000000000001` and ajv refuses 0.07. So the grammar writes only
 * the multiples that pass both readings:
 * - `m` is read as the exact decimal it was written as, `N / (2^a · 5^b)` in lowest terms. Its multiples that
 *   are exact doubles are the multiples of `L = N / 2^a` (`0.01` → 0.25, `0.1` → 0.5, `0.5` → 0.5, `12` → 12);
 *   on integers, the multiples of N. These are written exactly: an integer part, and a fraction among the
 *   `2^a` fractions `j / 2^a` whose integer part satisfies `I · 2^a + j ≡ 0 (mod N)`.
 * - Such an `x` is a double, and `x / m` rounds to the exact quotient `q` when the double nearest to `m` is
 *   within 2^-54 of `m` (relative): `q / (1 + δ)` then lies within half a step of `q` (`0.01`, `0.1`, `0.05`,
 *   `0.25`, integers... pass). `|x|·2^a` stays below 2^53 (exact) and `q` below 10^20 (so ajv's `parseInt`
 *   reads it back): `|x|` is below the largest power of ten that keeps both (10^15 for most `m`).
 * - Where that does not hold (`0.07`, `1.1`: their doubles are farther from them), or the fractions would
 *   need more than {@link MAX_FRACTION_BITS} binary digits (`m` below 10^-6), the multiples nearest to 0
 *   within the bounds that pass the double check (computed here, as validators do) are listed instead.
 * So it is a narrowing where `m` is not a dyadic fraction (0.07 is a multiple of 0.01 that is not written)
 * and beyond 2^53, and exact otherwise. Bounds (`minimum`, ... through {@link numberBounds} /
 * {@link integerBounds}) cut the integer parts exactly; a residue condition (`N > 1`) is written as digit
 * rules tracking the remainder mod N while they fit in {@link MAX_RESIDUE_RULES}, else the multiples nearest
 * to 0 within the bounds are listed (at most {@link MAX_LISTED_MULTIPLES}; a narrowing when there are more).
 */
import type { CompileContext } from "./context.ts";
import type { SchemaObject } from "./keywords.ts";
import { decimalText, intRange, type NumberBound, shortestDecimal } from "./numbers.ts";
import { integerBody, integerBounds, numberBounds } from "./scalars.ts";

/**
 * Most multiples listed, where the digit rules of a remainder condition would be too many or where each
 * multiple must pass the double check one by one.
 */
export const MAX_LISTED_MULTIPLES = 256;

/** Most candidates {@link listedMultiples} tries. */
const MAX_LISTING_STEPS = 4096n;

/** Most digit rules (`json-mod-N-…`) one `multipleOf` may write for its remainder condition. */
export const MAX_RESIDUE_RULES = 256;
/** Most calls one set of residue rules may make while it searches (a huge `multipleOf` such as 2^60). */
const MAX_RESIDUE_STEPS = 20_000;

/** Most fraction digits a multiple may need (`2^a` fractions; 0.000001 → a = 6, 64 fractions). */
const MAX_FRACTION_BITS = 6;

const TWO_53 = 2n ** 53n;

/** Thrown by {@link ResidueRules} past {@link MAX_RESIDUE_RULES}. */
const TOO_MANY_RULES = new Error("too many residue rules");

/**
 * The multiples a grammar may write for `multipleOf: m` (a positive finite double): they are `t · N / 2^a`
 * for integers t (only `t · N` on integers). `limit` bounds `|x| · 2^a` (exclusive; `2^a` times a power of
 * ten).
 */
export type MultipleStep = {
  n: bigint;
  a: number;
  limit: bigint;
  /**
   * True when every such multiple passes validators' double check and has at most
   * {@link MAX_FRACTION_BITS} fraction digits (a grammar writes them all); false when each must be checked
   * (they are then listed).
   */
  allPass: boolean;
};

const gcd = (x: bigint, y: bigint): bigint => {
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
};

/** The exact binary value of a positive finite double, as `mantissa · 2^exponent`. */
function binaryValue(x: number): { mantissa: bigint; exponent: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  return biased === 0
    ? { mantissa: fraction, exponent: -1074 }
    : { mantissa: fraction | (1n << 52n), exponent: biased - 1075 };
}

/**
 * {@link MultipleStep} of `multipleOf: m` for integers (`integer`) or numbers, or a string saying why it is
 * refused. Example: `0.01` → `{n: 1n, a: 2, limit: 4 · 10^15}` (quarters below 10^15), `12` →
 * `{n: 12n, a: 0, limit: 10^15}`.
 */
export function multipleStep(m: number, integer: boolean): MultipleStep | string {
  const { value: n0, scale: k } = shortestDecimal(m);
  const ten = 10n ** BigInt(k);
  const g = gcd(n0, ten);
  const n = n0 / g;
  let denominator = ten / g;
  let a = 0;
  while (denominator % 2n === 0n) {
    denominator /= 2n;
    a++;
  }
  if (integer) a = 0;
  // δ = (double(m) − m) / m, as num / den: |δ| ≤ 2^-54 (δ < 0: |δ|·(1 + 2^-54) ≤ 2^-54) keeps x / m on q.
  const { mantissa, exponent } = binaryValue(m);
  const num =
    exponent >= 0
      ? mantissa * 2n ** BigInt(exponent) * ten - n0
      : mantissa * ten - n0 * 2n ** BigInt(-exponent);
  const den = exponent >= 0 ? n0 : n0 * 2n ** BigInt(-exponent);
  const safe = num === 0n || (num > 0n ? num * 2n ** 54n <= den : -num * (2n ** 54n + 1n) <= den);
  // |x|·2^a < 2^53 (x is a double) and x / m < 10^20 (ajv's parseInt reads the quotient back); |x| is
  // kept below the largest power of ten within both, for a short grammar.
  const unit = 2n ** BigInt(a);
  const quotientLimit = (n0 * unit * 10n ** 20n) / ten;
  const most = quotientLimit < TWO_53 ? quotientLimit : TWO_53;
  let power = 1n;
  while (power * 10n * unit <= most) power *= 10n;
  if (power === 1n) return "a multipleOf too small for doubles";
  return { n, a, limit: power * unit, allPass: safe && a <= MAX_FRACTION_BITS };
}

/** `x` floor-divided by the positive `d`. */
const floorDiv = (x: bigint, d: bigint): bigint => (x >= 0n ? x / d : -((-x + d - 1n) / d));
/** `x` ceiling-divided by the positive `d`. */
const ceilDiv = (x: bigint, d: bigint): bigint => -floorDiv(-x, d);
/** `x` mod the positive `n`, in [0, n). */
const mod = (x: bigint, n: bigint): bigint => ((x % n) + n) % n;

/** Inclusive integer bounds on `x · 2^a` from a number range's decimal bounds. */
function scaledBounds(
  lo: NumberBound | null,
  hi: NumberBound | null,
  a: number,
): [bigint | null, bigint | null] {
  const scaled = (b: NumberBound | null, lower: boolean): bigint | null => {
    if (b === null) return null;
    const unit = 10n ** BigInt(b.scale ?? 0);
    const v = b.value * 2n ** BigInt(a);
    if (lower) return b.exclusive ? floorDiv(v, unit) + 1n : ceilDiv(v, unit);
    return b.exclusive ? ceilDiv(v, unit) - 1n : floorDiv(v, unit);
  };
  return [scaled(lo, true), scaled(hi, false)];
}

/**
 * Digit rules for a remainder condition mod `n`: `free(r, t)` is a rule (or expression) for the `r`-digit
 * strings (leading zeros allowed) whose value is `t` mod n. Rule bodies are collected in `rules` (name → body)
 * and counted, so that the caller can give up before writing any.
 */
class ResidueRules {
  readonly rules = new Map<string, string>();
  /** Rule names with no strings (remembered, so dead ends are not explored again). */
  private readonly empty = new Set<string>();
  /** Calls so far; past {@link MAX_RESIDUE_STEPS} the rules give up like past {@link MAX_RESIDUE_RULES}. */
  private steps = 0;
  /** The least k with 10^k ≡ 0 (mod n), or null (n has another prime factor than 2 and 5). */
  private readonly zeroPower: number | null;

  constructor(private readonly n: bigint) {
    let k = 0;
    let p = 1n % n;
    while (p !== 0n && k < 64) {
      p = (p * 10n) % n;
      k++;
    }
    this.zeroPower = p === 0n ? k : null;
  }

  /** The `r`-digit strings ≡ t (mod n); null when there are none. */
  free(r: number, t: bigint): string | null {
    if (r === 0) return t === 0n ? '""' : null;
    // Past the digits that decide divisibility by a divisor of 10^k, any digits may come first.
    if (this.zeroPower !== null && r > this.zeroPower) {
      const tail = this.free(this.zeroPower, t);
      if (tail === null) return null;
      const head = r - this.zeroPower === 1 ? "[0-9]" : `[0-9]{${r - this.zeroPower}}`;
      return tail === '""' ? head : `${head} ${tail}`;
    }
    const name = `json-mod-${this.n}-${r}-${t}`;
    if (this.rules.has(name)) return name;
    if (this.empty.has(name)) return null;
    if (this.rules.size >= MAX_RESIDUE_RULES || ++this.steps > MAX_RESIDUE_STEPS) throw TOO_MANY_RULES;
    this.rules.set(name, ""); // reserved (a cycle cannot happen: r decreases)
    const place = 10n ** BigInt(r - 1) % this.n;
    const byTarget = new Map<string, number[]>();
    for (let d = 0; d <= 9; d++) {
      const rest = this.free(r - 1, mod(t - BigInt(d) * place, this.n));
      if (rest === null) continue;
      byTarget.set(rest, [...(byTarget.get(rest) ?? []), d]);
    }
    if (byTarget.size === 0) {
      this.rules.delete(name);
      this.empty.add(name);
      return null;
    }
    const alts = [...byTarget].map(([rest, digits]) => {
      const cls = digits.length === 1 ? `"${digits[0]}"` : `[${digits.join("")}]`;
      return rest === '""' ? cls : `${cls} ${rest}`;
    });
    this.rules.set(name, alts.join(" | "));
    return name;
  }

  /**
   * Equal-length digit strings in [lo, hi] (as strings) whose value is t mod n; null when none. The first
   * digit is not constrained here (callers pass ranges without leading zeros).
   */
  range(lo: string, hi: string, t: bigint): string | null {
    if (++this.steps > MAX_RESIDUE_STEPS) throw TOO_MANY_RULES;
    if (lo === hi) return mod(BigInt(lo), this.n) === t ? `"${lo}"` : null;
    const r = lo.length - 1;
    const x = Number(lo[0]);
    const y = Number(hi[0]);
    const place = 10n ** BigInt(r) % this.n;
    const alts: string[] = [];
    const push = (digits: number[], rest: string | null): void => {
      if (rest === null || digits.length === 0) return;
      const cls = digits.length === 1 ? `"${digits[0]}"` : `[${digits.join("")}]`;
      alts.push(rest === '""' ? cls : `${cls} ${wrapped(rest)}`);
    };
    const need = (d: number): bigint => mod(t - BigInt(d) * place, this.n);
    if (x === y) {
      push([x], this.range(lo.slice(1), hi.slice(1), need(x)));
    } else {
      const lowFull = /^0*$/.test(lo.slice(1));
      const highFull = /^9*$/.test(hi.slice(1));
      if (!lowFull) push([x], this.range(lo.slice(1), "9".repeat(r), need(x)));
      const byTarget = new Map<string, number[]>();
      for (let d = lowFull ? x : x + 1; d <= (highFull ? y : y - 1); d++) {
        const rest = this.free(r, need(d));
        if (rest !== null) byTarget.set(rest, [...(byTarget.get(rest) ?? []), d]);
      }
      for (const [rest, digits] of byTarget) push(digits, rest);
      if (!highFull) push([y], this.range("0".repeat(r), hi.slice(1), need(y)));
    }
    if (alts.length === 0) return null;
    return alts.length === 1 ? alts[0]! : `(${alts.join(" | ")})`;
  }
}

/** `expr` in parentheses when it has spaces and is not one group already. */
const wrapped = (expr: string): string => (/\s/.test(expr) && !/^\(.*\)$/.test(expr) ? `(${expr})` : expr);

/**
 * Canonical decimal integers in [lo, hi] (0 ≤ lo) that are ≡ t (mod n), as alternatives, with the digit rules
 * they use added to `rules`; null when none.
 */
function congruentRange(lo: bigint, hi: bigint, n: bigint, t: bigint, rules: ResidueRules): string | null {
  if (hi < lo) return null;
  if (n === 1n) return intRange(lo, hi);
  const alts: string[] = [];
  const loText = lo.toString();
  const hiText = hi.toString();
  for (let digits = loText.length; digits <= hiText.length; digits++) {
    const from = digits === loText.length ? loText : `1${"0".repeat(digits - 1)}`;
    const to = digits === hiText.length ? hiText : "9".repeat(digits);
    const expr = rules.range(from, to, t);
    if (expr !== null) alts.push(expr.replace(/^\((.*)\)$/, "$1"));
  }
  return alts.length === 0 ? null : alts.join(" | ");
}

/** The text of `y / 2^a` (y ≥ 0), e.g. `(5n, 2)` → `1.25`. */
function scaledText(y: bigint, a: number): string {
  const text = decimalText({ value: y * 5n ** BigInt(a), scale: a });
  return a === 0 ? text : text.replace(/\.?0+$/, "");
}

/**
 * The grammar of an integer or number schema `s` with `multipleOf` (see the module comment); `nonInteger`:
 * only non-integers (the internal keyword). Throws the compiler's errors: 400 naming `multipleOf` for an `m`
 * refused, "no instance" when no written multiple lies within the bounds.
 */
export function multipleOfBody(
  ctx: CompileContext,
  s: SchemaObject,
  path: string,
  integer: boolean,
  nonInteger: boolean,
): string {
  const m = s.multipleOf as number;
  const step = multipleStep(m, integer);
  if (typeof step === "string")
    ctx.fail(`Unsupported JSON Schema keyword 'multipleOf' at ${path} (${m}: ${step})`);
  const { n, a, limit, allPass } = step as MultipleStep;
  const none = (): never => ctx.unsatisfiable(`no multiple of ${m} at ${path} lies within its bounds.`);
  if (nonInteger && a === 0) none();
  // Every integer is a multiple: the integer grammar (its 16-digit integers x give quotients x / m below
  // 10^20, and any double of 2^52 or more is an integer).
  if (n === 1n && a === 0 && m >= 1e-4) return integerBody(ctx, s, path);
  // Bounds on X = x · 2^a, within ±(limit − 1).
  let lo: bigint | null;
  let hi: bigint | null;
  if (integer) ({ lo, hi } = integerBounds(s));
  else {
    const bounds = numberBounds(s);
    [lo, hi] = scaledBounds(bounds.lo, bounds.hi, a);
  }
  lo = lo === null || lo < 1n - limit ? 1n - limit : lo;
  hi = hi === null || hi > limit - 1n ? limit - 1n : hi;
  if (hi < lo) none();
  if (!allPass) return listedMultiples(lo, hi, n, a, nonInteger, m) ?? none();
  const unit = 2n ** BigInt(a);
  const fractions = [...Array(Number(unit)).keys()].map(BigInt).filter((j) => !nonInteger || j !== 0n);
  // The residue the integer part I needs for fraction j: I · 2^a + j ≡ 0 (mod n), n odd when a > 0.
  const inverse = mod(((n + 1n) / 2n) ** BigInt(a), n); // 1/2 is (n + 1)/2 mod an odd n
  const rules = new ResidueRules(n);
  /** Magnitudes |x| with X in [yLo, yHi] (yLo ≥ 0), as alternatives; null when they need too many rules. */
  const magnitudes = (yLo: bigint, yHi: bigint): string[] | null => {
    const byInteger = new Map<string, string[]>();
    for (const j of fractions) {
      const iLo = ceilDiv(yLo - j, unit);
      const iHi = floorDiv(yHi - j, unit);
      let expr: string | null;
      try {
        expr = congruentRange(iLo < 0n ? 0n : iLo, iHi, n, mod(-j * inverse, n), rules);
      } catch (error) {
        if (error === TOO_MANY_RULES) return null;
        throw error;
      }
      if (expr === null) continue;
      const text = j === 0n ? "" : scaledText(j, a).slice(1); // ".25"
      byInteger.set(expr, [...(byInteger.get(expr) ?? []), text]);
    }
    return [...byInteger].map(([expr, texts]) => {
      const parts = texts.map((t) => (t === "" ? '""' : `"${t}"`));
      const fraction = parts.length === 1 ? (parts[0] === '""' ? "" : parts[0]!) : `(${parts.join(" | ")})`;
      return fraction === "" ? expr : `${wrapped(expr)} ${fraction}`;
    });
  };
  const positive = hi >= 0n ? magnitudes(lo > 0n ? lo : 0n, hi) : [];
  const negative = lo < 0n ? magnitudes(hi < 0n ? -hi : 1n, -lo) : [];
  if (positive !== null && negative !== null) {
    const alts = [...positive];
    if (negative.length > 0)
      alts.unshift(`"-" ${negative.length === 1 ? wrapped(negative[0]!) : `(${negative.join(" | ")})`}`);
    if (alts.length === 0) none();
    for (const [name, body] of rules.rules) ctx.b.fixed(name, body);
    return alts.join(" | ");
  }
  return listedMultiples(lo, hi, n, a, nonInteger, null) ?? none();
}

/**
 * The multiples `X = t · n` in [lo, hi] (X = x · 2^a) nearest to 0, at most {@link MAX_LISTED_MULTIPLES}, as
 * literals (non-integers only with `nonInteger`); with `check` (the `multipleOf`), only those whose double
 * passes validators' check `x / m` integral (at most {@link MAX_LISTING_STEPS} candidates are tried). Null
 * when there are none.
 */
function listedMultiples(
  lo: bigint,
  hi: bigint,
  n: bigint,
  a: number,
  nonInteger: boolean,
  check: number | null,
): string | null {
  const unit = 2n ** BigInt(a);
  const texts: [bigint, string][] = [];
  const take = (x: bigint): void => {
    if (x < lo || x > hi || (nonInteger && x % unit === 0n)) return;
    const text = `${x < 0n ? "-" : ""}${scaledText(x < 0n ? -x : x, a)}`;
    if (check !== null) {
      const q = Number(text) / check;
      if (q !== Number.parseInt(String(q), 10)) return; // ajv's test (Python's jsonschema: int(q) != q)
    }
    texts.push([x, text]);
  };
  // Outwards from the multiple nearest to 0 within [lo, hi].
  const start = lo > 0n ? ceilDiv(lo, n) : hi < 0n ? floorDiv(hi, n) : 0n;
  for (let i = 0n; texts.length < MAX_LISTED_MULTIPLES && i < MAX_LISTING_STEPS; i++) {
    const up = (start + i) * n;
    const down = (start - i) * n;
    if (up > hi && down < lo) break;
    take(up);
    if (i > 0n && texts.length < MAX_LISTED_MULTIPLES) take(down);
  }
  if (texts.length === 0) return null;
  texts.sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
  return texts.map(([, text]) => `"${text}"`).join(" | ");
}

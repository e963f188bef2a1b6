/** Exact integer and number range grammars, checked exhaustively around the bounds with llama.cpp's matcher. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import {
  adjacentDouble,
  decimalText,
  doubleSafeBound,
  integerBound,
  integerRange,
  intRange,
  MAX_FRACTION_DIGITS,
  type NumberBound,
  numberRange,
} from "../../../src/structured/jsonSchema/numbers.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

const grammar = (expr: string): string => `root ::= ${expr}\n`;

describe("exact output", () => {
  test("intRange", () => {
    assert.equal(intRange(5n, 12n), '[5-9] | "1" [0-2]');
    assert.equal(intRange(0n, 120n), '[0-9] | [1-9] [0-9] | "1" ([0-1] [0-9] | "20")');
    assert.equal(intRange(17n, null), '"1" [7-9] | [2-9] [0-9] | [1-9] [0-9]{2,15}');
  });
  test("integerRange with negatives", () => {
    assert.equal(integerRange(-3n, 2n), '"-" [1-3] | [0-2]');
    assert.equal(integerRange(-20n, -10n), '"-" ("1" [0-9] | "20")');
    assert.equal(integerRange(5n, 4n), null);
  });
  test("numberRange [0, 1]", () => {
    assert.equal(
      numberRange({ value: 0n, exclusive: false }, { value: 1n, exclusive: false }),
      '"0" ("." [0-9]{1,16})? | "1" ("." "0"{1,16})?',
    );
  });
});

describe("integer ranges are exact", () => {
  const cases: [bigint | null, bigint | null][] = [
    [0n, 0n],
    [-15n, 1234n],
    [7n, 7000n],
    [-999n, -100n],
    [99n, 101n],
    [null, 42n],
    [-42n, null],
    [1000n, null],
    [null, -7n],
  ];
  for (const [min, max] of cases) {
    test(`[${min ?? "-inf"}, ${max ?? "inf"}]`, async () => {
      const expr = integerRange(min, max)!;
      const matches = await nativeMatcher(grammar(expr));
      const lo = Number(min ?? (max ?? 0n) - 1500n) - 30;
      const hi = Number(max ?? (min ?? 0n) + 1500n) + 30;
      for (let n = lo; n <= hi; n++) {
        const expected = (min === null || n >= Number(min)) && (max === null || n <= Number(max));
        assert.equal(matches(String(n)), expected, `${n} in ${expr}`);
      }
      assert.ok(!matches("01") && !matches("-0") && !matches("1.0"));
    });
  }
});

/**
 * Tests `numberRange(min, max, nonInteger)` against llama.cpp's matcher on every probe, with `-0` forms never
 * allowed (and, with `nonInteger`, integers never allowed).
 */
function rangeTests(
  cases: [NumberBound | null, NumberBound | null][],
  probes: string[],
  nonInteger = false,
): void {
  const show = (x: NumberBound): number => Number(x.value) / 10 ** (x.scale ?? 0);
  for (const [min, max] of cases) {
    const label = `${min ? `${min.exclusive ? "(" : "["}${show(min)}` : "(-inf"}, ${max ? `${show(max)}${max.exclusive ? ")" : "]"}` : "inf)"}`;
    test(label, async () => {
      const expr = numberRange(min, max, nonInteger)!;
      const matches = await nativeMatcher(grammar(expr));
      for (const text of probes) {
        const x = Number(text);
        const ok =
          (min === null || (min.exclusive ? x > show(min) : x >= show(min))) &&
          (max === null || (max.exclusive ? x < show(max) : x <= show(max))) &&
          !(text.startsWith("-") && x === 0) &&
          !(nonInteger && Number.isInteger(x));
        // Non-integers may be written without trailing fraction zeros only (a narrowing of the spelling),
        // and with at most 15 digits in all (so that their doubles are not integers).
        if (ok && nonInteger && /\.\d*0$/.test(text)) continue;
        if (nonInteger && text.replace(/[-.]/g, "").length > 15) {
          assert.ok(!matches(text), `${text} has too many digits to stay a non-integer double: ${expr}`);
          continue;
        }
        assert.equal(matches(text), ok, `${text} in ${label}: ${expr}`);
      }
    });
  }
}

describe("number ranges are exact", () => {
  const b = (value: number, exclusive = false): NumberBound => ({ value: BigInt(value), exclusive });
  const cases: [NumberBound | null, NumberBound | null][] = [
    [b(0), b(1)],
    [b(-1, true), b(1, true)],
    [b(-10), b(-2)],
    [b(0), null],
    [null, b(0, true)],
    [b(3, true), b(12)],
    [b(-5), b(5, true)],
  ];
  const probes = [
    "0",
    "0.5",
    "1",
    "1.0",
    "1.00",
    "1.01",
    "-1",
    "-0.999",
    "-1.0",
    "-2",
    "-2.5",
    "2",
    "3",
    "3.0",
    "3.0001",
    "4.5",
    "5",
    "5.0",
    "4.99",
    "12",
    "12.000",
    "12.5",
    "-10",
    "-10.0",
    "-10.01",
    "-5",
    "-5.0",
    "-0.0",
    "100",
    "0.000",
  ];
  rangeTests(cases, probes);
});

describe("fractional number bounds are exact (issue 19)", () => {
  const d = (value: number, scale: number, exclusive = false): NumberBound => ({
    value: BigInt(value),
    scale,
    exclusive,
  });
  const cases: [NumberBound | null, NumberBound | null][] = [
    [d(5, 1), null],
    [d(5, 1, true), d(225, 2, true)],
    [d(-15, 1, true), d(-5, 2)],
    [d(125, 3), d(5, 1)],
    [null, d(-25, 1)],
    [d(-1, 3), d(1, 3)],
  ];
  const probes = [
    "0",
    "0.5",
    "0.49",
    "0.51",
    "0.125",
    "0.1249",
    "0.5000",
    "1",
    "2.25",
    "2.2499",
    "2.3",
    "-1.5",
    "-1.4999",
    "-0.05",
    "-0.04",
    "-0.051",
    "-2.5",
    "-2.51",
    "-2.4",
    "-0.001",
    "0.001",
    "0.0009",
    "-0.0011",
    "3",
  ];
  rangeTests(cases, probes);
});

describe("non-integer numbers are exact (issue 19: the number branch of oneOf [integer, number])", () => {
  const d = (value: number, scale: number, exclusive = false): NumberBound => ({
    value: BigInt(value),
    scale,
    exclusive,
  });
  const cases: [NumberBound | null, NumberBound | null][] = [
    [null, null],
    [d(0, 0), null],
    [d(0, 0, true), d(1, 0)],
    [d(-3, 0), d(-1, 0, true)],
    [d(5, 1), d(225, 2, true)],
    [d(-15, 1, true), d(5, 1)],
    [d(2, 0), d(3, 0)],
  ];
  const probes = [
    "0",
    "0.5",
    "0.50",
    "0.0",
    "0.001",
    "1",
    "1.0",
    "1.5",
    "2",
    "2.2",
    "2.25",
    "2.2499",
    "2.5",
    "3",
    "3.0",
    "-0.5",
    "-1",
    "-1.0",
    "-1.25",
    "-1.5",
    "-1.4999",
    "-2.75",
    "-3",
    "-3.001",
    "0.0000000000000001",
    "0.00000000000001",
    "12.3456789",
    "3000000000005.0000000000000005",
    "3000000000005.05",
    "-2.9999999999999999",
  ];
  rangeTests(cases, probes, true);
  test("a non-integer in [2, 2] does not exist", () => {
    assert.equal(numberRange(d(2, 0), d(2, 0), true), null);
  });
});

describe("bounds as validators read them (doubles, issue 19)", () => {
  test("integer bounds beyond 2^53 use the double's exact value", () => {
    assert.equal(integerBound(18446744073709552000, false, false), 2n ** 64n);
    assert.equal(integerBound(-9223372036854776000, false, true), -(2n ** 63n));
    // 2^64 - 1 parses to 2^64 itself: an exclusive bound moves to the double below.
    assert.equal(integerBound(18446744073709552000, true, false), 2n ** 64n - 2048n);
    assert.equal(integerBound(-9223372036854776000, true, true), -(2n ** 63n) + 1024n);
    assert.equal(integerBound(7, true, false), 6n);
    assert.equal(integerBound(2.5, false, true), 3n);
    assert.equal(integerBound(-2.5, true, true), -2n);
  });
  test("adjacentDouble", () => {
    assert.equal(adjacentDouble(1, true), 1 + Number.EPSILON);
    assert.equal(adjacentDouble(1, false), 1 - Number.EPSILON / 2);
    assert.equal(adjacentDouble(-1, true), -1 + Number.EPSILON / 2);
    assert.equal(adjacentDouble(0, false), -Number.MIN_VALUE);
  });
  test("an exclusive bound stays exclusive only where the next decimals do not read as the bound", () => {
    assert.deepEqual(doubleSafeBound(0, true, true), { value: 0n, scale: 0, exclusive: true });
    assert.deepEqual(doubleSafeBound(0.5, true, false), { value: 5n, scale: 1, exclusive: true });
    // 5.0000000000000001 parses to 5: the bound becomes the next double, 5.000000000000001.
    assert.deepEqual(doubleSafeBound(5, true, true), {
      value: 5000000000000001n,
      scale: 15,
      exclusive: false,
    });
    assert.deepEqual(doubleSafeBound(0.12345678901234566, false, true), {
      value: 1234567890123457n,
      scale: 16,
      exclusive: false,
    });
  });
  test("the first decimal the grammar may write past any bound satisfies it as a double", () => {
    const doubles = fc.oneof(
      fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e20, max: 1e20 }),
      fc.integer({ min: -1e6, max: 1e6 }).map((n) => n / 1000),
      fc.integer({ min: -20, max: 20 }).map((n) => 2 ** 53 * n),
    );
    fc.assert(
      fc.property(doubles, fc.boolean(), fc.boolean(), (v, exclusive, lower) => {
        const b = doubleSafeBound(v, exclusive, lower);
        assert.ok((b.scale ?? 0) <= MAX_FRACTION_DIGITS);
        const unit = 10n ** BigInt(MAX_FRACTION_DIGITS - (b.scale ?? 0));
        const step = b.exclusive ? (lower ? 1n : -1n) : 0n;
        const first = Number(decimalText({ value: b.value * unit + step, scale: MAX_FRACTION_DIGITS }));
        if (lower) assert.ok(exclusive ? first > v : first >= v, `${v} ${exclusive} → ${first}`);
        else assert.ok(exclusive ? first < v : first <= v, `${v} ${exclusive} → ${first}`);
      }),
      { numRuns: 5000 },
    );
  });
});

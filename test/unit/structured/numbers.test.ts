/** Exact integer and number range grammars, checked exhaustively around the bounds with llama.cpp's matcher. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  integerRange,
  intRange,
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

/** Tests `numberRange(min, max)` against llama.cpp's matcher on every probe, with `-0` forms never allowed. */
function rangeTests(cases: [NumberBound | null, NumberBound | null][], probes: string[]): void {
  const show = (x: NumberBound): number => Number(x.value) / 10 ** (x.scale ?? 0);
  for (const [min, max] of cases) {
    const label = `${min ? `${min.exclusive ? "(" : "["}${show(min)}` : "(-inf"}, ${max ? `${show(max)}${max.exclusive ? ")" : "]"}` : "inf)"}`;
    test(label, async () => {
      const expr = numberRange(min, max)!;
      const matches = await nativeMatcher(grammar(expr));
      for (const text of probes) {
        const x = Number(text);
        const ok =
          (min === null || (min.exclusive ? x > show(min) : x >= show(min))) &&
          (max === null || (max.exclusive ? x < show(max) : x <= show(max))) &&
          !(text.startsWith("-") && x === 0);
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

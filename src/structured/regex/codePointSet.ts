/**
 * Sets of Unicode code points as sorted, disjoint, non-adjacent inclusive ranges. Used by the regex compiler for
 * character classes (`[a-z]`, `\d`, `[^...]`, `.`) and by the GBNF writer to print them as `[...]` or `[^...]`.
 */

/** Highest Unicode code point (U+10FFFF). */
export const MAX_CODE_POINT = 0x10ffff;

/** One inclusive range of code points, `[low, high]`, `0 <= low <= high <= 0x10FFFF`. */
export type CodePointRange = readonly [number, number];

/** An immutable set of code points, kept as sorted, merged ranges. */
export class CodePointSet {
  /** Sorted, disjoint and non-adjacent ranges. */
  readonly ranges: readonly CodePointRange[];

  private constructor(ranges: readonly CodePointRange[]) {
    this.ranges = ranges;
  }

  /** The set of the given ranges (in any order, possibly overlapping). Throws RangeError for `low > high`. */
  static of(ranges: readonly CodePointRange[]): CodePointSet {
    for (const [low, high] of ranges) {
      if (low > high || low < 0 || high > MAX_CODE_POINT)
        throw new RangeError(`Bad code point range ${low}-${high}`);
    }
    const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
    const merged: [number, number][] = [];
    for (const [low, high] of sorted) {
      const last = merged[merged.length - 1];
      if (last && low <= last[1] + 1) last[1] = Math.max(last[1], high);
      else merged.push([low, high]);
    }
    return new CodePointSet(merged);
  }

  /** The set holding the code points of `chars` (a string). */
  static chars(chars: string): CodePointSet {
    return CodePointSet.of([...chars].map((c) => [c.codePointAt(0)!, c.codePointAt(0)!] as const));
  }

  /** The empty set. */
  static empty(): CodePointSet {
    return new CodePointSet([]);
  }

  /** Every code point, U+0000 to U+10FFFF. */
  static all(): CodePointSet {
    return new CodePointSet([[0, MAX_CODE_POINT]]);
  }

  /** True when the set holds no code point. */
  get isEmpty(): boolean {
    return this.ranges.length === 0;
  }

  /** Number of code points in the set. */
  get size(): number {
    return this.ranges.reduce((sum, [low, high]) => sum + high - low + 1, 0);
  }

  /** True when `cp` is in the set. */
  has(cp: number): boolean {
    return this.ranges.some(([low, high]) => low <= cp && cp <= high);
  }

  /** The union of this set and `other`. */
  union(other: CodePointSet): CodePointSet {
    return CodePointSet.of([...this.ranges, ...other.ranges]);
  }

  /** The code points of U+0000..U+10FFFF not in this set. */
  complement(): CodePointSet {
    const out: [number, number][] = [];
    let next = 0;
    for (const [low, high] of this.ranges) {
      if (low > next) out.push([next, low - 1]);
      next = high + 1;
    }
    if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
    return new CodePointSet(out);
  }

  /** The code points in both sets. */
  intersect(other: CodePointSet): CodePointSet {
    return this.complement().union(other.complement()).complement();
  }

  /** The code points in this set and not in `other`. */
  subtract(other: CodePointSet): CodePointSet {
    return this.intersect(other.complement());
  }
}

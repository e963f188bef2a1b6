/** Length of the common prefix of two token lists. */
export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const max = Math.min(a.length, b.length);
  let index = 0;
  while (index < max && a[index] === b[index]) index++;
  return index;
}

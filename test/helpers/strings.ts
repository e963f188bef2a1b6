/** Test helper: every string over `alphabet` of length 0 to `n` (a small exhaustive sample), shortest first. */
export function stringsUpTo(alphabet: string[], n: number): string[] {
  const out = [""];
  let layer = [""];
  for (let i = 0; i < n; i++) {
    layer = layer.flatMap((s) => alphabet.map((c) => s + c));
    out.push(...layer);
  }
  return out;
}

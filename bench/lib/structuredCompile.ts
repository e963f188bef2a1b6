/**
 * Compile-time measurements of `bench/structured.ts`: for every accepting schema of
 * `test/fixtures/schemas`, the time of `compileConstraint("json_schema", schema)` with the compile cache
 * cleared before each run (the cost a new schema pays), and, when asked, of `validateGbnf`
 * (our GBNF check plus llama.cpp's native parse, which the server also pays once per grammar).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { checkGrammar } from "../../src/engine/grammar.ts";
import { projectRoot } from "../../src/paths.ts";
import { clearCompileCache, compileConstraint, validateGbnf } from "../../src/structured/index.ts";

/** One schema's compile times (median of the runs), ms. */
export type SchemaCompileTime = {
  name: string;
  compileMs: number;
  nativeMs: number | null;
  gbnfBytes: number;
};

/** The accepting schemas of the corpus, by file name (without `.json`). */
export function corpusSchemas(): { name: string; schema: unknown }[] {
  const dir = join(projectRoot, "test/fixtures/schemas");
  return readdirSync(dir)
    .filter((file) => file.endsWith(".json"))
    .sort()
    .map((file) => ({
      name: file.replace(/\.json$/, ""),
      fixture: JSON.parse(readFileSync(join(dir, file), "utf8")) as { schema: unknown; refuse?: boolean },
    }))
    .filter(({ fixture }) => !fixture.refuse)
    .map(({ name, fixture }) => ({ name, schema: fixture.schema }));
}

/**
 * Times each corpus schema `runs` times (cache cleared before each compile) and returns the medians.
 * With `native`, also times `validateGbnf` on the compiled text (llama.cpp's parser each run).
 */
export async function measureCompileTimes(runs: number, native = false): Promise<SchemaCompileTime[]> {
  const results: SchemaCompileTime[] = [];
  for (const { name, schema } of corpusSchemas()) {
    const compile: number[] = [];
    const nativeTimes: number[] = [];
    let gbnf = "";
    for (let run = 0; run < runs; run++) {
      clearCompileCache();
      const started = performance.now();
      gbnf = compileConstraint("json_schema", schema).gbnf;
      compile.push(performance.now() - started);
      if (native) {
        const nativeStarted = performance.now();
        validateGbnf(gbnf, checkGrammar);
        nativeTimes.push(performance.now() - nativeStarted);
      }
    }
    results.push({
      name,
      compileMs: percentile(compile, 50),
      nativeMs: native ? percentile(nativeTimes, 50) : null,
      gbnfBytes: Buffer.byteLength(gbnf),
    });
  }
  return results;
}

/** The `p`-th percentile (nearest rank) of `values`; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

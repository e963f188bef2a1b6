// README's tool-calling family table and reasoning table, checked against the code (issue 26): every
// tool parser with native markup has a row with its name and aliases, the "forced" and "strict" columns
// say what `chatTools.ts` does for that family, and the "reasoning" column lists exactly the reasoning
// parsers detected from the templates of llama.cpp's collection that the row's tool parser is detected
// from; every reasoning parser has a row in the reasoning table.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  detectReasoningParser,
  REASONING_PARSER_NAMES,
  resolveReasoningParserName,
} from "../../src/chat/reasoningParsers/index.ts";
import {
  detectToolParser,
  resolveToolParserName,
  TOOL_PARSER_NAMES,
} from "../../src/chat/toolParsers/index.ts";
import { projectRoot } from "../../src/paths.ts";
import { hasLazyToolGrammar, hasNativeForcedForm } from "../../src/serving/guided/chatTools.ts";

const readme = readFileSync(join(projectRoot, "README.md"), "utf8");

/** The rows (cells) of the Markdown table whose header line starts with `header`. */
function tableRows(header: string): string[][] {
  const lines = readme.split("\n").map((line) => line.trim());
  const at = lines.findIndex((line) => line.startsWith(header));
  assert.ok(at >= 0, `README has a table starting ${header}`);
  const rows: string[][] = [];
  for (const line of lines.slice(at + 2)) {
    if (!line.startsWith("|")) break;
    // Cells split at `|` not escaped as `\|`.
    rows.push(
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
  }
  return rows;
}

/** The backticked names of a cell, in order. */
const names = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? "");

type Row = {
  parsers: string[];
  aliases: string[];
  forced: string;
  strict: string;
  reasoning: Set<string>;
};

const rows: Row[] = tableRows("| family (template files) |").map((cells) => {
  const [, , parser = "", forced = "", strict = "", reasoning = ""] = cells;
  const parens = parser.indexOf("(");
  const main = parens < 0 ? parser : parser.slice(0, parens);
  const reasoningNames = new Set(names(reasoning.replace(/\([^)]*\)/g, "")));
  if (reasoning.includes("—")) reasoningNames.add("—");
  return {
    parsers: names(main),
    aliases: parens < 0 ? [] : names(parser.slice(parens)),
    forced,
    strict,
    reasoning: reasoningNames,
  };
});

const dir = join(projectRoot, "native/build/llama.cpp/models/templates");
const present = existsSync(dir);

describe("README's tool-calling family table", () => {
  it("has a row for every tool parser but the generic fallback, under its registered name and aliases", () => {
    const listed = rows.flatMap((row) => row.parsers);
    for (const name of TOOL_PARSER_NAMES) {
      if (name === "generic") continue;
      assert.ok(listed.includes(name), `README lists ${name}`);
    }
    for (const row of rows) {
      for (const name of row.parsers) assert.equal(resolveToolParserName(name), name, name);
      for (const alias of row.aliases) {
        assert.ok(
          row.parsers.includes(resolveToolParserName(alias) ?? "?"),
          `${alias} is an alias of ${row.parsers}`,
        );
      }
    }
  });

  it("says which families force calls in their markup and which enforce strict tools under auto", () => {
    for (const row of rows) {
      for (const name of row.parsers) {
        assert.equal(row.forced, hasNativeForcedForm(name) ? "native" : "generic", `${name}: forced`);
        assert.equal(row.strict, hasLazyToolGrammar(name) ? "✓" : "400", `${name}: strict`);
      }
    }
  });

  it("lists the reasoning parsers detected from the templates of each row's tool parser", {
    skip: !present,
  }, () => {
    const detected = new Map<string, Set<string>>();
    for (const file of readdirSync(dir).filter((name) => name.endsWith(".jinja"))) {
      const text = readFileSync(join(dir, file), "utf8");
      const tool = detectToolParser(text);
      if (tool === undefined || tool === "generic") continue;
      const set = detected.get(tool) ?? new Set<string>();
      set.add(detectReasoningParser(text) ?? "—");
      detected.set(tool, set);
    }
    for (const row of rows) {
      const expected = new Set(row.parsers.flatMap((name) => [...(detected.get(name) ?? ["—"])]));
      assert.deepEqual([...row.reasoning].sort(), [...expected].sort(), `${row.parsers}: reasoning`);
    }
  });
});

describe("README's reasoning table", () => {
  it("has a row for every reasoning parser, its aliases resolving to it", () => {
    const table = tableRows("| Family | `--reasoning-parser` |");
    const listed: string[] = [];
    for (const [, cell = ""] of table) {
      const [name = ""] = names(cell);
      const aliases = names(/\(aliases ([^)]*)\)/.exec(cell)?.[1] ?? "");
      assert.equal(resolveReasoningParserName(name), name, name);
      for (const alias of aliases) assert.equal(resolveReasoningParserName(alias), name, alias);
      listed.push(name);
    }
    for (const name of REASONING_PARSER_NAMES) assert.ok(listed.includes(name), `README lists ${name}`);
  });
});

/**
 * Regular languages as DFAs (`regexAutomaton.ts`) and the string constraints compiled through them (issue 19):
 * the automaton of a pattern accepts exactly what JavaScript's RegExp fully matches; products and complements
 * are exact; minimisation keeps the language; the formats' patterns agree with the test suite's format checks;
 * and `format` with `pattern` or lengths compiles to grammars (checked with llama.cpp's grammar engine) that
 * take only strings the schema allows.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { jsonSchemaToGbnf } from "../../../src/structured/jsonSchema/compiler.ts";
import { type FORMAT_PATTERNS, formatDfa } from "../../../src/structured/jsonSchema/formats.ts";
import { CodePointSet } from "../../../src/structured/regex/codePointSet.ts";
import { regexDfa, stringsDfa } from "../../../src/structured/regex/regexAutomaton.ts";
import { narrowLength, parseRegex, regexLengthBounds } from "../../../src/structured/regex/regexParser.ts";
import { patternDfa } from "../../../src/structured/regex/regexToGbnf.ts";
import { stringsUpTo } from "../../helpers/strings.ts";
import { FORMATS } from "../../helpers/structuredAjv.ts";
import { seededRandom } from "../../stress/fuzzCases.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

const dfaOf = (pattern: string) => regexDfa(parseRegex(pattern));

describe("regexDfa", () => {
  it("accepts exactly the strings RegExp fully matches", () => {
    const samples = stringsUpTo(["a", "b", "1", " ", "-"], 5);
    for (const pattern of [
      "a*b",
      "(a|b)*abb",
      "[a-z]{2,3}(-[0-9])?",
      "(?:\\S+\\s+){0,2}\\S+",
      "[^a]+|b{0,2}",
      "(ab|a)(b|)1?",
      "(a+)?b",
      ".{2}",
    ]) {
      const dfa = dfaOf(pattern);
      const re = new RegExp(`^(?:${pattern})$`, "u");
      for (const text of samples) assert.equal(dfa.matches(text), re.test(text), `${pattern} on '${text}'`);
    }
  });

  it("is minimal: (a|b)*abb has four states, (?:\\S+\\s+){0,9}\\S+ twenty", () => {
    assert.equal(dfaOf("(a|b)*abb").size, 4);
    assert.equal(dfaOf("(?:\\S+\\s+){0,9}\\S+").size, 20);
  });

  it("intersects and complements exactly", () => {
    const samples = stringsUpTo(["a", "b", "c"], 6);
    const x = dfaOf("[ab]*a[ab]*");
    const y = dfaOf(".{2,4}");
    const both = x.intersect(y);
    const not = x.complement(CodePointSet.all());
    for (const text of samples) {
      assert.equal(both.matches(text), x.matches(text) && y.matches(text), text);
      assert.equal(not.matches(text), !x.matches(text), text);
    }
    assert.ok(dfaOf("a+").intersect(dfaOf("b+")).isEmpty);
  });
});

describe("stringsDfa", () => {
  it("accepts exactly the listed strings and is minimal (one state per distinct residual language)", () => {
    const rand = seededRandom(11);
    const samples = stringsUpTo(["a", "b", "é"], 4);
    for (let round = 0; round < 40; round++) {
      const values = Array.from({ length: Math.floor(rand() * 8) }, () =>
        Array.from({ length: Math.floor(rand() * 4) }, () => "abé"[Math.floor(rand() * 3)]).join(""),
      );
      const dfa = stringsDfa(values);
      for (const text of samples)
        assert.equal(dfa.matches(text), values.includes(text), `${values} on '${text}'`);
      // Myhill–Nerode: the trimmed minimal DFA has one state per distinct non-empty residual p⁻¹L.
      const residuals = new Set<string>();
      for (const v of values) {
        for (let i = 0; i <= v.length; i++) {
          const p = v.slice(0, i);
          const rest = values.filter((w) => w.startsWith(p)).map((w) => w.slice(p.length));
          residuals.add([...new Set(rest)].sort().join("\u0000"));
        }
      }
      assert.equal(dfa.isEmpty ? 0 : dfa.size, residuals.size, `${values}`);
      // The same automaton as the subset construction's (both minimal, numbered alike).
      const alt = regexDfa({
        type: "alt",
        items: values.map((v) => ({
          type: "seq",
          items: [...v].map((ch) => ({ type: "set", set: CodePointSet.chars(ch) })),
        })),
      }).refined(dfa.starts);
      if (!dfa.isEmpty) assert.deepEqual([...alt.next], [...dfa.next], `${values}`);
    }
  });
});

describe("patterns under search semantics", () => {
  it("admit any text at an unanchored end", () => {
    const samples = stringsUpTo(["x", "y", "z"], 5);
    for (const pattern of ["xy", "^xy", "xy$", "^x|z$", "^$|^x+$", "^xy|yz|zx|x$", "(?:^x|y)z"]) {
      const dfa = patternDfa(pattern, true);
      const re = new RegExp(pattern, "u");
      for (const text of samples) assert.equal(dfa.matches(text), re.test(text), `${pattern} on '${text}'`);
    }
  });

  it("keep few subsets once a match is certain (many keywords, each may match anywhere)", () => {
    const pattern = "^list|date|time|string|enum|int|double|long|boolean|number$";
    const dfa = patternDfa(pattern, true);
    const re = new RegExp(pattern, "u");
    for (const text of ["list", "xlist", "a date!", "numbers", "number", "boolea", "", "intx"])
      assert.equal(dfa.matches(text), re.test(text), text);
  });
});

/** Typical instances of each format the test suite checks. */
const FORMAT_SAMPLES: Record<string, string[]> = {
  date: ["2024-02-29", "2023-02-29", "1999-12-31", "2000-13-01", "2021-04-31"],
  time: ["12:30:00Z", "23:59:59.5+01:00", "24:00:00Z", "12:30:00"],
  "date-time": ["2024-01-02T03:04:05Z", "2024-01-02 03:04:05Z", "2024-01-02t03:04:05.123-08:00"],
  uuid: ["123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000"],
  email: ["a@b.co", "first.last+tag@mail.example.org", "@x.org", "a@-x.org"],
  ipv4: ["192.168.0.1", "256.1.1.1", "01.2.3.4"],
  ipv6: ["2001:db8:0:0:0:0:2:1", "::1"],
  hostname: ["example.com", "a-b.c-d.e", "-bad.com", "x"],
  uri: ["https://example.com/a?b=c#d", "mailto:a@b.c", "no-scheme", "urn:isbn:123"],
  "uri-reference": ["../a/b?c", "https://x.y", "#frag", "a b"],
  duration: ["P1Y2M3DT4H5M6S", "PT5M", "P2W", "P", "PT"],
  "json-pointer": ["/a/b~0c", "", "a/b", "/x~2"],
  regex: ["^[a-z]+$", "(a|b)*", "a{2", "\\d+\\.\\d*", "[z-a]"],
};

describe("format patterns", () => {
  it("take only strings the format checks accept, and the usual valid ones", () => {
    for (const [format, samples] of Object.entries(FORMAT_SAMPLES)) {
      const dfa = formatDfa(format as keyof typeof FORMAT_PATTERNS);
      const check = FORMATS[format]!;
      let accepted = 0;
      for (const text of samples) {
        if (!dfa.matches(text)) continue;
        accepted++;
        assert.ok(check(text), `format ${format} took ${JSON.stringify(text)}`);
      }
      assert.ok(accepted >= 1, `format ${format} takes some sample`);
    }
    assert.ok(formatDfa("email").matches("first.last+tag@mail.example.org"));
    assert.ok(formatDfa("uri").matches("https://example.com/a?b=c#d"));
    assert.ok(formatDfa("regex").matches("^(?:ab|[cd])+\\.json$"));
  });
});

describe("narrowLength", () => {
  it("gives a subset whose lengths fit, or null", () => {
    for (const [pattern, min, max] of [
      ["[a-z]+:[0-9]+", 0, 6],
      ["(?:\\S+\\s+){0,9}\\S+", 1, 40],
      ["a{2,}b*", 5, null],
      ["x(ab)*", 4, 9],
    ] as const) {
      const tree = narrowLength(parseRegex(pattern), min, max);
      assert.ok(tree !== null, pattern);
      const own = regexLengthBounds(tree);
      assert.ok(own.min >= min && (max === null || (own.max !== null && own.max <= max)), pattern);
      const narrowed = regexDfa(tree);
      const whole = dfaOf(pattern);
      for (const text of stringsUpTo(["a", "b", "x", "0", ":", " "], 5)) {
        if (narrowed.matches(text)) assert.ok(whole.matches(text), `${pattern} took ${text}`);
      }
    }
    assert.equal(narrowLength(parseRegex("abcdef"), 0, 3), null);
  });
});

describe("string schemas through automata", () => {
  it("format with pattern: both hold", async () => {
    const matches = await nativeMatcher(
      jsonSchemaToGbnf({ type: "string", format: "email", pattern: "@example\\.com$" }),
    );
    assert.ok(matches('"ann@example.com"'));
    assert.ok(!matches('"ann@example.org"'));
    assert.ok(!matches('"@example.com"'));
    const uri = await nativeMatcher(
      jsonSchemaToGbnf({ type: "string", format: "uri", pattern: "^https://" }),
    );
    assert.ok(uri('"https://a.b/c"'));
    assert.ok(!uri('"http://a.b/c"'));
    assert.ok(!uri('"https://a b"'));
  });

  it("format with lengths: a narrowing within the bounds", async () => {
    const gbnf = jsonSchemaToGbnf({ type: "string", format: "email", minLength: 6, maxLength: 20 });
    const matches = await nativeMatcher(gbnf);
    assert.ok(matches('"ab@cd.ef"'));
    assert.ok(!matches('"a@b.c"'));
    assert.ok(!matches('"someone.long@mail.example.org"'));
    const date = await nativeMatcher(jsonSchemaToGbnf({ type: "string", format: "date", maxLength: 10 }));
    assert.ok(date('"2024-02-29"'));
  });

  it("a format that cannot fit the lengths has no instance", () => {
    assert.throws(
      () => jsonSchemaToGbnf({ type: "string", format: "date", maxLength: 8 }),
      /no satisfiable instance/,
    );
  });
});

describe("anchors inside and lookaheads", () => {
  it("hold where they stand, as RegExp", () => {
    const samples = stringsUpTo(["a", "b", "/", ","], 5);
    for (const pattern of [
      "^([^,]|$)",
      "^(\\/?(a|b*)($|\\/))*$",
      "^((?!ab).)*$",
      "^(?!a)[ab]+$",
      "^(?=[^,]+$)(?!\\/+$)(.|\\n)+$",
      "a(?=b)",
      "x^",
      "^$[ab]*$",
    ]) {
      const dfa = patternDfa(pattern, true);
      const re = new RegExp(pattern, "u");
      for (const text of samples) assert.equal(dfa.matches(text), re.test(text), `${pattern} on '${text}'`);
    }
  });

  it("compile to grammars for pattern, guided_regex and patternProperties", async () => {
    const p = await nativeMatcher(jsonSchemaToGbnf({ type: "string", pattern: "^((?!mode)(?!Mode).)*$" }));
    assert.ok(p('"a node"'));
    assert.ok(!p('"a mode"'));
    assert.ok(!p('"Model"'));
    const keys = await nativeMatcher(
      jsonSchemaToGbnf({
        type: "object",
        patternProperties: { "^(?!@@)[\\w@]+$": { type: "integer" } },
        additionalProperties: false,
      }),
    );
    assert.ok(keys('{"a@b":1}'));
    assert.ok(!keys('{"@@x":1}'));
  });

  it("refuse '^' inside a lookahead", () => {
    assert.throws(() => jsonSchemaToGbnf({ type: "string", pattern: "(?=^a)" }), /lookahead/);
  });
});

describe("random patterns (seeded)", () => {
  it("the automaton under search semantics agrees with RegExp.test on every short string", () => {
    let seed = 7;
    const rand = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const gen = (depth: number): string => {
      const r = rand();
      if (depth > 3 || r < 0.3) return pick(["a", "b", "[ab]", "[^a]", ".", "\\n"]);
      if (r < 0.45) return gen(depth + 1) + gen(depth + 1);
      if (r < 0.55) return `(?:${gen(depth + 1)}|${gen(depth + 1)})`;
      if (r < 0.7) return `(?:${gen(depth + 1)})${pick(["*", "+", "?", "{2}", "{0,2}"])}`;
      if (r < 0.78) return pick(["^", "$"]) + gen(depth + 1);
      if (r < 0.86) return gen(depth + 1) + pick(["^", "$"]);
      return `(?${pick(["=", "!"])}${gen(depth + 1)})`;
    };
    const samples = stringsUpTo(["a", "b", "\n"], 4);
    let compared = 0;
    for (let i = 0; i < 150; i++) {
      const pattern = gen(0);
      let dfa: ReturnType<typeof patternDfa>;
      try {
        dfa = patternDfa(pattern, true);
      } catch {
        continue; // '^' inside a lookahead, or a quantified anchor: refused
      }
      const re = new RegExp(pattern, "u");
      for (const text of samples) assert.equal(dfa.matches(text), re.test(text), `${pattern} on '${text}'`);
      compared++;
    }
    assert.ok(compared > 100);
  });
});

describe("budgets", () => {
  it("many heavy automata in one schema are one 400, not a long compile", () => {
    const properties: Record<string, unknown> = {};
    for (let i = 0; i < 60; i++) {
      const [x, y] = ["ab", "cd", "ef", "gh", "ij"][i % 5]!;
      properties[`p${i}`] = { type: "string", not: { pattern: `^(${x}|${y})*${x}(${x}|${y}){10}$` } };
    }
    assert.throws(
      () => jsonSchemaToGbnf({ type: "object", properties }),
      (e: unknown) =>
        e instanceof Error &&
        /#\/properties\/p\d+/.test(e.message) &&
        /400|limits/.test(`${(e as { status?: number }).status} ${e.message}`),
    );
  });

  it("format regex with maxLength writes more than the empty string", async () => {
    const matches = await nativeMatcher(jsonSchemaToGbnf({ type: "string", format: "regex", maxLength: 20 }));
    assert.ok(matches('"^[a-z]+$"'));
    assert.ok(!matches('"a{2"'));
  });
});

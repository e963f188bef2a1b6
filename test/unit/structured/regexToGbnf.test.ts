/** Regex → GBNF: exact output for a few patterns, the 40-pattern corpus against llama.cpp's matcher and JS RegExp, refusals. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { projectRoot } from "../../../src/paths.ts";
import { ConstraintError } from "../../../src/structured/errors.ts";
import { GbnfBuilder } from "../../../src/structured/gbnf/gbnf.ts";
import { parseRegex, regexLengthBounds } from "../../../src/structured/regex/regexParser.ts";
import { regexExpression, regexToGbnf } from "../../../src/structured/regex/regexToGbnf.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

type Corpus = {
  patterns: { pattern: string; match: string[]; noMatch: string[] }[];
  refusals: { pattern: string; construct: string }[];
};
const corpus = JSON.parse(readFileSync(join(projectRoot, "test/fixtures/regex.json"), "utf8")) as Corpus;

describe("exact GBNF", () => {
  test("literals merge, classes and quantifiers", () => {
    assert.equal(regexToGbnf("^ab[c-e]{2,3}x?$"), 'root ::= "ab" [c-e]{2,3} "x"?\n');
  });
  test("top-level alternation and hoisted groups", () => {
    assert.equal(regexToGbnf("(ab|c)+d|e"), 'root ::= re-rep+ "d" | "e"\nre-rep ::= "ab" | "c"\n');
  });
  test("escapes and negated classes", () => {
    assert.equal(regexToGbnf('\\d"\\n[^a]'), 'root ::= [0-9] "\\"\\n" [^a]\n');
  });
  test("dot excludes line terminators (ECMA-262)", () => {
    assert.equal(regexToGbnf("."), "root ::= [^\\n\\r\\u2028\\u2029]\n");
  });
  test("repetitions above 1000 are chunked under llama.cpp's 2000 limit", () => {
    assert.equal(
      regexToGbnf("a{0,2500}"),
      'root ::= re-rep-tail\nre-rep-chunk ::= "a"{1000}\nre-rep-tail ::= re-rep-chunk? "a"{0,999} | re-rep-chunk{2} "a"{0,500}\n',
    );
  });
  test("JSON string mode escapes quotes, backslashes and controls; search mode pads unanchored ends", () => {
    const b = new GbnfBuilder();
    assert.equal(
      regexExpression(b, '^a"\\\\\\n$', { mode: "json", search: true, hint: "p" }),
      '"a\\\\\\"\\\\\\\\\\\\n"',
    );
    assert.equal(
      regexExpression(b, "x", { mode: "json", search: true, hint: "p" }),
      'json-char* "x" json-char*',
    );
  });
});

describe("corpus", () => {
  test("has 40 patterns", () => assert.ok(corpus.patterns.length >= 40));
  for (const { pattern, match, noMatch } of corpus.patterns) {
    test(pattern.length > 60 ? `${pattern.slice(0, 60)}...` : pattern, async () => {
      const js = new RegExp(`^(?:${pattern})$`);
      const matches = await nativeMatcher(regexToGbnf(pattern));
      for (const text of match) {
        assert.ok(js.test(text), `fixture: JS RegExp should match ${JSON.stringify(text)}`);
        assert.ok(matches(text), `grammar should match ${JSON.stringify(text)}`);
      }
      for (const text of noMatch) {
        assert.ok(!js.test(text), `fixture: JS RegExp should not match ${JSON.stringify(text)}`);
        assert.ok(!matches(text), `grammar should not match ${JSON.stringify(text)}`);
      }
    });
  }
});

describe("refusals", () => {
  for (const { pattern, construct } of corpus.refusals) {
    test(`${pattern} → 400 naming ${construct}`, () => {
      assert.throws(
        () => regexToGbnf(pattern),
        (error: { status?: number; message?: string; param?: string }) =>
          error instanceof ConstraintError &&
          error.param === "guided_regex" &&
          error.message!.includes(construct),
      );
    });
  }
  test("only characters UTF-8 can write: a surrogate pair escape is one code point, lone surrogates go", () => {
    // (ECMA-262 with the `u` flag reads `\uD83D\uDE00` as U+1F600, in a class too.)
    assert.equal(regexToGbnf("[\\uD83D\\uDE00]+"), regexToGbnf("\\u{1F600}+"));
    // A class whose only characters past the lead byte ED are surrogates keeps its other members.
    assert.equal(regexToGbnf("[a\\uDC00]"), regexToGbnf("a"));
    assert.equal(regexToGbnf("[\\uD800-\\uE000]"), regexToGbnf("\\uE000"));
    // `.` and negated classes keep U+D000-U+D7FF beside them, so they stay as written.
    assert.match(regexToGbnf("."), /root ::= \[/);
    for (const pattern of ["[\\uDC00-\\uDFFF]", "a|\\uD800", "\ud800"]) {
      assert.throws(
        () => regexToGbnf(pattern),
        (error: { status?: number; message?: string }) =>
          error instanceof ConstraintError && error.message!.includes("lone surrogates"),
        pattern,
      );
    }
  });
  test("lazy quantifiers are accepted (same language under full match)", () => {
    assert.equal(regexToGbnf("a+?b"), regexToGbnf("a+b"));
  });
});

test("length bounds", () => {
  assert.deepEqual(regexLengthBounds(parseRegex("ab{2,3}(c|de)?")), { min: 3, max: 6 });
  assert.deepEqual(regexLengthBounds(parseRegex("a+")), { min: 1, max: null });
});

describe("quantified groups (issue 19)", () => {
  const cases: { pattern: string; match: string[]; noMatch: string[] }[] = [
    { pattern: "(a+)?", match: ["", "a", "aaa"], noMatch: ["b", "ab"] },
    { pattern: "^([0-9]+)?$", match: ["", "7", "123"], noMatch: ["1a", "a"] },
    { pattern: "(a+)+$", match: ["a", "aaaa"], noMatch: ["", "ba"] },
    { pattern: "(ab?)*c", match: ["c", "ac", "abac", "aaabc"], noMatch: ["bc", "ab"] },
    { pattern: "((a{2}){2}){2}", match: ["aaaaaaaa"], noMatch: ["aaaa", "aaaaaaaaa"] },
  ];
  for (const { pattern, match, noMatch } of cases) {
    test(pattern, async () => {
      const matches = await nativeMatcher(regexToGbnf(pattern));
      const full = new RegExp(`^(?:${pattern})$`, "u");
      for (const text of match) {
        assert.ok(full.test(text), `fixture: ${pattern} should match ${text}`);
        assert.ok(matches(text), `${pattern} should match ${JSON.stringify(text)}`);
      }
      for (const text of noMatch) {
        assert.ok(!full.test(text), `fixture: ${pattern} should not match ${text}`);
        assert.ok(!matches(text), `${pattern} should not match ${JSON.stringify(text)}`);
      }
    });
  }
  test("((a{100}){100}){100} is accepted and stays small", () => {
    const gbnf = regexToGbnf("((a{100}){100}){100}");
    assert.ok(gbnf.length < 500, gbnf);
  });
  test("a repeated quantifier is still refused", () => {
    assert.throws(() => regexToGbnf("a**"), /multiple repeat/);
  });
  test("a refused pattern is echoed at most 200 characters", () => {
    const pattern = `${Array.from({ length: 20_000 }, (_, i) => `w${i}`).join("|")}(?=x)`;
    assert.throws(
      () => regexToGbnf(pattern),
      (error: Error) => error.message.length < 400 && error.message.includes("w0|w1|"),
    );
  });
});

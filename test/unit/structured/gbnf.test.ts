/** GBNF writing helpers, our port of llama.cpp's parser (parity with the native one), and validateGbnf. */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { checkGrammar } from "../../../src/engine/grammar.ts";
import { projectRoot } from "../../../src/paths.ts";
import { ConstraintError } from "../../../src/structured/errors.ts";
import { choiceToGbnf } from "../../../src/structured/gbnf/choiceToGbnf.ts";
import {
  GbnfBuilder,
  gbnfCharClass,
  gbnfLiteral,
  isAtomicExpression,
  literalTrie,
} from "../../../src/structured/gbnf/gbnf.ts";
import { checkGbnf } from "../../../src/structured/gbnf/gbnfCheck.ts";
import { MAX_GBNF_LENGTH } from "../../../src/structured/gbnf/validateGbnf.ts";
import { checkGbnfText, confirmGbnf, validateGbnf } from "../../../src/structured/index.ts";
import { CodePointSet } from "../../../src/structured/regex/codePointSet.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

describe("rule names", () => {
  test("long hints keep their end; equal hints get increasing suffixes", () => {
    const b = new GbnfBuilder();
    const long = "https:__example_dev_master__defs_json_defs_io_k8s_api_core_v1_Container";
    assert.equal(b.reserve(long), "io-k8s-api-core-v1-Container");
    const names = Array.from({ length: 500 }, () => b.reserve("item"));
    assert.equal(new Set(names).size, 500);
    assert.deepEqual(names.slice(0, 3), ["item", "item-1", "item-2"]);
    b.reserveExact("item-600");
    assert.ok(!Array.from({ length: 200 }, () => b.reserve("item")).includes("item-600"));
  });
});

describe("escaping", () => {
  test("literals", () => {
    assert.equal(gbnfLiteral('a"b\\c\nd\té\u0001😀'), '"a\\"b\\\\c\\nd\\t\\u00E9\\x01\\U0001F600"');
  });
  test("classes pick the shorter of [..] and [^..]", () => {
    assert.equal(gbnfCharClass(CodePointSet.chars("ab-]^")), "[\\-\\]\\x5Eab]");
    assert.equal(gbnfCharClass(CodePointSet.chars("x").complement()), "[^x]");
    assert.equal(gbnfCharClass(CodePointSet.of([[0x30, 0x39]])), "[0-9]");
  });
  test("escaped literals and classes round-trip through llama.cpp", async () => {
    const text = 'a"b\\c\nd\té\u0001😀[]-^';
    const matches = await nativeMatcher(
      `root ::= ${gbnfLiteral(text)} ${gbnfCharClass(CodePointSet.chars(']-^\\"é'))}+\n`,
    );
    assert.ok(matches(`${text}]-^\\"é`));
    assert.ok(!matches(`${text}a`));
  });
  test("atomic expressions", () => {
    assert.ok(isAtomicExpression("rule-1"));
    assert.ok(isAtomicExpression('"a b"'));
    assert.ok(isAtomicExpression("[a-z ]"));
    assert.ok(isAtomicExpression('("a" | "b")'));
    assert.ok(!isAtomicExpression('("a") ("b")'));
    assert.ok(!isAtomicExpression('"a" "b"'));
  });
});

describe("GbnfBuilder.repeat", () => {
  for (const [min, max] of [
    [0, 1],
    [1, null],
    [3, 3],
    [2, 5],
    [0, 2500],
    [1500, 1500],
    [1001, 3003],
    [2200, null],
  ] as [number, number | null][]) {
    test(`{${min},${max ?? ""}} is exact in llama.cpp`, async () => {
      const b = new GbnfBuilder();
      b.reserveExact("root");
      b.define("root", b.repeat('"a"', min, max));
      const gbnf = b.render();
      checkGbnf(gbnf);
      const matches = await nativeMatcher(gbnf);
      const probe = [min, max ?? min + 50].flatMap((n) => [n - 1, n, n + 1]).filter((n) => n >= 0);
      for (const n of probe) {
        const expected = n >= min && (max === null || n <= max);
        assert.equal(matches("a".repeat(n)), expected, `length ${n}`);
      }
    });
  }
  test("non-atomic items are hoisted into a rule", () => {
    const b = new GbnfBuilder();
    assert.equal(b.repeat('"a" "b"', 0, null, "x"), "x*");
  });
});

/** Grammars with the expected outcome of llama.cpp's parser (null: valid) — our port must agree. */
const PARITY: [string, string | null][] = [
  ['root ::= "a"', null],
  ['root ::= "a" | "b" # comment\n', null],
  ['root ::= [a-z]+ x\nx ::= ( "(" root ")" )?', null],
  ['root ::= "a"{2,5} "b"{3} "c"{1,}', null],
  ["root ::= <[12]> !<[13]>", null],
  ['root ::= (\n  "a"\n  | "b"\n)', null],
  ['root ::= "\\x41\\u00e9\\U0001F600"', null],
  ['root ::= "a" (', "expecting ')' at "],
  ["root ::= foo", "Undefined rule identifier 'foo'"],
  ['rot ::= "a"', "grammar does not contain a 'root' symbol"],
  ['root ::= root "a" | "b"', "left recursion"],
  ['root ::= x "a"\nx ::= "" | root', "left recursion"],
  ["root ::= <think>", "no vocab to parse token at <think>"],
  ['root ::= "\\q"', "unknown escape at \\q"],
  ['root ::= "abc', "unexpected end of input"],
  ["root ::= [abc", "unexpected end of input"],
  ['root := "a"', "expecting ::= at "],
  ['root ::= "a"{2001}', "number of repetitions exceeds sane defaults"],
  ['root ::= ("a"{0,100}){0,30}', "exceeds sane defaults"],
  ['root ::= "a"{x}', "expecting an int at "],
  ['root ::= "a"{1 2}', "expecting ',' at "],
  ['root ::= "a" )', "expecting newline or end at )"],
  ["root ::= *", "expecting preceding item to */+/?/{ at end of input"],
  ['root ::= "\\x4"', "expecting 2 hex chars at "],
];

describe("checkGbnf agrees with llama.cpp's parser", () => {
  for (const [grammar, expected] of PARITY) {
    test(JSON.stringify(grammar), () => {
      const native = checkGrammar(grammar) === null;
      if (expected === null) {
        assert.doesNotThrow(() => checkGbnf(grammar));
        assert.ok(native, "native parser accepts");
      } else {
        assert.throws(
          () => checkGbnf(grammar),
          (e: Error) => e.message.includes(expected),
        );
        assert.ok(!native, "native parser rejects");
      }
    });
  }
});

describe("grammar fixtures", () => {
  const dir = join(projectRoot, "test/fixtures/grammars");
  for (const file of readdirSync(dir).sort()) {
    const text = readFileSync(join(dir, file), "utf8");
    test(file, () => {
      if (file.startsWith("malformed")) {
        assert.throws(
          () => checkGbnfText(text),
          (e: { status?: number; message?: string; param?: string }) =>
            e instanceof ConstraintError &&
            e.param === "guided_grammar" &&
            /expecting '\)' at end of input \(line 2, column 1\)/.test(e.message!),
        );
        assert.throws(
          () => validateGbnf(text, checkGrammar),
          (e: { status?: number }) => e instanceof ConstraintError,
        );
      } else {
        checkGbnfText(text);
        assert.equal(validateGbnf(text, checkGrammar), text);
      }
    });
  }
});

test("validateGbnf reports llama.cpp's post-parse errors", async () => {
  assert.throws(
    () => validateGbnf('root ::= root "a"', checkGrammar),
    (e: { status?: number; message?: string }) => {
      assert.ok(e instanceof ConstraintError, String(e));
      assert.match(e.message!, /left recursion/);
      return true;
    },
  );
  assert.throws(
    () => validateGbnf("  \n", checkGrammar),
    (e: { status?: number }) => e instanceof ConstraintError,
  );
});

test("confirmGbnf asks llama.cpp alone, after the length limit", () => {
  const text = 'root ::= "a" item\nitem ::= [b-c]';
  assert.equal(confirmGbnf(text, checkGrammar, "response_format"), text);
  assert.throws(
    () => confirmGbnf('root ::= root "a"', checkGrammar, "response_format"),
    (e: { status?: number; message?: string; param?: string }) =>
      e instanceof ConstraintError && e.param === "response_format" && /left recursion/.test(e.message!),
  );
  assert.throws(
    () => confirmGbnf(`root ::= "${"a".repeat(MAX_GBNF_LENGTH)}"`, checkGrammar),
    (e: { status?: number; message?: string }) => e instanceof ConstraintError && /too long/.test(e.message!),
  );
});

test("checkGbnfText refuses literals and classes that only UTF-8 cannot write (no dead ends under the mask)", () => {
  for (const [text, what] of [
    ['root ::= "a" | "\\uD800"', "the literal character U+D800"],
    ["root ::= [\\uDC00-\\uDFFF]", "no character UTF-8 can write"],
    ["root ::= [a\\uDC00]", "surrogates"],
    ["root ::= [\\uD800-\\uE000]", "surrogates"],
    ['root ::= "x" [\\U00110000]', "no character UTF-8 can write"],
    ["root ::= [a\\U00110000]", "above U+10FFFF"],
    ["root ::= [^\\x00-\\U0010FFFF]", "no character UTF-8 can write"],
  ] as const) {
    assert.throws(
      () => checkGbnfText(text),
      (e: { status?: number; message?: string }) => e instanceof ConstraintError && e.message!.includes(what),
      text,
    );
  }
  for (const text of [
    'root ::= [^"\\\\]*',
    "root ::= [\\u0000-\\uFFFF]+",
    'root ::= "😀" [é日]',
    "root ::= [\\U00100000-\\U0010FFFF]",
    "root ::= [\\U0010FFFF-\\U00120000]",
    '# a comment may say \\uD800\nroot ::= "ok" <[12]>?',
  ])
    checkGbnfText(text);
});

test("literalTrie matches exactly its texts, shared prefixes written once", async () => {
  const texts = ["a", "ab", "abc", "abd", "b", '"q\\"uote"', "ü😀x", "ü😀y", "zz"];
  const expression = literalTrie(texts);
  assert.equal(literalTrie(["x1", "x2"]), '"x" ("1" | "2")');
  const matches = await nativeMatcher(`root ::= ${expression}\n`);
  for (const text of texts) assert.ok(matches(text), text);
  for (const text of ["", "ac", "abcd", "c", "ü😀", "z", '"q\\"uote']) assert.ok(!matches(text), text);
});

test("guided_choice of 16 or more choices is a trie that matches exactly them", async () => {
  const choices = ["", "go", ...Array.from({ length: 18 }, (_, i) => `go-${i}`), "stop"];
  const gbnf = choiceToGbnf(choices);
  assert.match(gbnf, /^root ::= "" \| "go" \(""/);
  const matches = await nativeMatcher(gbnf);
  for (const choice of choices) assert.ok(matches(choice), choice);
  for (const text of ["g", "go-", "go-18", "go-1x", "stops"]) assert.ok(!matches(text), text);
});

/**
 * The size and cost bounds on client grammars (`GBNF_LIMITS` in `validateGbnf.ts`, issue 31): each is a
 * 400 naming the field and the bound, and grammars under them pass.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ConstraintError } from "../../../src/structured/errors.ts";
import { checkGbnf } from "../../../src/structured/gbnf/gbnfCheck.ts";
import { checkGbnfText, GBNF_LIMITS } from "../../../src/structured/gbnf/validateGbnf.ts";

const alternation = (n: number): string =>
  `root ::= ${Array.from({ length: n }, (_, i) => `"w${i}"`).join(" | ")}`;

/** `k` rules each doubling the parse paths of the next (`r_i ::= r_{i+1} "a" | r_{i+1} "b"`). */
const doubling = (k: number): string => {
  const lines = ["root ::= r0"];
  for (let i = 0; i < k; i++) lines.push(`r${i} ::= r${i + 1} "a" | r${i + 1} "b"`);
  lines.push(`r${k} ::= [a-z]`);
  return lines.join("\n");
};

/** The 400 `checkGbnfText` throws for `text`, checked to name `param`. */
function refusal(text: string, param = "guided_grammar"): ConstraintError {
  try {
    checkGbnfText(text, param);
  } catch (error) {
    assert.ok(error instanceof ConstraintError, String(error));
    assert.ok(error instanceof ConstraintError, String(error));
    assert.equal(error.param, param);
    return error;
  }
  assert.fail("the grammar was accepted");
}

describe("client grammar bounds", () => {
  test("the fan-out counts alternatives, multiplied through nested rules", () => {
    assert.equal(checkGbnf(alternation(100)).maxFanOut, 100);
    assert.equal(checkGbnf(doubling(10)).maxFanOut, 1024);
    assert.equal(checkGbnf('root ::= ("a" | "b")* "."').maxFanOut <= 4, true);
  });

  test("a 60,000-way alternation is refused, naming the bound; 4,096 pass", () => {
    const error = refusal(alternation(60_000));
    assert.match(error.message, /60000 parse paths/);
    assert.match(error.message, new RegExp(`at most ${GBNF_LIMITS.fanOut}`));
    checkGbnfText(alternation(GBNF_LIMITS.fanOut));
  });

  test("nested doubling past the bound is refused, under it accepted", () => {
    assert.match(refusal(doubling(13), "grammar").message, /8192 parse paths/);
    checkGbnfText(doubling(12));
    // 64 levels would be 2^64 paths: saturated, still refused.
    assert.match(refusal(doubling(64)).message, /over 2\^31 parse paths/);
  });

  test("group nesting past the bound is refused with where it happens; parentheses in literals do not count", () => {
    const deep = `root ::= ${"(".repeat(GBNF_LIMITS.nesting + 1)}"a"${")".repeat(GBNF_LIMITS.nesting + 1)}`;
    assert.match(
      refusal(deep).message,
      new RegExp(`nests groups ${GBNF_LIMITS.nesting + 1} deep \\(at most ${GBNF_LIMITS.nesting}; line 1`),
    );
    checkGbnfText(`root ::= ${"(".repeat(GBNF_LIMITS.nesting)}"a"${")".repeat(GBNF_LIMITS.nesting)}`);
    checkGbnfText(`root ::= "${"(".repeat(200)}" [(] # ${"(".repeat(200)}\n`);
  });

  test("too many rules or alternatives are refused", () => {
    const rules = Array.from({ length: GBNF_LIMITS.rules + 1 }, (_, i) => `r${i} ::= "x"`);
    const text = `root ::= r0\n${rules.join("\n")}`;
    assert.match(refusal(text).message, new RegExp(`rules after expanding .*at most ${GBNF_LIMITS.rules}`));
  });
});

describe("optional items in a row (issue 31: ambiguous parse stacks)", () => {
  const optionalRun = (items: number) => `root ::= ${Array(items).fill('("a"|"b"|"")').join(" ")} "c"`;

  test("each optional item opens 3 parse paths: 1,365 items are within the fan-out bound", () => {
    assert.equal(checkGbnf(optionalRun(300)).maxFanOut, 3 * 300 + 1);
    checkGbnfText(optionalRun(300));
    checkGbnfText(optionalRun(1365));
  });

  test("1,366 items are refused with a 400 naming the bound", () => {
    assert.throws(
      () => checkGbnfText(optionalRun(1366)),
      (error: unknown) =>
        error instanceof ConstraintError &&
        error instanceof ConstraintError &&
        error.message.includes("4099 parse paths") &&
        error.message.includes(`at most ${GBNF_LIMITS.fanOut}`),
    );
  });
});

describe("rules that can be empty only through other rules (QA: a 30-level grammar froze the server)", () => {
  /** `r_i ::= r_{i+1} r_{i+1} | "a"` for `levels` levels, the last rule able to be empty. */
  const nestedNullable = (levels: number) => {
    const lines = ['root ::= r0 "c"'];
    for (let i = 0; i < levels; i++) lines.push(`r${i} ::= r${i + 1} r${i + 1} | "a"`);
    lines.push(`r${levels} ::= "a" | "b" | ""`);
    return lines.join("\n");
  };

  test("a rule whose every element can be empty counts as empty: the paths multiply per level", () => {
    // r1 opens 3; r0 opens both references' 3 + 3, the empty way through them and its own "a" (8); root
    // opens r0's 8 and, since r0 can be empty, the "c" after it.
    assert.equal(checkGbnf(nestedNullable(1)).maxFanOut, 3 + 3 + 1 + 1 + 1);
    checkGbnfText(nestedNullable(9));
  });

  test("30 levels are refused with a 400 naming the bound, at once", () => {
    assert.match(refusal(nestedNullable(30)).message, new RegExp(`at most ${GBNF_LIMITS.fanOut}`));
  });
});

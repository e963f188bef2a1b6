/** compileConstraint: kinds, exact GBNF for a few schemas, caching, whitespace, choices and error params. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ConstraintError } from "../../../src/structured/errors.ts";
import { choiceToGbnf } from "../../../src/structured/gbnf/choiceToGbnf.ts";
import { clearCompileCache, compileConstraint } from "../../../src/structured/index.ts";
import { canonicalSchemaJson } from "../../../src/structured/jsonSchema/canonicalJson.ts";
import { LruCache } from "../../../src/structured/worker/lru.ts";
import { nativeMatcher } from "./nativeMatcher.ts";

const WS = 'ws ::= | " " | "\\n"{1,2} [ \\t]{0,20}';
const CHAR = [
  'json-char ::= [^"\\\\\\x00-\\x1F] | json-escape',
  'json-escape ::= "\\\\" (["\\\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))',
];
const lines = (...rows: string[]): string => `${rows.join("\n")}\n`;

describe("exact JSON Schema grammars", () => {
  test("object with required, optional and bounded properties", () => {
    const { gbnf } = compileConstraint("json_schema", {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 5 },
        age: { type: "integer", minimum: 0, maximum: 120 },
      },
      required: ["name"],
    });
    assert.equal(
      gbnf,
      lines(
        'root ::= "{" ws name-kv ("," ws age-kv)? ws "}"',
        WS,
        ...CHAR,
        'name ::= "\\"" json-char{0,5} "\\""',
        'name-kv ::= "\\"name\\"" ":" ws name',
        'age ::= [0-9] | [1-9] [0-9] | "1" ([0-1] [0-9] | "20")',
        'age-kv ::= "\\"age\\"" ":" ws age',
      ),
    );
  });
  test("all-optional properties: any subset, declared order", () => {
    const { gbnf } = compileConstraint("json_schema", {
      properties: { a: { type: "boolean" }, b: { type: "null" }, c: { const: 1 } },
    });
    assert.equal(
      gbnf,
      lines(
        'root ::= "{" ws ((a-kv root-rest-1 | b-kv root-rest | c-kv) ws)? "}"',
        WS,
        'json-boolean ::= "true" | "false"',
        'a-kv ::= "\\"a\\"" ":" ws json-boolean',
        'json-null ::= "null"',
        'b-kv ::= "\\"b\\"" ":" ws json-null',
        'c-kv ::= "\\"c\\"" ":" ws "1"',
        'root-rest ::= ("," ws c-kv)?',
        'root-rest-1 ::= ("," ws b-kv)? root-rest',
      ),
    );
  });
  test("array of enums with bounds", () => {
    const { gbnf } = compileConstraint("json_schema", {
      type: "array",
      items: { enum: ["x", "y"] },
      minItems: 1,
      maxItems: 3,
    });
    assert.equal(
      gbnf,
      lines(
        'root ::= "[" ws root-item root-next{0,2} ws "]"',
        WS,
        'root-item ::= "\\"x\\"" | "\\"y\\""',
        'root-next ::= "," ws root-item',
      ),
    );
  });
});

describe("kinds", () => {
  test("regex, choice, grammar, json_object", async () => {
    assert.equal(compileConstraint("regex", "[ab]+").gbnf, "root ::= [ab]+\n");
    assert.equal(compileConstraint("choice", ["a", "b"]).gbnf, 'root ::= "a" | "b"\n');
    assert.equal(compileConstraint("grammar", 'root ::= "x"').gbnf, 'root ::= "x"');
    const obj = await nativeMatcher(compileConstraint("json_object", undefined).gbnf);
    assert.ok(obj('{"a": [1, {"b": null}], "c": "d"}'));
    assert.ok(obj("{}"));
    assert.ok(!obj("[]"));
    assert.ok(!obj('{"a": 1}   '));
    const deep = (n: number): string => (n === 0 ? "1" : `{"k":${deep(n - 1)}}`);
    assert.ok(obj(deep(6)));
    assert.ok(!obj(deep(7)), "nesting is bounded");
  });
  test("json_schema given as JSON text", () => {
    assert.equal(
      compileConstraint("json_schema", '{"type":"null"}').gbnf,
      compileConstraint("json_schema", { type: "null" }).gbnf,
    );
    assert.throws(
      () => compileConstraint("json_schema", "{nope"),
      (e: { status?: number }) => e instanceof ConstraintError,
    );
  });
  test("errors carry the param of their kind, or the one given", () => {
    const param = (fn: () => unknown): unknown => {
      try {
        fn();
      } catch (e) {
        return (e as { param?: string }).param;
      }
      return undefined;
    };
    assert.equal(
      param(() => compileConstraint("regex", "(?=x)")),
      "guided_regex",
    );
    assert.equal(
      param(() => compileConstraint("choice", [])),
      "guided_choice",
    );
    assert.equal(
      param(() => compileConstraint("grammar", "root ::= (")),
      "guided_grammar",
    );
    assert.equal(
      param(() => compileConstraint("json_schema", { not: {} })),
      "guided_json",
    );
    assert.equal(
      param(() => compileConstraint("json_schema", { not: {} }, { param: "response_format" })),
      "response_format",
    );
    assert.equal(
      param(() => compileConstraint("json_object", null, { whitespacePattern: "(" })),
      "guided_whitespace_pattern",
    );
  });
  test("degenerate recursion is a 400, not a native crash", () => {
    assert.throws(
      () =>
        compileConstraint("json_schema", {
          $defs: { A: { anyOf: [{ $ref: "#/$defs/A" }, { type: "null" }] } },
          $ref: "#/$defs/A",
        }),
      (e: { status?: number; message?: string }) =>
        e instanceof ConstraintError && /left recursion/.test(e.message!),
    );
    assert.throws(
      () => compileConstraint("json_schema", { allOf: [{ $ref: "#" }] }),
      (e: { status?: number; message?: string }) =>
        e instanceof ConstraintError && /recursively/.test(e.message!),
    );
  });
});

describe("whitespace", () => {
  test("default whitespace is bounded", async () => {
    const matches = await nativeMatcher(
      compileConstraint("json_schema", { type: "array", items: { type: "integer" } }).gbnf,
    );
    assert.ok(matches("[1, 2,\n  3\n]"));
    assert.ok(matches(`[${" ".repeat(0)}1,\n${" ".repeat(20)}2]`));
    assert.ok(!matches(`[1,\n${" ".repeat(21)}2]`));
    assert.ok(!matches("[1,   2]"));
  });
  test("guided_whitespace_pattern replaces it", async () => {
    const { gbnf } = compileConstraint(
      "json_schema",
      { type: "array", items: { type: "integer" } },
      { whitespacePattern: "[ ]?" },
    );
    assert.match(gbnf, /^ws ::= " "\?$/m);
    const matches = await nativeMatcher(gbnf);
    assert.ok(matches("[1, 2]"));
    assert.ok(!matches("[1,\n2]"));
  });
});

describe("cache", () => {
  test("same spec returns the cached object; keyword order is canonical, property order is not", () => {
    clearCompileCache();
    const a = compileConstraint("json_schema", {
      type: "object",
      properties: { x: { type: "integer" }, y: { type: "string" } },
    });
    const b = compileConstraint("json_schema", {
      properties: { x: { type: "integer" }, y: { type: "string" } },
      type: "object",
    });
    const c = compileConstraint("json_schema", {
      type: "object",
      properties: { y: { type: "string" }, x: { type: "integer" } },
    });
    assert.equal(a, b);
    assert.notEqual(a.gbnf, c.gbnf);
    assert.ok(Object.isFrozen(a));
    const d = compileConstraint(
      "json_schema",
      { type: "object", properties: { x: { type: "integer" }, y: { type: "string" } } },
      { whitespacePattern: " ?" },
    );
    assert.notEqual(a, d);
  });
  test("canonical JSON", () => {
    assert.equal(
      canonicalSchemaJson({
        properties: { z: {}, y: { type: "integer", maximum: 2 } },
        $defs: { b: {}, a: {} },
        type: "object",
      }),
      '{"$defs":{"a":{},"b":{}},"properties":{"z":{},"y":{"maximum":2,"type":"integer"}},"type":"object"}',
    );
    assert.equal(canonicalSchemaJson({ const: { b: 1, a: 2 } }), '{"const":{"b":1,"a":2}}');
  });
  test("LRU evicts the least recently used entry", () => {
    const lru = new LruCache<string, number>(2);
    lru.set("a", 1);
    lru.set("b", 2);
    lru.get("a");
    lru.set("c", 3);
    assert.equal(lru.get("b"), undefined);
    assert.equal(lru.get("a"), 1);
    assert.equal(lru.size, 2);
  });
});

describe("choices", () => {
  test("escaping, duplicates, empty string", async () => {
    const gbnf = choiceToGbnf(['say "hi"', "a\\b", "line\nbreak", "é", "", 'say "hi"']);
    assert.equal(gbnf, 'root ::= "say \\"hi\\"" | "a\\\\b" | "line\\nbreak" | "\\u00E9" | ""\n');
    const matches = await nativeMatcher(gbnf);
    for (const s of ['say "hi"', "a\\b", "line\nbreak", "é", ""]) assert.ok(matches(s), s);
    assert.ok(!matches("say"));
  });
  test("refusals", () => {
    for (const bad of [[], "x", [1], null, ["ok", "\ud800"], ["\udc00a"]]) {
      assert.throws(
        () => choiceToGbnf(bad),
        (e: { status?: number }) => e instanceof ConstraintError,
      );
    }
  });
});

describe("large schemas", () => {
  test("extra keys beside hundreds of declared names sharing prefixes stay within llama.cpp's group limit", async () => {
    const names: string[] = [];
    for (const a of ["require", "disallow", "validate"])
      for (const b of ["Space", "Padding", "Newline", "Quote", "Comma", "Keyword", "Operator", "Brace"])
        for (const c of ["Before", "After", "Inside", "Around", "InObjects", "InArrays", "InCalls"])
          names.push(`${a}${b}${c}`);
    const schema = {
      type: "object",
      properties: Object.fromEntries(names.map((name) => [name, { type: "boolean" }])),
      additionalProperties: { type: "integer" },
    };
    const { gbnf } = compileConstraint("json_schema", schema);
    const matches = await nativeMatcher(gbnf);
    assert.ok(matches('{"requireSpaceBefore": true, "requireSpaceBeforeX": 1}'));
    assert.ok(matches('{"require": 2, "other": 3}'));
    assert.ok(!matches('{"requireSpaceBefore": 1}'), "a declared name is not an extra key");
    assert.ok(!matches('{"requireSpaceBefore": true, "validateBraceInCalls": 1}'));
  });
});

test("nullable: true adds null to a type (an enum or const still lists what is allowed), and nothing without a type", () => {
  const without = (schema: object) => compileConstraint("json_schema", schema).gbnf;
  // OpenAPI 3.0.3, as ajv reads it: no type, no effect.
  assert.equal(without({ nullable: true, enum: ["a", "b"] }), without({ enum: ["a", "b"] }));
  assert.equal(without({ nullable: true, minimum: 1 }), without({ minimum: 1 }));
  assert.equal(without({ type: "integer", nullable: true }), without({ type: ["integer", "null"] }));
  assert.equal(
    without({ type: "string", const: "c", nullable: true }),
    without({ type: ["string", "null"], const: "c" }),
  );
  assert.doesNotMatch(without({ type: "string", const: "c", nullable: true }), /null/);
});

/**
 * ConstraintCompiler: constraints compile on the worker thread exactly as `compileConstraint` compiles
 * them on the caller's, its 400s keep their message and param, and a compilation past the time limit is a
 * 400 after which the compiler goes on with a fresh worker.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { ConstraintError } from "../../../src/structured/errors.ts";
import { compileConstraint } from "../../../src/structured/index.ts";
import {
  ConstraintCompiler,
  DEFAULT_COMPILER_LIMITS,
} from "../../../src/structured/worker/compileService.ts";

const compiler = new ConstraintCompiler();
after(() => compiler.close());

test("compiles each kind on the worker as compileConstraint does, queued in order", async () => {
  const jobs = [
    [
      "json_schema",
      { type: "object", properties: { a: { type: "string", format: "date" } }, required: ["a"] },
    ],
    ["regex", "[a-c]{2,4}"],
    ["choice", ["yes", "no"]],
    ["json_object", null],
    ["grammar", 'root ::= "x"'],
  ] as const;
  const compiled = await Promise.all(jobs.map(([kind, spec]) => compiler.compile(kind, spec)));
  for (const [i, [kind, spec]] of jobs.entries()) {
    assert.equal(compiled[i]!.kind, kind);
    assert.equal(compiled[i]!.gbnf, compileConstraint(kind, spec).gbnf);
    assert.ok(Object.isFrozen(compiled[i]));
  }
});

test("a refused constraint is the compiler's 400, with its message and param", async () => {
  const schema = { type: "object", properties: { a: { $ref: "https://example.com/a.json" } } };
  await assert.rejects(compiler.compile("json_schema", schema, { param: "response_format" }), (error) => {
    assert.ok(error instanceof ConstraintError);
    assert.ok(error instanceof ConstraintError, String(error));
    assert.equal(error.param, "response_format");
    assert.match(error.message, /Unsupported \$ref .* only local references/);
    return true;
  });
  // The worker is still there for the next one.
  assert.equal((await compiler.compile("regex", "a+")).gbnf, compileConstraint("regex", "a+").gbnf);
});

test("a compilation past the time limit is a 400, and a fresh worker takes the next one", async () => {
  const hasty = new ConstraintCompiler({ ...DEFAULT_COMPILER_LIMITS, timeoutMs: 50 });
  try {
    // 100,000 listed values: about 0.4 s of compiling.
    const many = { enum: Array.from({ length: 100_000 }, (_, i) => `value-${i}`) };
    await assert.rejects(hasty.compile("json_schema", many, { param: "guided_json" }), (error) => {
      assert.ok(error instanceof ConstraintError);
      assert.ok(error instanceof ConstraintError, String(error));
      assert.equal(error.param, "guided_json");
      assert.match(error.message, /took longer than 0.05 s to compile/);
      return true;
    });
    assert.equal((await hasty.compile("choice", ["a"])).gbnf, compileConstraint("choice", ["a"]).gbnf);
  } finally {
    await hasty.close();
  }
});

test("a constraint whose signal aborts leaves at once: queued, dropped; compiling, its worker ends", async () => {
  const queue = new ConstraintCompiler();
  try {
    const slow = { enum: Array.from({ length: 50_000 }, (_, i) => `slow-${i}`) };
    const reason = new Error("client disconnected");
    // Queued behind a compilation that goes on: dropped, the other one finishes.
    const running = queue.compile("json_schema", slow);
    const controller = new AbortController();
    const queued = queue.compile("json_schema", { enum: ["queued"] }, {}, controller.signal);
    controller.abort(reason);
    await assert.rejects(queued, (error) => error === reason);
    assert.equal((await running).gbnf, compileConstraint("json_schema", slow).gbnf);
    // Compiling when its client leaves: the worker ends, and the next constraint gets a fresh one.
    const leaving = new AbortController();
    const abandoned = queue.compile("json_schema", { ...slow, title: "other" }, {}, leaving.signal);
    const next = queue.compile("regex", "b+");
    setTimeout(() => leaving.abort(reason), 20);
    await assert.rejects(abandoned, (error) => error === reason);
    assert.equal((await next).gbnf, compileConstraint("regex", "b+").gbnf);
    // Already aborted: never queued.
    await assert.rejects(
      queue.compile("regex", "a", {}, AbortSignal.abort(reason)),
      (error) => error === reason,
    );
  } finally {
    await queue.close();
  }
});

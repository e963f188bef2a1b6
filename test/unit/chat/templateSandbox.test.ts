/**
 * The template sandbox (issue #14): templates render in worker threads under range, output, memory and
 * time limits, and the main thread keeps running while a worker is stuck.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { renderChatTemplate, renderChatTemplateSandboxed } from "../../../src/chat/renderChatTemplate.ts";
import {
  DEFAULT_TEMPLATE_LIMITS,
  TemplateRenderError,
  TemplateSandbox,
} from "../../../src/chat/TemplateSandbox.ts";
import { ApiError } from "../../../src/errors.ts";

const sandbox = new TemplateSandbox({ ...DEFAULT_TEMPLATE_LIMITS, timeoutMs: 1_000, workers: 2 });
after(() => sandbox.close());

const context = {
  messages: [{ role: "user", content: "Hello there" }],
  addGenerationPrompt: true,
  bosToken: "<s>",
  eosToken: "</s>",
} as const;

const TEMPLATE = "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("expected a rejection");
}

describe("TemplateSandbox", () => {
  it("renders exactly as the in-thread renderer does", async () => {
    const sandboxed = await renderChatTemplateSandboxed(TEMPLATE, context, sandbox);
    assert.equal(sandboxed, renderChatTemplate(TEMPLATE, context));
    assert.equal(sandboxed, "<s>[user] Hello there\n");
  });

  it("refuses a range() over 100,000 items at once (jinja2's sandbox MAX_RANGE)", async () => {
    const error = await rejection(
      renderChatTemplateSandboxed("{% for i in range(1000000000) %}x{% endfor %}", context, sandbox),
    );
    assert.ok(error instanceof ApiError);
    assert.equal(error.status, 400);
    assert.equal(error.param, "chat_template");
    assert.equal(error.code, "chat_template_limit");
    assert.match(error.message, /range\(\) of 1000000000 items/);
    // Refused by the range limit before rendering, not stopped at the render deadline.
    assert.doesNotMatch(error.message, /longer than/);
    // The limit is the sandbox's: 100,000 items is still allowed.
    const ok = await sandbox.render("{{ range(100000) | length }}", {});
    assert.equal(ok, "100000");
  });

  it("terminates a render past the deadline while the event loop keeps turning", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 20);
    const started = Date.now();
    const error = await rejection(
      sandbox.render("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", {}),
    );
    clearInterval(timer);
    const elapsed = Date.now() - started;
    assert.ok(error instanceof TemplateRenderError);
    assert.equal(error.stage, "limit");
    assert.match(error.message, /longer than 1 s/);
    // The deadline is a lower bound; how far past it the answer comes depends on the machine's load.
    assert.ok(elapsed >= 1_000, `took ${elapsed} ms`);
    // A main thread blocked by the render would not tick at all; a turning one ticks about every 20 ms
    // (fewer on a loaded machine: a quarter of that is the bound).
    assert.ok(ticks >= Math.min(10, elapsed / 80), `the main thread ticked ${ticks} times in ${elapsed} ms`);
    // A fresh worker takes the stuck one's place.
    assert.equal(await sandbox.render("{{ 1 + 1 }}", {}), "2");
  });

  it("refuses output past the limit and V8's own string limit", async () => {
    const small = new TemplateSandbox({ ...DEFAULT_TEMPLATE_LIMITS, maxOutputChars: 1_000, workers: 1 });
    try {
      const long = await rejection(small.render("{% for i in range(2000) %}x{% endfor %}", {}));
      assert.ok(long instanceof TemplateRenderError);
      assert.equal(long.stage, "limit");
      assert.match(long.message, /2000 characters, more than the sandbox allows \(1000\)/);
      const doubling = await rejection(
        small.render(
          "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
          {},
        ),
      );
      assert.ok(doubling instanceof TemplateRenderError);
      assert.equal(doubling.stage, "limit");
    } finally {
      await small.close();
    }
  });

  it("keeps parse and template errors apart from limits", async () => {
    const parse = await rejection(renderChatTemplateSandboxed("{% for %}", context, sandbox));
    assert.ok(parse instanceof ApiError);
    assert.equal(parse.code, "invalid_chat_template");
    const raised = await rejection(
      renderChatTemplateSandboxed("{{ raise_exception('roles must alternate') }}", context, sandbox),
    );
    assert.ok(raised instanceof ApiError);
    assert.equal(raised.code, "chat_template_error");
    assert.equal(raised.param, "messages");
    assert.match(raised.message, /roles must alternate/);
  });

  it("runs renders side by side: one stuck worker does not hold up another", async () => {
    let stuckEnded = false;
    const stuck = rejection(
      sandbox.render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {}),
    ).finally(() => {
      stuckEnded = true;
    });
    assert.equal(await sandbox.render("{{ 'fast' }}", {}), "fast");
    // Order, not time: the second render answered while the stuck one was still running to its deadline.
    assert.equal(stuckEnded, false, "the second worker answered only after the stuck render ended");
    assert.ok((await stuck) instanceof TemplateRenderError);
  });
});

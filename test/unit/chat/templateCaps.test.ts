/** Unit tests of the jinja extensions (`jinjaExtensions.mjs`) and of caps probing and polyfills (`templateCaps.ts`). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Template } from "@huggingface/jinja";
import type { TemplateMessage } from "../../../src/chat/messages.ts";
import { renderChatTemplate } from "../../../src/chat/renderChatTemplate.ts";
import { shapeConversation, type TemplateCaps, templateCaps } from "../../../src/chat/templateCaps.ts";

const ALL: TemplateCaps = {
  systemRole: true,
  tools: true,
  toolCalls: true,
  toolResponses: true,
  parallelToolCalls: true,
  stringArguments: false,
  alternatingRoles: false,
  nineCharToolCallIds: false,
};

const render = (text: string) =>
  renderChatTemplate(text, {
    messages: [{ role: "user", content: "u" }],
    addGenerationPrompt: false,
    bosToken: "",
    eosToken: "",
  });

describe("jinja extensions", () => {
  it("undefined + string, for over none, integer keys, min, string, pop, format", () => {
    assert.equal(render("{{ x + 'a' }}|{{ 'b' + x }}"), "a|b");
    assert.equal(render("{% for t in none %}x{% endfor %}ok"), "ok");
    assert.equal(
      render(
        "{% set d = {2: 'two', 1: 'one'} %}{{ d[1] }}{% for k, v in d|dictsort %}{{ k + 1 }}{{ v }}{% endfor %}",
      ),
      "one2one3two",
    );
    assert.equal(render("{{ [3, 1, 2]|min }}{{ [3, 1, 2]|max }}"), "13");
    assert.equal(render("{{ {'a': 1}|string }}"), '{"a": 1}');
    assert.equal(
      render("{% set l = [1, 2, 3] %}{{ l.pop(0) }}{{ l.pop() }}{% set _ = l.append(9) %}{{ l|join(',') }}"),
      "132,9",
    );
    assert.equal(render("{{ '<{}|{0}>'.format('x') }}"), "<x|x>");
    assert.equal(render("{% for a, b in [('x', 'y')] %}{{ a }}{{ b }}{% endfor %}"), "xy");
    assert.equal(render("[{{ nothing|trim }}]{{ nothing|length }}"), "[]0");
  });
});

describe("templateCaps and shapeConversation", () => {
  it("probes a template that refuses system and demands alternation", () => {
    const text =
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}" +
      "{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('alternate') }}{% endif %}" +
      "{{ m.role }}:{{ m.content }};{% endfor %}";
    const compiled = new Template(text);
    const caps = templateCaps(text, (v) => compiled.render(v));
    assert.equal(caps.systemRole, false);
    assert.equal(caps.alternatingRoles, true);
    assert.equal(caps.tools, false);
  });

  it("merges system into the first user turn and consecutive same-role turns", () => {
    const messages: TemplateMessage[] = [
      { role: "system", content: "S" },
      { role: "user", content: "A" },
      { role: "user", content: "B" },
    ];
    const shaped = shapeConversation(messages, null, { ...ALL, systemRole: false, alternatingRoles: true });
    assert.deepEqual(shaped.messages, [{ role: "user", content: "S\n\nA\n\nB" }]);
    assert.equal(messages.length, 3, "the input is not changed");
  });

  it("cuts ids to 9 alphanumerics on both the call and its result, and writes calls as text", () => {
    const messages: TemplateMessage[] = [
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { id: "call_abc123xyz", type: "function", function: { name: "f", arguments: { a: 1 } } },
        ],
      },
      { role: "tool", content: "r", tool_call_id: "call_abc123xyz", name: "f" },
    ];
    const ids = shapeConversation(messages, null, { ...ALL, nineCharToolCallIds: true }).messages;
    assert.equal(ids[0]?.tool_calls?.[0]?.id, "abc123xyz");
    assert.equal(ids[1]?.tool_call_id, "abc123xyz");
    const text = shapeConversation(messages, null, {
      ...ALL,
      toolCalls: false,
      toolResponses: false,
    }).messages;
    assert.equal(text[0]?.content, '{"tool_calls":[{"name":"f","arguments":{"a":1},"id":"call_abc123xyz"}]}');
    assert.deepEqual(text[1], {
      role: "user",
      content: '{"tool_response":{"content":"r","tool":"f","tool_call_id":"call_abc123xyz"}}',
    });
  });
});

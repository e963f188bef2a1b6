// Forced tool calls in the XML and token families' own markup (issue 26): `resolveToolCalling` picks the
// family grammar of `toolGrammars.ts` from the real chat template, llama.cpp's grammar engine admits the
// texts the family writes (and refuses the ones breaking the schema), and the family's parser reads each
// admitted text back into tool calls whose arguments validate against the tool's parameters (ajv).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { JsonSchema } from "../../../src/chat/index.ts";
import type { ChatCompletionRequest } from "../../../src/protocol/chat.ts";
import { wrapCalls } from "../../../src/serving/guided/chatGrammar.ts";
import { resolveToolCalling } from "../../../src/serving/guided/chatTools.ts";
import { toolGrammar } from "../../../src/serving/guided/toolGrammars.ts";
import { prefixRules } from "../../../src/structured/gbnf/ruleNames.ts";
import { checkGbnfText, compileConstraint } from "../../../src/structured/index.ts";
import { type Call, FAMILIES } from "../../helpers/familyCallWriters.ts";
import { runParser } from "../../helpers/parserSuite.ts";
import { ajvValidator } from "../../helpers/structuredAjv.ts";
import { nativeMatcher } from "../structured/nativeMatcher.ts";

const weather = {
  type: "object",
  properties: {
    city: { type: "string", description: "the city" },
    days: { type: "integer", minimum: 1 },
    unit: { type: "string", enum: ["c", "f"] },
    tags: { type: "array", items: { type: "string" } },
  },
  required: ["city", "days"],
  additionalProperties: false,
};
const tools = [
  { type: "function" as const, function: { name: "get_weather", parameters: weather } },
  { type: "function" as const, function: { name: "ping", parameters: {} } },
];
const validWeather = ajvValidator(weather);
const TEMPLATES = join(import.meta.dirname, "../../../native/build/llama.cpp/models/templates");
const template = (file: string) => readFileSync(join(TEMPLATES, file), "utf8");

function request(extra: Partial<ChatCompletionRequest>): ChatCompletionRequest {
  return {
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    tools,
    ...extra,
  } as ChatCompletionRequest;
}

/** The family grammar of a forced request (compiled as chatGrammar compiles it), its matcher and parser. */
async function forced(body: ChatCompletionRequest, file: string) {
  const calling = resolveToolCalling(body, undefined, template(file));
  assert.equal(calling.mode, "forced");
  assert.ok(calling.native, "a family grammar");
  const compile = async (schema: JsonSchema) => compileConstraint("json_schema", schema).gbnf;
  const gbnf = await toolGrammar(
    calling.native.family,
    calling.native.tools,
    calling.native.repeat,
    compile,
    prefixRules,
  );
  checkGbnfText(gbnf);
  const matches = await nativeMatcher(gbnf);
  const parse = (text: string): Call[] => {
    assert.ok(calling.parser);
    const half = Math.floor(text.length / 2);
    const result = runParser({ toolParser: calling.parser, tools }, [text.slice(0, half), text.slice(half)]);
    assert.equal((result.content ?? "").trim(), "", `no content left over: ${result.content}`);
    return result.toolCalls.map((call) => ({
      name: call.function.name,
      args: JSON.parse(call.function.arguments) as Record<string, unknown>,
    }));
  };
  return { calling, gbnf, matches, parse };
}

const GOOD: Call[][] = [
  [{ name: "get_weather", args: { city: "Paris", days: 3 } }],
  [{ name: "get_weather", args: { city: "New York <NY> & 2 > 1", days: 10, unit: "f" } }],
  [{ name: "get_weather", args: { city: "", days: 1, unit: "c", tags: ["a", "b c"] } }],
  [{ name: "ping", args: {} }],
];
const BAD: Call[][] = [
  [{ name: "get_weather", args: { city: "Paris" } }],
  [{ name: "get_weather", args: { city: "Paris", days: 0 } }],
  [{ name: "get_weather", args: { city: "Paris", days: 2, unit: "k" } }],
  [{ name: "get_weather", args: { city: "Paris", days: 2, extra: 1 } }],
  [{ name: "nope", args: {} }],
];

describe("forced tool calls in the XML and token families' markup", () => {
  for (const [family, { file, write }] of Object.entries(FAMILIES)) {
    it(`${family} (${file}): admitted calls read back by the ${family} parser, schema breaches refused`, async () => {
      const { calling, matches, parse } = await forced(request({ tool_choice: "required" }), file);
      assert.equal(calling.parser, family);
      assert.equal(calling.native?.family, family);
      for (const calls of GOOD) {
        const text = write(calls);
        assert.ok(matches(text), text);
        const parsed = parse(text);
        assert.deepEqual(parsed, calls, text);
        for (const call of parsed) if (call.name === "get_weather") assert.ok(validWeather(call.args), text);
      }
      for (const calls of BAD) assert.ok(!matches(write(calls)), write(calls));
      // One call only unless parallel_tool_calls is true.
      assert.ok(!matches(write([...(GOOD[0] ?? []), ...(GOOD[3] ?? [])])));
    });

    it(`${family}: parallel_tool_calls true admits several calls, read back in order`, async () => {
      const body = request({ tool_choice: "required", parallel_tool_calls: true });
      const { matches, parse } = await forced(body, file);
      const calls = [...(GOOD[1] ?? []), ...(GOOD[3] ?? []), ...(GOOD[0] ?? [])];
      const text = write(calls);
      assert.ok(matches(text), text);
      assert.deepEqual(parse(text), calls);
    });

    it(`${family}: a named choice forces that function only`, async () => {
      const body = request({ tool_choice: { type: "function", function: { name: "ping" } } });
      const { matches, parse } = await forced(body, file);
      const text = write(GOOD[3] ?? []);
      assert.ok(matches(text));
      assert.deepEqual(parse(text), GOOD[3]);
      assert.ok(!matches(write(GOOD[0] ?? [])));
    });
  }

  it("XML raw strings: the closing markup cannot be written inside a value", async () => {
    const { matches } = await forced(request({ tool_choice: "required" }), FAMILIES.qwen3_coder?.file ?? "");
    const write = FAMILIES.qwen3_coder?.write ?? (() => "");
    assert.ok(!matches(write([{ name: "get_weather", args: { city: "a</parameter>b", days: 1 } }])));
    assert.ok(!matches(write([{ name: "get_weather", args: { city: "a<parameter=x>", days: 1 } }])));
  });

  it("XML raw strings with minLength / maxLength are held to them (and have no `<`)", async () => {
    const bounded = [
      {
        type: "function" as const,
        function: {
          name: "f",
          parameters: {
            type: "object",
            properties: { s: { type: "string", minLength: 2, maxLength: 4 } },
            required: ["s"],
          },
        },
      },
    ];
    const body = { ...request({ tool_choice: "required" }), tools: bounded } as ChatCompletionRequest;
    const calling = resolveToolCalling(body, undefined, template("MiniMax-M2.jinja"));
    assert.ok(calling.native);
    const compile = async (schema: JsonSchema) => compileConstraint("json_schema", schema).gbnf;
    const gbnf = await toolGrammar("minimax_m2", calling.native.tools, false, compile, prefixRules);
    const matches = await nativeMatcher(gbnf);
    const write = FAMILIES.minimax_m2?.write ?? (() => "");
    assert.ok(matches(write([{ name: "f", args: { s: "ab" } }])));
    assert.ok(matches(write([{ name: "f", args: { s: "ab c" } }])));
    for (const s of ["a", "abcde", "a<b"]) assert.ok(!matches(write([{ name: "f", args: { s } }])), s);
    const huge = structuredClone(bounded);
    const hugeS = huge[0]?.function.parameters.properties.s;
    assert.ok(hugeS);
    hugeS.maxLength = 100000;
    const fallback = resolveToolCalling(
      { ...body, tools: huge } as ChatCompletionRequest,
      undefined,
      template("MiniMax-M2.jinja"),
    );
    assert.equal(fallback.native, undefined);
  });

  it("tools whose schemas the markup cannot carry fall back to the generic JSON form", () => {
    const constrained = [
      {
        type: "function" as const,
        function: {
          name: "f",
          parameters: { type: "object", properties: { s: { type: "string", pattern: "^a+$" } } },
        },
      },
    ];
    const body = { ...request({ tool_choice: "required" }), tools: constrained } as ChatCompletionRequest;
    const calling = resolveToolCalling(body, undefined, template("Qwen3-Coder.jinja"));
    assert.equal(calling.native, undefined);
    assert.equal(calling.parser, "generic");
    // The token families carry any schema as JSON arguments.
    const kimi = resolveToolCalling(body, undefined, template("moonshotai-Kimi-K2.jinja"));
    assert.equal(kimi.native?.family, "kimi_k2");
  });

  it("gpt-oss (Harmony): one commentary message to=functions.NAME, read back by the Harmony parser; never two", async () => {
    const file = "openai-gpt-oss-120b.jinja";
    const write = (call: Call) =>
      `<|channel|>commentary to=functions.${call.name} <|constrain|>json<|message|>${JSON.stringify(call.args)}`;
    for (const parallel of [false, true]) {
      const { calling, matches } = await forced(
        request({ tool_choice: "required", parallel_tool_calls: parallel }),
        file,
      );
      assert.equal(calling.parser, "openai");
      assert.equal(calling.native?.family, "openai");
      for (const [call] of GOOD) {
        assert.ok(call);
        const text = write(call);
        assert.ok(matches(text), text);
        const parsed = runParser({ reasoningParser: "openai_gptoss", toolParser: "openai", tools }, [text]);
        assert.equal(parsed.content ?? "", "");
        assert.deepEqual(
          parsed.toolCalls.map((entry) => ({
            name: entry.function.name,
            args: JSON.parse(entry.function.arguments),
          })),
          [call],
        );
      }
      for (const [call] of BAD) assert.ok(call && !matches(write(call)), JSON.stringify(call));
      // The model's <|call|> ends generation: the grammar admits one call, and no literal <|call|>.
      const first = write(GOOD[0]?.[0] as Call);
      assert.ok(!matches(`${first}<|call|>`));
      assert.ok(!matches(`${first}<|start|>assistant${write(GOOD[3]?.[0] as Call)}`));
    }
    // A name with a space cannot be a Harmony recipient: the generic JSON form is forced instead.
    const spaced = [{ type: "function" as const, function: { name: "get weather", parameters: weather } }];
    const body = { ...request({ tool_choice: "required" }), tools: spaced } as ChatCompletionRequest;
    assert.equal(resolveToolCalling(body, undefined, template(file)).parser, "generic");
  });

  it("Mistral's tokenizer v3 templates (no [ARGS]) force [TOOL_CALLS][{…}], read back by the mistral parser", async () => {
    const calling = resolveToolCalling(
      request({ tool_choice: "required" }),
      undefined,
      template("mistralai-Mistral-Nemo-Instruct-2407.jinja"),
    );
    assert.equal(calling.parser, "mistral");
    assert.equal(calling.native, undefined);
    assert.ok(calling.markup && calling.schema);
    const { gbnf, root } = wrapCalls(compileConstraint("json_schema", calling.schema).gbnf, calling.markup);
    const matches = await nativeMatcher(gbnf, root);
    const text = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}]';
    assert.ok(matches(text));
    assert.ok(!matches('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}]'));
    const parsed = runParser({ toolParser: "mistral", tools }, [text]).toolCalls;
    assert.deepEqual(
      parsed.map((call) => [call.function.name, JSON.parse(call.function.arguments)]),
      [["get_weather", { city: "Rome", days: 2 }]],
    );
  });
});

/**
 * The constraint kinds `bench/structured.ts` measures (issue 18's targets): what each constrained
 * request adds to the body, the endpoint, the server it runs on (default or `--jump-forward`), the
 * target ratio against unconstrained decoding, and how an output that finished is checked.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ValidateFunction } from "ajv";
import { projectRoot } from "../../src/paths.ts";
import { ajvValidator } from "../../test/helpers/structuredAjv.ts";
import { guidedSchema } from "./peerWorkloads.ts";
import type { Endpoint, StreamTiming } from "./structuredServer.ts";

/** The names `--only` takes, in run order. */
export const KIND_NAMES = [
  "json_schema",
  "json_object",
  "regex",
  "choice",
  "gbnf",
  "tool_call",
  "long_keys",
  "long_keys_jf",
] as const;

/** One of {@link KIND_NAMES}. */
export type KindName = (typeof KIND_NAMES)[number];

/** Which server a kind runs on: the default flags, or the same plus `--jump-forward`. */
export type ServerVariant = "default" | "jump-forward";

/** A constraint kind. */
export type ConstraintKind = {
  name: KindName;
  /** How the report names it. */
  label: string;
  endpoint: Endpoint;
  server: ServerVariant;
  /** Target constrained / unconstrained decode tok/s (issue 18); null: reported without a target. */
  target: number | null;
  /** The fields a constrained request adds (the unconstrained one adds `ignore_eos` instead). */
  fields: Record<string, unknown>;
  /** Finish reasons of a finished output, whose validity is checked. */
  finished: readonly string[];
  /** Why the output of a finished request is invalid, or null when it is valid. */
  check: (timing: StreamTiming) => string | null;
};

/** The regex kind's pattern: a sentence of 9 to 31 lowercase words (long outputs). */
export const REGEX_PATTERN = "[A-Z][a-z]{2,12}( [a-z]{2,12}){8,30}\\.";

/** The choice kind's choices: long sentences, so that the decode rate is measurable. */
export const CHOICES = [
  "The package left the warehouse this morning and should arrive at your door within three business days.",
  "Your order is waiting for a payment confirmation from the bank before we can prepare it for shipping.",
  "The courier tried to deliver the parcel twice but nobody was at home to sign for it.",
  "We are sorry to tell you that one of the items in your order is out of stock until next month.",
];

/** A chess move of `test/fixtures/grammars/chess.gbnf`, as a regex. */
const MOVE = "(?:(?:[a-h]x)?[a-h][1-8](?:=[NBKQR])?|[NBKQR][a-h]?[1-8]?x?[a-h][1-8]|O-O(?:-O)?)[+#]?";

/** The whole language of `chess.gbnf` (numbered lines of two moves), to check finished outputs. */
export const CHESS_REGEX = new RegExp(`^1\\. ${MOVE} ${MOVE}\\n(?:[1-9][0-9]?\\. ${MOVE} ${MOVE}\\n)+$`);

/** The long-keys kind's schema: 7 required properties with 28–44-character names and short values. */
export const LONG_KEYS_SCHEMA = {
  type: "object",
  properties: {
    customer_shipping_address_line_one: { type: "string", maxLength: 8 },
    customer_preferred_delivery_time_window: { enum: ["am", "pm", "any"] },
    number_of_items_in_the_shipping_package: { type: "integer", minimum: 0, maximum: 99 },
    requires_signature_on_delivery_confirmation: { type: "boolean" },
    customer_loyalty_program_membership_tier: { enum: ["gold", "silver", "none"] },
    estimated_delivery_distance_in_kilometers: { type: "integer", minimum: 0, maximum: 999 },
    special_handling_instructions_for_the_courier: { type: "string", maxLength: 8 },
  },
  required: [
    "customer_shipping_address_line_one",
    "customer_preferred_delivery_time_window",
    "number_of_items_in_the_shipping_package",
    "requires_signature_on_delivery_confirmation",
    "customer_loyalty_program_membership_tier",
    "estimated_delivery_distance_in_kilometers",
    "special_handling_instructions_for_the_courier",
  ],
  additionalProperties: false,
};

/** The forced tool: one function whose parameters are an object of 4 required properties. */
export const SHIP_TOOL = {
  type: "function",
  function: {
    name: "ship_order",
    description: "Ship an order to a city.",
    parameters: {
      type: "object",
      properties: {
        destination_city: { type: "string", maxLength: 12 },
        quantity: { type: "integer", minimum: 1, maximum: 99 },
        express: { type: "boolean" },
        carrier: { enum: ["ups", "fedex", "dhl", "post"] },
      },
      required: ["destination_city", "quantity", "express", "carrier"],
      additionalProperties: false,
    },
  },
};

/** JSON.parse, or the parse error's message. */
function parse(text: string): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    return { error: `not JSON: ${(error as Error).message}` };
  }
}

/** A check of the text against a JSON Schema (JSON.parse, then ajv). */
function schemaCheck(validate: ValidateFunction, text: string): string | null {
  const parsed = parse(text);
  if ("error" in parsed) return parsed.error;
  if (validate(parsed.value)) return null;
  return `schema: ${(validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ")}`;
}

function jsonSchemaFormat(name: string, schema: unknown): Record<string, unknown> {
  return { response_format: { type: "json_schema", json_schema: { name, schema, strict: true } } };
}

/** Every kind, in {@link KIND_NAMES} order. */
export function constraintKinds(): ConstraintKind[] {
  const order = guidedSchema();
  const orderCheck = ajvValidator(order);
  const longKeysCheck = ajvValidator(LONG_KEYS_SCHEMA);
  const toolCheck = ajvValidator(SHIP_TOOL.function.parameters);
  const regex = new RegExp(`^(?:${REGEX_PATTERN})$`);
  // chess.gbnf, not json.gbnf: the JSON grammar lets the model close `{}` at once (2–5 tokens, no rate).
  const gbnf = readFileSync(join(projectRoot, "test/fixtures/grammars/chess.gbnf"), "utf8");
  const longKeys = (name: KindName, server: ServerVariant, target: number | null): ConstraintKind => ({
    name,
    label: `long fixed keys, json_schema (${server === "jump-forward" ? "`--jump-forward`" : "default server"})`,
    endpoint: "chat",
    server,
    target,
    fields: jsonSchemaFormat("delivery", LONG_KEYS_SCHEMA),
    finished: ["stop"],
    check: (t) => schemaCheck(longKeysCheck, t.text),
  });
  return [
    {
      name: "json_schema",
      label: "json_schema api-order (chat `response_format`)",
      endpoint: "chat",
      server: "default",
      target: 0.9,
      fields: jsonSchemaFormat("order", order),
      finished: ["stop"],
      check: (t) => schemaCheck(orderCheck, t.text),
    },
    {
      name: "json_object",
      label: "json_object (chat `response_format`)",
      endpoint: "chat",
      server: "default",
      target: 0.85,
      fields: { response_format: { type: "json_object" } },
      finished: ["stop"],
      check: (t) => {
        const parsed = parse(t.text);
        if ("error" in parsed) return parsed.error;
        const { value } = parsed;
        return typeof value === "object" && value !== null && !Array.isArray(value) ? null : "not an object";
      },
    },
    {
      name: "regex",
      label: `regex (completions \`guided_regex\` \`${REGEX_PATTERN}\`)`,
      endpoint: "completions",
      server: "default",
      target: 0.85,
      fields: { guided_regex: REGEX_PATTERN },
      finished: ["stop"],
      check: (t) => (regex.test(t.text) ? null : "no full match of the pattern"),
    },
    {
      name: "choice",
      label: `choice (completions \`guided_choice\`, ${CHOICES.length} sentences)`,
      endpoint: "completions",
      server: "default",
      target: 0.85,
      fields: { guided_choice: CHOICES },
      finished: ["stop"],
      check: (t) => (CHOICES.includes(t.text) ? null : "not one of the choices"),
    },
    {
      name: "gbnf",
      label: "GBNF (completions `guided_grammar` test/fixtures/grammars/chess.gbnf)",
      endpoint: "completions",
      server: "default",
      target: 0.85,
      fields: { guided_grammar: gbnf },
      finished: ["stop"],
      check: (t) => (CHESS_REGEX.test(t.text) ? null : "not in chess.gbnf's language"),
    },
    {
      name: "tool_call",
      label: 'forced tool call (chat, one tool, `tool_choice: "required"`)',
      endpoint: "chat",
      server: "default",
      target: 0.85,
      fields: { tools: [SHIP_TOOL], tool_choice: "required" },
      finished: ["stop", "tool_calls"],
      check: (t) => {
        if (t.toolCalls.length === 0) return `no tool call (content ${JSON.stringify(t.text.slice(0, 80))})`;
        for (const call of t.toolCalls) {
          if (call.name !== SHIP_TOOL.function.name) return `tool name ${JSON.stringify(call.name)}`;
          const problem = schemaCheck(toolCheck, call.arguments);
          if (problem) return `arguments ${problem}`;
        }
        return null;
      },
    },
    longKeys("long_keys", "default", null),
    longKeys("long_keys_jf", "jump-forward", 1.0),
  ];
}

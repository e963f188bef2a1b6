// What the client compatibility tests (test/clients/*.test.ts) share: the zod schemas of the structured
// output and tool tests, and the request sizes. The schemas are bounded (enums, integer ranges, short
// strings) so that a forced output of the tiny stories260K model always completes within the token
// budget; the tests assert only what forcing guarantees (valid structure), never content.
import { z } from "zod";

/** A structured-output schema: every field required, every value bounded. */
export const characterSchema = z.object({
  name: z.string().max(12),
  age: z.number().int().min(1).max(99),
  mood: z.enum(["happy", "sad", "sleepy"]),
  hasPet: z.boolean(),
});

/** The parameters of the `get_weather` function tool. */
export const weatherArgsSchema = z.object({
  city: z.string().max(16),
  unit: z.enum(["celsius", "fahrenheit"]),
});

/** {@link weatherArgsSchema} as JSON Schema, for APIs whose tools take a plain schema (Responses, Anthropic). */
export const weatherArgsJsonSchema = {
  type: "object" as const,
  properties: {
    city: { type: "string", maxLength: 16 },
    unit: { type: "string", enum: ["celsius", "fahrenheit"] },
  },
  required: ["city", "unit"],
  additionalProperties: false,
};

/** Name and description of the `get_weather` function tool. */
export const weatherTool = { name: "get_weather", description: "Current weather in a city" } as const;

/** Tokens allowed for a forced JSON output: far more than the bounded schemas above can take. */
export const FORCED_MAX_TOKENS = 300;

/** Greedy continuation of "Once upon a time" on stories260K (see ../shared/DESIGN.md). */
export const GREEDY_START = ", there was a little girl named Lily";

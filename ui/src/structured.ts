import { checkJsonSchema } from "./jsonSchemaCheck.ts";

/** The structured-output choices of the playground. */
export type StructuredKind = "none" | "json_schema" | "regex" | "choice";

/** What the user typed in the structured-output box. */
export type StructuredSpec = { kind: StructuredKind; text: string };

/** A setting the user must fix before the request can be sent. */
export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SettingsError";
  }
}

/**
 * The request fields for a structured-output spec: `response_format: {type: "json_schema", ...}`,
 * vLLM's `guided_regex` or `guided_choice` (one choice per line).
 * @throws SettingsError when the schema is not a JSON object, or the regex or choice list is empty.
 */
export function structuredFields(spec: StructuredSpec): Record<string, unknown> {
  switch (spec.kind) {
    case "none":
      return {};
    case "json_schema": {
      const schema = parseSchema(spec.text);
      const title = typeof schema.title === "string" ? schema.title.replace(/[^A-Za-z0-9_-]/g, "_") : "";
      return {
        response_format: { type: "json_schema", json_schema: { name: title || "output", schema } },
      };
    }
    case "regex":
      if (spec.text.trim() === "") throw new SettingsError("Enter a regular expression.");
      return { guided_regex: spec.text.trim() };
    case "choice": {
      const choices = choiceLines(spec.text);
      if (choices.length === 0) throw new SettingsError("Enter at least one choice (one per line).");
      return { guided_choice: choices };
    }
  }
}

/** The outcome of checking a reply against its structured-output spec. */
export type StructuredCheck = { valid: boolean; message: string };

/**
 * Checks a finished reply against the spec it was generated under: JSON parsed and validated against
 * the schema, the whole text matched by the regex, or the text equal to one of the choices.
 */
export function checkStructured(spec: StructuredSpec, text: string): StructuredCheck | null {
  switch (spec.kind) {
    case "none":
      return null;
    case "json_schema": {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        return { valid: false, message: `not valid JSON: ${(error as Error).message}` };
      }
      const problems = checkJsonSchema(parseSchema(spec.text), value);
      return problems.length === 0
        ? { valid: true, message: "valid JSON, matches the schema" }
        : { valid: false, message: `JSON does not match the schema: ${problems.slice(0, 3).join("; ")}` };
    }
    case "regex": {
      let pattern: RegExp;
      try {
        pattern = new RegExp(`^(?:${spec.text.trim()})$`, "u");
      } catch (error) {
        return { valid: false, message: `JavaScript cannot compile the regex: ${(error as Error).message}` };
      }
      return pattern.test(text)
        ? { valid: true, message: "matches the regex" }
        : { valid: false, message: "does not match the regex" };
    }
    case "choice":
      return choiceLines(spec.text).includes(text)
        ? { valid: true, message: "is one of the choices" }
        : { valid: false, message: "is not one of the choices" };
  }
}

function parseSchema(text: string): Record<string, unknown> {
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch (error) {
    throw new SettingsError(`The JSON schema is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof schema !== "object" || schema === null || Array.isArray(schema))
    throw new SettingsError("The JSON schema must be a JSON object.");
  return schema as Record<string, unknown>;
}

function choiceLines(text: string): string[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
}

/** Example specs shown when a kind is picked with an empty box. */
export const STRUCTURED_EXAMPLES: Record<Exclude<StructuredKind, "none">, string> = {
  json_schema: JSON.stringify(
    {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 20 },
        mood: { enum: ["happy", "sad", "sleepy"] },
        age: { type: "integer", minimum: 1, maximum: 9 },
      },
      required: ["name", "mood", "age"],
      additionalProperties: false,
    },
    null,
    2,
  ),
  regex: "(yes|no), because [a-z ]{1,40}\\.",
  choice: "happy\nsad\nsleepy",
};

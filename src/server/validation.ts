import type { z } from "zod";
import { badRequest, formatFieldPath, type ValidationIssue, validationFailed } from "../errors.ts";

/** zod issue codes that mean "a value of the right type, out of range": a 400, not a 422. */
const RANGE_ISSUES = new Set(["too_big", "too_small", "not_multiple_of"]);

/**
 * Validates a parsed JSON body against a request schema: the edge where raw JSON becomes a typed request.
 * @throws ApiError 422 with FastAPI's `detail` list when a field is missing or has the wrong type;
 *   400 naming the field when every problem is a value out of range (as vLLM does for its checks).
 */
export function parseBody<Schema extends z.ZodType>(schema: Schema, body: unknown): z.infer<Schema> {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw validationFailed([
      { loc: ["body"], msg: "Input should be a valid JSON object", type: "model_attributes_type" },
    ]);
  }
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issues = result.error.issues;
  if (issues.every((issue) => RANGE_ISSUES.has(issue.code))) {
    const issue = issues[0] as z.core.$ZodIssue;
    const param = formatFieldPath(issue.path);
    throw badRequest(`${param}: ${issue.message}`, param, "invalid_value");
  }
  const detail: ValidationIssue[] = issues.map((issue) => ({
    loc: ["body", ...issue.path.map((part) => (typeof part === "symbol" ? String(part) : part))],
    msg: issue.message,
    type: issue.code,
  }));
  throw validationFailed(detail);
}

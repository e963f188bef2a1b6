import type { FastifyInstance } from "fastify";
import { badRequest } from "../errors.ts";

/** Options of {@link registerRequestCaps}. */
export type RequestCaps = {
  /** Largest `max_tokens` / `max_completion_tokens` (`--max-tokens-cap`); undefined: no cap. */
  maxTokensCap?: number | undefined;
  /** Largest `n` / `best_of` (`--max-n`); undefined: no cap beyond the schema's. */
  maxN?: number | undefined;
};

/** The generation routes the caps apply to. */
const GENERATION_ROUTES = new Set(["/v1/completions", "/v1/chat/completions"]);

/**
 * The server's caps on what one generation request may ask for, checked on the parsed body before
 * the route runs (a wrong type is left to the schema's 422).
 * @throws ApiError 400 naming the field and the cap, e.g. "max_tokens is 4096, more than this server's
 *   cap of 512 (--max-tokens-cap)".
 */
export function registerRequestCaps(app: FastifyInstance, caps: RequestCaps): void {
  const limits: [string, number | undefined, string][] = [
    ["max_tokens", caps.maxTokensCap, "--max-tokens-cap"],
    ["max_completion_tokens", caps.maxTokensCap, "--max-tokens-cap"],
    ["n", caps.maxN, "--max-n"],
    ["best_of", caps.maxN, "--max-n"],
  ];
  if (limits.every(([, cap]) => cap === undefined)) return;
  app.addHook("preHandler", async (request) => {
    if (request.method !== "POST" || !GENERATION_ROUTES.has(request.routeOptions.url ?? "")) return;
    const body = request.body;
    if (typeof body !== "object" || body === null) return;
    for (const [field, cap, flag] of limits) {
      const value = (body as Record<string, unknown>)[field];
      if (cap !== undefined && typeof value === "number" && value > cap) {
        throw badRequest(
          `${field} is ${value}, more than this server's cap of ${cap} (${flag}).`,
          field,
          "cap_exceeded",
        );
      }
    }
  });
}

/**
 * The JSON body parser. Fastify's own parser (secure-json-parse) refuses `__proto__` keys and
 * `constructor` keys holding a `prototype`, as it should, but answers them "Body is not valid JSON",
 * which is false. This one refuses the same keys with a 400 that names the key and where it is.
 */
import type { FastifyInstance } from "fastify";
import { badRequest, malformedJson } from "../errors.ts";

/** A body that may hold one of the refused keys (also spelled with `\u` escapes), as secure-json-parse tests first. */
const SUSPECT =
  /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"|"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"/;

/**
 * Where the first refused key is (`tools[0].function.parameters.properties.__proto__`), or undefined.
 * Refused: a `__proto__` key anywhere, and a `constructor` key whose value is an object with a
 * `prototype` key (secure-json-parse's `protoAction` / `constructorAction` cases).
 */
export function forbiddenKeyPath(value: unknown, path = ""): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = forbiddenKeyPath(item, `${path}[${index}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const key of Object.keys(value)) {
    const at = path === "" ? key : `${path}.${key}`;
    const child = (value as Record<string, unknown>)[key];
    if (key === "__proto__") return at;
    if (key === "constructor" && typeof child === "object" && child !== null && "prototype" in child)
      return at;
    const found = forbiddenKeyPath(child, at);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Replaces Fastify's `application/json` parser: an empty body and malformed JSON are 400
 * `malformed_json` as before; a refused key (see {@link forbiddenKeyPath}) is 400 `forbidden_json_key`
 * naming the key's path. `JSON.parse` itself makes `__proto__` an own data property (never the
 * prototype), so nothing is polluted before the check.
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    const text = body as string;
    if (text.length === 0) return done(malformedJson("the body is empty"), undefined);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      return done(malformedJson(error instanceof Error ? error.message : String(error)), undefined);
    }
    const at = SUSPECT.test(text) ? forbiddenKeyPath(parsed) : undefined;
    if (at !== undefined) {
      return done(
        badRequest(
          `The request body is valid JSON but holds the key \`${at}\`: keys named \`__proto__\`, and \`constructor\` keys holding a \`prototype\`, are refused to guard against prototype pollution. Remove or rename it.`,
          null,
          "forbidden_json_key",
        ),
        undefined,
      );
    }
    done(null, parsed);
  });
}

/**
 * Schemathesis-style property test (issue #14): requests generated from the server's own
 * `/openapi.json` for every operation, mostly valid by the document's schemas and some not, against a
 * real server. Every answer must be a declared status, never a 5xx, with a body that matches the
 * documented schema (each SSE event too), and the server must stay healthy.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { Ajv2020 } from "ajv/dist/2020.js";
import fc from "fast-check";
import { sseData } from "../../ui/src/sse.ts";
import { TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

type Schema = Record<string, unknown>;
type Operation = {
  parameters?: { name: string; in: string }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<
    string,
    {
      $ref?: string;
      content?: Record<string, { schema: Schema; "x-event-schema"?: Schema; "x-done"?: boolean }>;
    }
  >;
};
type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; responses: Record<string, Operation["responses"][string]> };
};

/** Runs per operation: generation routes decode a few tokens each, the rest are cheap. */
const RUNS = { generation: 60, other: 25 };
const SEED = Number(process.env.FUZZ_SEED ?? 14);

/**
 * An arbitrary for a JSON Schema of the document (the subset zod emits): `$ref`, `anyOf`/`oneOf`,
 * `const`, `enum`, object/array/string/number/integer/boolean/null with their bounds, sizes kept small.
 * Fields named `model` are mostly the served model, so requests get past the lookup.
 */
function arbitraryOf(schema: Schema, document: Document, depth = 0): fc.Arbitrary<unknown> {
  const ref = schema.$ref;
  if (typeof ref === "string") {
    const target = document.components.schemas[ref.replace("#/components/schemas/", "")];
    return target ? arbitraryOf(target, document, depth) : fc.constant(null);
  }
  const alternatives = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  if (alternatives) return fc.oneof(...alternatives.map((item) => arbitraryOf(item, document, depth)));
  if ("const" in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const type = schema.type;
  if (Array.isArray(type))
    return fc.oneof(...type.map((one) => arbitraryOf({ ...schema, type: one }, document, depth)));
  const number = (key: string) => (typeof schema[key] === "number" ? (schema[key] as number) : undefined);
  switch (type) {
    case "object": {
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const required = new Set((schema.required ?? []) as string[]);
      // Deep in the tree only required fields, so documents stay small.
      const keys = Object.keys(properties).filter((key) => depth < 3 || required.has(key));
      const record: Record<string, fc.Arbitrary<unknown>> = {};
      for (const key of keys) {
        const property = properties[key] as Schema;
        record[key] =
          key === "model" && depth === 0
            ? fc.oneof(
                { weight: 9, arbitrary: fc.constant(TEST_MODEL) },
                { weight: 1, arbitrary: fc.string() },
              )
            : arbitraryOf(property, document, depth + 1);
      }
      const requiredKeys = keys.filter((key) => required.has(key));
      if (keys.length === 0)
        return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 });
      const full = fc.record(record, { requiredKeys });
      if (depth > 0) return full;
      // At the top, most requests set only a couple of optional fields, so that they get past the
      // checks of conflicting fields into real work; the rest set any of them.
      const optional = keys.filter((key) => !required.has(key));
      const sparse = fc
        .subarray(optional, { maxLength: Math.min(2, optional.length) })
        .chain((picked) =>
          fc.record(
            Object.fromEntries(
              [...requiredKeys, ...picked].map((key) => [key, record[key] as fc.Arbitrary<unknown>]),
            ),
          ),
        );
      return fc.oneof({ weight: 3, arbitrary: sparse }, { weight: 1, arbitrary: full });
    }
    case "array": {
      const items = (schema.items ?? {}) as Schema;
      const minLength = number("minItems") ?? 0;
      const maxLength = Math.min(number("maxItems") ?? minLength + 3, minLength + 3);
      return fc.array(arbitraryOf(items, document, depth + 1), { minLength, maxLength });
    }
    case "string": {
      const minLength = number("minLength") ?? 0;
      return fc.string({
        minLength,
        maxLength: Math.min(number("maxLength") ?? minLength + 16, minLength + 16),
      });
    }
    case "integer": {
      const min = number("minimum") ?? (number("exclusiveMinimum") ?? -1_000_001) + 1;
      const max = number("maximum") ?? (number("exclusiveMaximum") ?? 1_000_001) - 1;
      return fc.oneof(fc.integer({ min, max: Math.min(max, min + 64) }), fc.integer({ min, max }));
    }
    case "number": {
      const min = number("minimum") ?? number("exclusiveMinimum") ?? -1e6;
      const max = number("maximum") ?? number("exclusiveMaximum") ?? 1e6;
      return fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
    }
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** The response schema of `status` on `operation` (following `components.responses` refs), by media type. */
function declared(operation: Operation, status: number, document: Document) {
  const response = operation.responses[String(status)];
  if (!response) return undefined;
  const ref = response.$ref?.replace("#/components/responses/", "");
  return (ref ? document.components.responses[ref] : response)?.content ?? {};
}

describe("the OpenAPI document holds under a fuzzer", () => {
  let document: Document;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const server = useTestServer(["--max-tokens-cap", "8", "--max-num-seqs", "2"], { exitCode: 0 });
  before(async () => {
    document = (await (await fetch(`${server.url}/openapi.json`)).json()) as Document;
    for (const [name, schema] of Object.entries(document.components.schemas))
      ajv.addSchema(schema, `#/components/schemas/${name}`);
  });

  /** Asserts `value` matches `schema` (refs resolved through the components). */
  const check = (schema: Schema, value: unknown, where: string) => {
    const validate = ajv.compile({ ...schema, $defs: undefined });
    assert.ok(
      validate(value),
      `${where}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 500)}`,
    );
  };

  it("answers every generated request with a declared status and a documented body, never a 5xx", async (t) => {
    let requests = 0;
    const statuses = new Map<string, number>();
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const bodySchema = operation.requestBody?.content["application/json"]?.schema;
        const generation = ["completions", "responses", "messages"].some((end) => path.endsWith(end));
        const body = bodySchema
          ? fc.oneof(
              { weight: 8, arbitrary: arbitraryOf(bodySchema, document) },
              { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
              { weight: 1, arbitrary: fc.string() },
            )
          : fc.constant(undefined);
        const params = fc.record(
          Object.fromEntries(
            (operation.parameters ?? [])
              .filter((parameter) => parameter.in === "path")
              .map((parameter) => [
                parameter.name,
                fc.oneof(
                  { weight: 3, arbitrary: fc.constant(TEST_MODEL) },
                  { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 12 }) },
                ),
              ]),
          ),
        );
        const property = fc.asyncProperty(body, params, fc.boolean(), async (payload, values, withToken) => {
          let url = path;
          for (const [name, value] of Object.entries(values))
            url = url.replace(`{${name}}`, encodeURIComponent(value as string));
          const response = await fetch(`${server.url}${url}`, {
            method: method.toUpperCase(),
            headers: {
              ...(payload !== undefined ? { "content-type": "application/json" } : {}),
              ...(withToken ? { authorization: "Bearer ignored-without-keys" } : {}),
            },
            ...(payload !== undefined
              ? { body: typeof payload === "string" ? payload : JSON.stringify(payload) }
              : {}),
            signal: AbortSignal.timeout(30_000),
          });
          requests++;
          const where = `${method.toUpperCase()} ${url} -> ${response.status} for ${JSON.stringify(payload)?.slice(0, 400)}`;
          const key = `${method.toUpperCase()} ${path} ${response.status}`;
          statuses.set(key, (statuses.get(key) ?? 0) + 1);
          const text = await response.text();
          // An unload that worked is undone, so that later operations still reach the model (the
          // server starts without autoload, as a single-model server does).
          if (path === "/models/unload" && response.status === 200) {
            const reload = await fetch(`${server.url}/models/load`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ model: TEST_MODEL }),
            });
            assert.equal(reload.status, 200, `reload after ${where}: ${await reload.text()}`);
          }
          assert.ok(response.status < 500, `${where}: ${text.slice(0, 400)}`);
          const content = declared(operation, response.status, document);
          assert.ok(content, `undeclared status: ${where}`);
          const mediaType = (response.headers.get("content-type") ?? "").split(";")[0]?.trim() ?? "";
          const media = content[mediaType];
          assert.ok(media, `undeclared media type ${mediaType}: ${where}`);
          if (mediaType === "application/json") check(media.schema, JSON.parse(text), where);
          if (mediaType === "text/event-stream") {
            // Each event: an optional `event: TYPE` line (Responses, Anthropic), then `data: {json}`
            // (read by the web UI's SSE parser).
            const events: string[] = [];
            for await (const event of sseData(new Response(text).body as ReadableStream<Uint8Array>))
              events.push(event);
            const done = media["x-done"] !== false;
            if (done) assert.equal(events.at(-1), "[DONE]", where);
            else assert.ok(!events.includes("[DONE]"), where);
            for (const event of done ? events.slice(0, -1) : events) {
              const data = JSON.parse(event) as Record<string, unknown>;
              // A failure after the stream started is an error event (the documented Error body).
              const schema =
                "error" in data
                  ? declared(operation, 500, document)?.["application/json"]?.schema
                  : media["x-event-schema"];
              assert.ok(schema, where);
              check(schema, data, where);
            }
          }
        });
        await fc.assert(property, {
          numRuns: generation ? RUNS.generation : RUNS.other,
          seed: SEED,
          endOnFailure: true,
        });
      }
    }
    t.diagnostic(`${requests} requests: ${JSON.stringify(Object.fromEntries(statuses))}`);
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200);
    assert.equal(server.process.exitCode, null);
    // Sanity: the generator reached past validation into real work on the generation routes.
    const succeeded = [...statuses].filter(([key]) => key.endsWith("completions 200"));
    assert.ok(succeeded.length === 2, `statuses: ${JSON.stringify([...statuses])}`);
    assert.ok(requests >= 200, `${requests} requests`);
  });
});

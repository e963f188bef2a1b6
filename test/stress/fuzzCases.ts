/**
 * Generated bad and edge requests for the reliability suite: wrong types, NaN/Infinity as raw JSON
 * tokens, huge and negative numbers, 1 MB strings, deep nesting, invalid UTF-8 bytes, empty arrays,
 * a giant `logit_bias`, unknown fields, truncated JSON, wrong Content-Types, methods and paths,
 * against `/v1/completions`, `/v1/chat/completions`, `/tokenize` and `/detokenize`. Reproducible: the
 * same seed gives the same cases.
 */
import {
  BIG_RAW_VALUES,
  CONTENT_TYPES,
  ENDPOINTS,
  MESSAGE_VALUES,
  METHODS,
  PATHS,
  RAW_VALUES,
} from "./fuzzValues.ts";

/** One HTTP request to send. */
export type FuzzCase = {
  /** What the case does, for failure messages. */
  name: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Uint8Array<ArrayBuffer>;
};

/** mulberry32: a small seeded PRNG, returns [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

/** Replaces (or adds) `field` in the JSON text of `body` with the raw JSON text `raw`. */
function withRawField(body: Record<string, unknown>, field: string, raw: string): string {
  const placeholder = "__LMSERVE_FUZZ_VALUE__";
  return JSON.stringify({ ...body, [field]: placeholder }).replace(`"${placeholder}"`, () => raw);
}

/**
 * `count` fuzz cases from `seed`. Every request carries `apiKey` (when given) so that it reaches the
 * handlers; about one in eight is a structural case (method, path, Content-Type, truncation, UTF-8,
 * top-level type) and the rest replace one field of a valid request with an odd value.
 */
export function fuzzCases(
  seed: number,
  count: number,
  options: { model: string; apiKey?: string },
): FuzzCase[] {
  const random = seededRandom(seed);
  const auth: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
  const json = { "content-type": "application/json", ...auth };
  const cases: FuzzCase[] = [];
  while (cases.length < count) {
    const endpoint = pick(random, ENDPOINTS);
    const base = endpoint.base(options.model);
    const roll = random();
    if (roll < 0.04) {
      const method = pick(random, METHODS);
      const path = pick(random, PATHS);
      const body = method === "GET" || method === "HEAD" ? undefined : JSON.stringify(base);
      cases.push({
        name: `${method} ${path.slice(0, 60)}`,
        method,
        path,
        headers: json,
        ...(body ? { body } : {}),
      });
    } else if (roll < 0.07) {
      const contentType = pick(random, CONTENT_TYPES);
      const headers: Record<string, string> = {
        ...auth,
        ...(contentType ? { "content-type": contentType } : {}),
      };
      cases.push({
        name: `content-type '${contentType}'`,
        method: "POST",
        path: endpoint.path,
        headers,
        body: JSON.stringify(base),
      });
    } else if (roll < 0.1) {
      const text = JSON.stringify(base);
      const cut = Math.floor(random() * text.length);
      cases.push({
        name: `truncated at ${cut}`,
        method: "POST",
        path: endpoint.path,
        headers: json,
        body: text.slice(0, cut),
      });
    } else if (roll < 0.12) {
      const text = Buffer.from(JSON.stringify(base));
      const at = text.indexOf(0x22, text.length / 2) + 1 || 2;
      const bad = pick(random, [
        [0xff],
        [0xc3, 0x28],
        [0xe2, 0x82],
        [0xf0, 0x28, 0x8c, 0x28],
        [0xed, 0xa0, 0x80],
        [0x00],
      ]);
      const body = Buffer.concat([text.subarray(0, at), Buffer.from(bad), text.subarray(at)]);
      cases.push({
        name: `invalid UTF-8 ${bad.join(",")}`,
        method: "POST",
        path: endpoint.path,
        headers: json,
        body: new Uint8Array(body),
      });
    } else if (roll < 0.13) {
      const body = pick(random, [
        "[]",
        '"string"',
        "5",
        "null",
        "true",
        "[{}]",
        "{",
        "",
        "{}",
        '{"model":}',
        "\u0000",
      ]);
      cases.push({
        name: `top-level ${JSON.stringify(body)}`,
        method: "POST",
        path: endpoint.path,
        headers: json,
        body,
      });
    } else if (roll < 0.16) {
      const extra = Object.fromEntries(
        Array.from({ length: 1 + Math.floor(random() * 5) }, (_, i) => [
          `unknown_field_${i}`,
          pick(random, [1, "x", null, [], { a: 1 }]),
        ]),
      );
      cases.push({
        name: "unknown fields",
        method: "POST",
        path: endpoint.path,
        headers: json,
        body: JSON.stringify({ ...base, ...extra, ...(random() < 0.3 ? { stream: true } : {}) }),
      });
    } else if (roll < 0.2 && endpoint.path === "/v1/chat/completions") {
      const messages = pick(random, MESSAGE_VALUES);
      cases.push({
        name: `messages ${JSON.stringify(messages).slice(0, 60)}`,
        method: "POST",
        path: endpoint.path,
        headers: json,
        body: JSON.stringify({ ...base, messages }),
      });
    } else if (roll < 0.215) {
      const field = pick(random, endpoint.fields);
      const raw = (pick(random, BIG_RAW_VALUES) as () => string)();
      cases.push({
        name: `${field} = big value (${raw.length} chars)`,
        method: "POST",
        path: endpoint.path,
        headers: json,
        body: withRawField(base, field, raw),
      });
    } else if (roll < 0.22 && endpoint.path.startsWith("/v1/")) {
      const entries = 10_000 + Math.floor(random() * 90_000);
      const bias = Object.fromEntries(
        Array.from({ length: entries }, (_, i) => [String(i), (i % 201) - 100]),
      );
      cases.push({
        name: `logit_bias with ${entries} entries`,
        method: "POST",
        path: endpoint.path,
        headers: json,
        body: JSON.stringify({ ...base, logit_bias: bias }),
      });
    } else if (roll < 0.23) {
      const field = pick(random, endpoint.fields);
      const { [field]: _, ...rest } = base;
      cases.push({
        name: `without ${field}`,
        method: "POST",
        path: endpoint.path,
        headers: json,
        body: JSON.stringify(rest),
      });
    } else {
      const field = pick(random, endpoint.fields);
      const raw = pick(random, RAW_VALUES);
      const stream = endpoint.path.startsWith("/v1/") && random() < 0.2 ? { stream: true } : {};
      cases.push({
        name: `${field} = ${raw.slice(0, 40)}${"stream" in stream ? " (stream)" : ""}`,
        method: "POST",
        path: endpoint.path,
        headers: json,
        body: withRawField({ ...base, ...stream }, field, raw),
      });
    }
  }
  return cases;
}

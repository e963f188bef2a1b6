/**
 * Production operations on a real server: API keys (flag and environment), `--protect-metrics`, CORS,
 * request caps, the body size limit, request ids and the request log, the tokenizer endpoints, the
 * version, and real responses checked against the OpenAPI document the server publishes.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { Ajv2020 } from "ajv/dist/2020.js";
import OpenAI from "openai";
import { projectRoot } from "../../src/paths.ts";
import { readSse, TEST_MODEL, waitForRequestLog } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const KEYS = ["key-one", "key-two"];
const ENV_KEY = "key-from-env";
const ORIGIN = "https://app.example.com";
const MARKER = "zebra-marker-7731";

type OpenApi = {
  paths: Record<string, Record<string, { security?: unknown[] }>>;
  components: { schemas: Record<string, object> };
};

describe("operations: keys, limits, CORS, logs, tokenizer, documents", () => {
  let client: OpenAI;
  const auth = { authorization: `Bearer ${KEYS[0]}` };
  // The key from the environment is read at startup: set while the server starts, removed after.
  const unsetEnvKey = () => {
    delete process.env.LMSERVE_API_KEY;
  };
  before(() => {
    process.env.LMSERVE_API_KEY = ENV_KEY;
  });
  const server = useTestServer(
    [
      ...KEYS.flatMap((key) => ["--api-key", key]),
      "--protect-metrics",
      "--allowed-origins",
      ORIGIN,
      "--max-tokens-cap",
      "64",
      "--max-n",
      "2",
      "--max-body-size",
      "64kb",
    ],
    { exitCode: 0 },
  );
  before(() => {
    unsetEnvKey();
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS[0], maxRetries: 0 });
  });
  after(unsetEnvKey); // also when the server did not start

  const openApi = async (): Promise<OpenApi> =>
    (await fetch(`${server.url}/openapi.json`)).json() as Promise<OpenApi>;

  describe("authentication", () => {
    it("refuses a missing or wrong key on every protected route with 401, WWW-Authenticate and the error body", async () => {
      const document = await openApi();
      const routes: [string, string][] = [["GET", "/v1/no-such-route"]];
      for (const [path, operations] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          if ((operation.security ?? []).length > 0) {
            routes.push([method.toUpperCase(), path.replace("{model}", TEST_MODEL)]);
          }
        }
      }
      assert.ok(routes.length >= 8, JSON.stringify(routes));
      assert.ok(routes.some(([, path]) => path === "/v1/chat/completions"));
      for (const [method, path] of routes) {
        for (const authorization of [undefined, "Bearer wrong-key", `Basic ${KEYS[0]}`, "Bearer"]) {
          const response = await fetch(`${server.url}${path}`, {
            method,
            headers: {
              "content-type": "application/json",
              ...(authorization ? { authorization } : {}),
            },
            ...(method === "POST" ? { body: JSON.stringify({ model: TEST_MODEL, prompt: "x" }) } : {}),
          });
          const where = `${method} ${path} with ${authorization}`;
          assert.equal(response.status, 401, where);
          assert.match(response.headers.get("www-authenticate") ?? "", /^Bearer realm="lmserve"/, where);
          assert.ok(response.headers.get("x-request-id"), where);
          const body = (await response.json()) as { code: number; error: { code: string; type: string } };
          if (path.startsWith("/v1/messages")) {
            // Anthropic's routes answer in Anthropic's error shape.
            assert.equal(body.error.type, "authentication_error", where);
            continue;
          }
          assert.equal(body.code, 401, where);
          assert.equal(body.error.code, "invalid_api_key", where);
        }
      }
    });

    it("makes the official client raise AuthenticationError, and accepts every configured key", async () => {
      const wrong = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "not-a-key", maxRetries: 0 });
      await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
      await assert.rejects(
        wrong.chat.completions.create({ model: TEST_MODEL, messages: [{ role: "user", content: "Hi" }] }),
        (error: unknown) => error instanceof OpenAI.AuthenticationError && error.status === 401,
      );
      for (const apiKey of [...KEYS, ENV_KEY]) {
        const keyed = new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0 });
        const models = await keyed.models.list();
        assert.equal(models.data[0]?.id, TEST_MODEL, apiKey);
      }
    });

    it("leaves health probes, /openapi.json and /docs open", async () => {
      for (const path of ["/health", "/v1/health/live", "/v1/health/ready", "/openapi.json", "/docs"]) {
        assert.equal((await fetch(`${server.url}${path}`)).status, 200, path);
      }
    });

    it("protects /metrics with --protect-metrics", async () => {
      const open = await fetch(`${server.url}/metrics`);
      assert.equal(open.status, 401);
      assert.match(open.headers.get("www-authenticate") ?? "", /^Bearer/);
      const keyed = await fetch(`${server.url}/metrics`, { headers: auth });
      assert.equal(keyed.status, 200);
      assert.match(await keyed.text(), /vllm:num_requests_running/);
    });
  });

  describe("CORS", () => {
    it("answers a preflight from an allowed origin, and not from another", async () => {
      const preflight = (origin: string) =>
        fetch(`${server.url}/v1/chat/completions`, {
          method: "OPTIONS",
          headers: {
            origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization,content-type",
          },
        });
      const allowed = await preflight(ORIGIN);
      assert.equal(allowed.status, 204);
      assert.equal(allowed.headers.get("access-control-allow-origin"), ORIGIN);
      assert.match(allowed.headers.get("access-control-allow-methods") ?? "", /POST/);
      assert.match(allowed.headers.get("access-control-allow-headers") ?? "", /authorization/);
      const other = await preflight("https://evil.example.com");
      assert.equal(other.headers.get("access-control-allow-origin"), null);
    });

    it("lets an allowed origin read a 401 and the request id", async () => {
      const response = await fetch(`${server.url}/v1/models`, { headers: { origin: ORIGIN } });
      assert.equal(response.status, 401);
      assert.equal(response.headers.get("access-control-allow-origin"), ORIGIN);
      assert.match(response.headers.get("access-control-expose-headers") ?? "", /x-request-id/);
    });
  });

  describe("limits", () => {
    it("refuses max_tokens and n over the caps with a 400 naming the cap", async () => {
      await assert.rejects(
        client.completions.create({ model: TEST_MODEL, prompt: "Once", max_tokens: 65 }),
        (error: unknown) =>
          error instanceof OpenAI.BadRequestError &&
          error.param === "max_tokens" &&
          /--max-tokens-cap/.test(error.message) &&
          /64/.test(error.message),
      );
      await assert.rejects(
        client.chat.completions.create({
          model: TEST_MODEL,
          messages: [{ role: "user", content: "Hi" }],
          max_completion_tokens: 100,
        }),
        (error: unknown) =>
          error instanceof OpenAI.BadRequestError && error.param === "max_completion_tokens",
      );
      await assert.rejects(
        client.chat.completions.create({
          model: TEST_MODEL,
          messages: [{ role: "user", content: "Hi" }],
          n: 3,
          max_tokens: 4,
        }),
        (error: unknown) =>
          error instanceof OpenAI.BadRequestError && error.param === "n" && /--max-n/.test(error.message),
      );
      const within = await client.completions.create({
        model: TEST_MODEL,
        prompt: "Once",
        max_tokens: 64,
        n: 2,
      });
      assert.equal(within.choices.length, 2);
    });

    it("bounds a request that omits max_tokens by the cap, not by the context", async () => {
      // ignore_eos: the model would otherwise stop on its own well before either limit.
      const chat = await client.chat.completions.create({
        model: TEST_MODEL,
        messages: [{ role: "user", content: "Tell me a story" }],
        ignore_eos: true,
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      assert.equal(chat.usage?.completion_tokens, 64);
      assert.equal(chat.choices[0]?.finish_reason, "length");
      const completion = await client.completions.create({
        model: TEST_MODEL,
        prompt: "Once",
        max_tokens: null,
        ignore_eos: true,
      } as OpenAI.CompletionCreateParamsNonStreaming);
      assert.equal(completion.usage?.completion_tokens, 64);
    });

    it("answers a body over --max-body-size with 413 and the error body", async () => {
      const response = await server.post(
        "/v1/completions",
        { model: TEST_MODEL, prompt: "a".repeat(70 * 1024) },
        auth,
      );
      assert.equal(response.status, 413);
      const body = (await response.json()) as { code: number; error: { code: string; message: string } };
      assert.equal(body.code, 413);
      assert.equal(body.error.code, "body_too_large");
      assert.match(body.error.message, /65536 bytes/);
    });
  });

  describe("request ids and the request log", () => {
    it("echoes X-Request-Id as X-Request-Id and INFERENCE-ID, streamed or not", async () => {
      for (const stream of [false, true]) {
        const id = `req-${stream}-${Date.now()}`;
        const response = await server.post(
          "/v1/completions",
          { model: TEST_MODEL, prompt: "Once", max_tokens: 3, stream },
          { ...auth, "x-request-id": id },
        );
        assert.equal(response.status, 200);
        assert.equal(response.headers.get("x-request-id"), id);
        assert.equal(response.headers.get("inference-id"), id);
        await response.text();
      }
      const generated = await fetch(`${server.url}/v1/models`, { headers: auth });
      assert.match(generated.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
      for (const unsafe of ["has space", "x".repeat(201)]) {
        const replaced = await fetch(`${server.url}/v1/models`, {
          headers: { ...auth, "x-request-id": unsafe },
        });
        assert.match(
          replaced.headers.get("x-request-id") ?? "",
          /^[0-9a-f-]{36}$/,
          "an unsafe id is replaced",
        );
      }
    });

    it("logs one JSON line per request with id, route, status, latency and token counts, never the prompt", async () => {
      const id = `log-check-${Date.now()}`;
      const completion = await client.chat.completions.create(
        {
          model: TEST_MODEL,
          messages: [{ role: "user", content: `Tell me about ${MARKER}` }],
          max_tokens: 7,
        },
        { headers: { "x-request-id": id } },
      );
      const streamId = `${id}-stream`;
      const streamed = await server.post(
        "/v1/completions",
        {
          model: TEST_MODEL,
          prompt: MARKER,
          max_tokens: 5,
          stream: true,
          stream_options: { include_usage: true },
        },
        { ...auth, "x-request-id": streamId },
      );
      await readSse(streamed);
      const line = await waitForRequestLog(server, id);
      assert.equal(line.route, "/v1/chat/completions");
      assert.equal(line.method, "POST");
      assert.equal(line.status, 200);
      assert.equal(line.model, TEST_MODEL);
      assert.equal(typeof line.latencyMs, "number");
      assert.equal(line.promptTokens, completion.usage?.prompt_tokens);
      assert.equal(line.completionTokens, 7);
      const streamLine = await waitForRequestLog(server, streamId);
      assert.equal(streamLine.completionTokens, 5);
      const everything = JSON.stringify(server.logs);
      assert.ok(!everything.includes(MARKER), "a prompt reached the log without --log-requests");
      assert.ok(!everything.includes(KEYS[0] as string), "an API key reached the log");
    });
  });

  describe("tokenizer endpoints (vLLM)", () => {
    const call = async (path: string, body: unknown) => {
      const response = await server.post(path, body, auth);
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    it("round-trips text through /tokenize and /detokenize", async () => {
      const text = "Once upon a time, there was a little girl named Lily.";
      const tokenized = await call("/tokenize", {
        prompt: text,
        add_special_tokens: false,
        return_token_strs: true,
      });
      assert.equal(tokenized.status, 200);
      const tokens = tokenized.body.tokens as number[];
      assert.equal(tokenized.body.count, tokens.length);
      assert.ok(tokens.length > 5);
      const models = await client.models.list();
      assert.equal(
        tokenized.body.max_model_len,
        (models.data[0] as unknown as { max_model_len: number }).max_model_len,
      );
      const pieces = tokenized.body.token_strs as string[];
      assert.equal(pieces.length, tokens.length);
      assert.equal(pieces.join("").replaceAll("\u2581", " ").trim(), text);
      const withBos = await call("/tokenize", { model: TEST_MODEL, prompt: text });
      assert.equal(withBos.body.count, tokens.length + 1, "add_special_tokens defaults to true (BOS)");
      assert.equal(withBos.body.token_strs, undefined);
      const detokenized = await call("/detokenize", { model: TEST_MODEL, tokens });
      assert.equal(detokenized.status, 200);
      assert.equal((detokenized.body.prompt as string).trim(), text);
    });

    it("tokenizes messages exactly as a chat completion renders them", async () => {
      const messages = [
        { role: "system" as const, content: "You tell stories." },
        { role: "user" as const, content: "A story about a cat, please." },
      ];
      const tokenized = await call("/tokenize", { model: TEST_MODEL, messages });
      const completion = await client.chat.completions.create({ model: TEST_MODEL, messages, max_tokens: 1 });
      assert.equal(tokenized.body.count, completion.usage?.prompt_tokens);
      const continued = await call("/tokenize", { messages, add_generation_prompt: false });
      assert.ok((continued.body.count as number) < (tokenized.body.count as number));
    });

    it("answers bad tokenizer requests with 4xx error bodies", async () => {
      const cases: [string, unknown, number][] = [
        ["/tokenize", { model: "no-such-model", prompt: "x" }, 404],
        ["/tokenize", { prompt: 5 }, 422],
        ["/tokenize", {}, 422],
        [
          "/tokenize",
          {
            messages: [{ role: "user", content: "x" }],
            add_generation_prompt: true,
            continue_final_message: true,
          },
          400,
        ],
        ["/detokenize", { tokens: [1, 99999999] }, 400],
        ["/detokenize", { tokens: [-1] }, 400],
        ["/detokenize", { tokens: "1 2" }, 422],
      ];
      for (const [path, body, status] of cases) {
        const response = await call(path, body);
        assert.equal(response.status, status, `${path} ${JSON.stringify(body)}`);
        assert.equal(response.body.object, "error");
        assert.equal(response.body.code, status);
      }
    });
  });

  describe("version and OpenAPI", () => {
    it("reports package.json's version at /v1/version", async () => {
      const { version } = JSON.parse(readFileSync(resolve(projectRoot, "package.json"), "utf8")) as {
        version: string;
      };
      const response = await fetch(`${server.url}/v1/version`, { headers: auth });
      assert.deepEqual(await response.json(), { version });
    });

    it("describes what the server really sends: real responses validate against /openapi.json", async () => {
      const document = await openApi();
      const ajv = new Ajv2020({ strict: false, allErrors: true });
      for (const [name, schema] of Object.entries(document.components.schemas)) ajv.addSchema(schema, name);
      const check = (name: string, value: unknown) => {
        const validate = ajv.getSchema(name);
        assert.ok(validate, name);
        assert.ok(validate(value), `${name}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`);
      };
      const get = async (path: string) => (await fetch(`${server.url}${path}`, { headers: auth })).json();
      check("ModelList", await get("/v1/models"));
      check("Model", await get(`/v1/models/${TEST_MODEL}`));
      check("VersionResponse", await get("/v1/version"));
      check("HealthResponse", await get("/v1/health/ready"));
      const completion = await server.post(
        "/v1/completions",
        { model: TEST_MODEL, prompt: "Once", max_tokens: 4, stop: ["zz"] },
        auth,
      );
      check("CompletionResponse", await completion.json());
      const chat = await server.post(
        "/v1/chat/completions",
        { model: TEST_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 },
        auth,
      );
      check("ChatCompletionResponse", await chat.json());
      const stream = await server.post(
        "/v1/chat/completions",
        {
          model: TEST_MODEL,
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 4,
          stream: true,
          stream_options: { include_usage: true },
        },
        auth,
      );
      const events = await readSse(stream);
      assert.equal(events.at(-1), "[DONE]");
      for (const event of events.slice(0, -1)) check("ChatCompletionChunk", event);
      const tokenized = await server.post("/tokenize", { prompt: "Once", return_token_strs: true }, auth);
      check("TokenizeResponse", await tokenized.json());
      const error = await server.post("/v1/completions", { model: TEST_MODEL, prompt: 7 }, auth);
      check("Error", await error.json());
    });
  });
});

/**
 * The routes around serving, in-process on the fake engine: GET /v1/models and /v1/models/{id},
 * the health routes (vLLM's /health, NIM's /v1/health/live and /ready), /metrics and /metrics/history
 * (Prometheus text, present only with a metrics registry), /v1/version and /openapi.json.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ModelList } from "../../src/protocol/models.ts";
import type { ErrorBody } from "../../src/server/errorBody.ts";
import { ServerMetrics } from "../../src/server/metrics.ts";
import { serverVersion } from "../../src/version.ts";
import { useFakeApp, withFakeApp } from "../helpers/fakeApp.ts";
import { FakeEngine, fakeContext } from "../helpers/fakeEngine.ts";

describe("models, health, metrics, version (in-process, fake engine)", () => {
  const fake = useFakeApp({
    engines: [
      new FakeEngine({ names: ["fake-model", "fake-alias"], contextSize: 96 }),
      new FakeEngine({ names: ["other"] }),
    ],
    configure: (context) => {
      context.metrics = new ServerMetrics();
    },
  });

  it("lists every served name with its root and context length at GET /v1/models", async () => {
    const response = await fake.get("/v1/models");
    assert.equal(response.statusCode, 200);
    const list = response.json() as ModelList;
    assert.equal(list.object, "list");
    assert.deepEqual(
      list.data.map((model) => [model.id, model.object, model.root, model.max_model_len]),
      [
        ["fake-model", "model", "fake-model", 96],
        ["fake-alias", "model", "fake-model", 96],
        ["other", "model", "other", 256],
      ],
    );
  });

  it("GET /models (llama-server's router path) lists the same models", async () => {
    const response = await fake.get("/models");
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), (await fake.get("/v1/models")).json());
  });

  it("answers one model at GET /v1/models/{id}, and 404 naming the served ones for another", async () => {
    const alias = await fake.get("/v1/models/fake-alias");
    assert.equal(alias.statusCode, 200);
    const model = alias.json() as ModelList["data"][number];
    assert.deepEqual([model.id, model.root, model.max_model_len], ["fake-alias", "fake-model", 96]);
    const unknown = await fake.get("/v1/models/nope");
    assert.equal(unknown.statusCode, 404);
    const body = unknown.json() as ErrorBody;
    assert.equal(body.error.code, "model_not_found");
    assert.match(body.message, /fake-model/);
  });

  it("is healthy, live and ready while serving", async () => {
    for (const [url, message] of [
      ["/health", "Service is ready."],
      ["/v1/health/ready", "Service is ready."],
      ["/v1/health/live", "Service is live."],
    ]) {
      const response = await fake.get(url as string);
      assert.equal(response.statusCode, 200, url);
      assert.deepEqual(response.json(), { object: "health.response", message });
    }
  });

  it("is live but not ready (503 with Retry-After) while the model loads", async () => {
    const loading = fakeContext();
    loading.isReady = () => false;
    await withFakeApp(loading, async (app) => {
      for (const url of ["/health", "/v1/health/ready"]) {
        const response = await app.inject({ method: "GET", url });
        assert.equal(response.statusCode, 503, url);
        assert.ok(response.headers["retry-after"], url);
        assert.match((response.json() as ErrorBody).message, /loading/);
      }
      assert.equal((await app.inject({ method: "GET", url: "/v1/health/live" })).statusCode, 200);
    });
  });

  it("serves vLLM-named Prometheus metrics at /metrics and their history at /metrics/history", async () => {
    const response = await fake.get("/metrics");
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers["content-type"]), /^text\/plain/);
    for (const name of [
      "vllm:prompt_tokens_total",
      "vllm:generation_tokens_total",
      "vllm:e2e_request_latency_seconds",
    ]) {
      assert.match(response.payload, new RegExp(`^# TYPE ${name} `, "m"), name);
    }
    const history = await fake.get("/metrics/history");
    assert.equal(history.statusCode, 200);
    assert.equal(typeof history.json(), "object");
  });

  it("has no /metrics route without a metrics registry", async () => {
    await withFakeApp({}, async (app) => {
      const response = await app.inject({ method: "GET", url: "/metrics" });
      assert.equal(response.statusCode, 404);
      assert.equal((response.json() as ErrorBody).error.code, "route_not_found");
    });
  });

  it("answers the server version at /v1/version, and an OpenAPI document listing the routes", async () => {
    assert.deepEqual((await fake.get("/v1/version")).json(), { version: serverVersion });
    const document = (await fake.get("/openapi.json")).json() as {
      openapi: string;
      paths: Record<string, unknown>;
    };
    assert.match(document.openapi, /^3\.1/);
    for (const path of [
      "/v1/chat/completions",
      "/v1/responses",
      "/v1/messages",
      "/v1/embeddings",
      "/tokenize",
    ]) {
      assert.ok(path in document.paths, path);
    }
  });
});

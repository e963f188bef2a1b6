import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parsePrometheus } from "../../src/shared/prometheus.ts";
import { TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

/** Reads one sample of a metric from the Prometheus text (labels matched as a substring). */
/** Streams one completion per prompt at once (`max_tokens` each, EOS ignored); resolves with each one's chunk count. */
function streamAll(server: TestServer, prompts: string[], maxTokens: number): Promise<number[]> {
  return Promise.all(
    prompts.map(async (prompt) => {
      const stream = await server.client.completions.create({
        model: TEST_MODEL,
        prompt,
        max_tokens: maxTokens,
        ignore_eos: true,
        stream: true,
      } as Parameters<typeof server.client.completions.create>[0] & { stream: true });
      let chunks = 0;
      for await (const _ of stream) chunks++;
      return chunks;
    }),
  );
}

/**
 * The labels of the model's `vllm:cache_config_info` sample, read as the inference gateway reads it
 * (the info gauge's labels, value 1), and the model's context length from /v1/models.
 */
async function cacheConfig(
  server: TestServer,
): Promise<{ labels: Record<string, string>; maxModelLen: number }> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  assert.ok(text.includes("# TYPE vllm:cache_config_info gauge"), text);
  const info = parsePrometheus(text).filter((entry) => entry.name === "vllm:cache_config_info");
  assert.equal(info.length, 1, JSON.stringify(info));
  assert.equal(info[0]?.value, 1);
  const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {
    data: { max_model_len: number }[];
  };
  return { labels: info[0]?.labels ?? {}, maxModelLen: models.data[0]?.max_model_len ?? 0 };
}

function sample(text: string, name: string, labels = ""): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (labels && !line.includes(labels)) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

const LONG_PROMPT =
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. " +
  "One day, she saw a big red ball under a tree and ran to get it.";

describe("scheduler: prefix caching, queue, cancellation, priority, metrics", () => {
  const metrics = async () => (await fetch(`${server.url}/metrics`)).text();
  const complete = async (body: Record<string, unknown>) => {
    const response = await server.post("/v1/completions", { model: TEST_MODEL, ...body });
    return {
      response,
      json: (await response.json()) as Record<string, unknown> & {
        usage: { prompt_tokens_details: { cached_tokens: number }; prompt_tokens: number };
      },
    };
  };

  const server = useTestServer(["--max-num-seqs", "2", "--max-waiting", "2"]);

  it("cached_tokens grows on a repeated prompt", async () => {
    const first = await complete({ prompt: LONG_PROMPT, max_tokens: 4, temperature: 0 });
    const second = await complete({ prompt: `${LONG_PROMPT} Then`, max_tokens: 4, temperature: 0 });
    assert.equal(first.json.usage.prompt_tokens_details.cached_tokens, 0);
    const cached = second.json.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached >= first.json.usage.prompt_tokens - 1, `cached ${cached}`);
    const chat = {
      model: TEST_MODEL,
      messages: [{ role: "user" as const, content: LONG_PROMPT }],
      max_tokens: 3,
    };
    await server.client.chat.completions.create(chat);
    const again = await server.client.chat.completions.create(chat);
    assert.ok((again.usage?.prompt_tokens_details?.cached_tokens ?? 0) > 0);
    const text = await metrics();
    assert.ok((sample(text, "vllm:prefix_cache_hits_total") ?? 0) >= cached);
    assert.ok(
      (sample(text, "vllm:prefix_cache_queries_total") ?? 0) >
        (sample(text, "vllm:prefix_cache_hits_total") ?? 0),
    );
  });

  it("two prompts used in turn keep their caches in two slots (least recently used slot first)", async () => {
    const a =
      "A tiny red fox ran across the snowy field to find her friends, who were hiding behind the hill.";
    const b = "The old dog slept by the fire all day long, dreaming of bones and of the big green garden.";
    const cached: number[] = [];
    for (const prompt of [a, b, a, b]) {
      const { json } = await complete({ prompt, max_tokens: 2, temperature: 0 });
      cached.push(json.usage.prompt_tokens_details.cached_tokens / json.usage.prompt_tokens);
    }
    assert.ok((cached[2] ?? 0) > 0.9 && (cached[3] ?? 0) > 0.9, `cached shares ${cached.join(", ")}`);
  });

  it("a queue over --max-waiting answers 503 with Retry-After, and the rest complete", async () => {
    const body = { model: TEST_MODEL, prompt: "Once", max_tokens: 300, ignore_eos: true };
    const responses = await Promise.all(
      Array.from({ length: 8 }, () => server.post("/v1/completions", body)),
    );
    const statuses = responses.map((response) => response.status);
    const refused = responses.filter((response) => response.status === 503);
    assert.equal(statuses.filter((status) => status === 200).length, 4, statuses.join(","));
    assert.equal(refused.length, 4);
    for (const response of refused) {
      assert.ok(Number(response.headers.get("retry-after")) >= 1);
      const error = (await response.json()) as { error: { type: string }; code: number };
      assert.equal(error.code, 503);
    }
    for (const response of responses) if (response.status === 200) await response.json();
  });

  it("more generations than slots + queue in one request is a 400, not a 503 no retry could fix", async () => {
    const response = await server.post("/v1/completions", {
      model: TEST_MODEL,
      prompt: "Once",
      max_tokens: 2,
      n: 5,
    });
    assert.equal(response.status, 400);
    const body = (await response.json()) as { param: string };
    assert.equal(body.param, "n");
  });

  it("aborting 20 streams frees every slot and counts them as aborted", async () => {
    const before = sample(await metrics(), "vllm:request_success_total", 'finished_reason="abort"') ?? 0;
    for (let round = 0; round < 5; round++) {
      const controllers = Array.from({ length: 4 }, () => new AbortController());
      const streams = controllers.map((controller) =>
        fetch(`${server.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: TEST_MODEL,
            prompt: "Once",
            max_tokens: 2000,
            ignore_eos: true,
            stream: true,
          }),
          signal: controller.signal,
        }).then(async (response) => {
          if (response.status !== 200) return response.status;
          await response.body?.getReader().read();
          return response.status;
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      for (const controller of controllers) controller.abort();
      await Promise.allSettled(streams);
    }
    // The slots free within one decode step: poll briefly until the gauges read zero.
    let text = "";
    for (let attempt = 0; attempt < 100; attempt++) {
      text = await metrics();
      if (sample(text, "vllm:num_requests_running") === 0 && sample(text, "vllm:num_requests_waiting") === 0)
        break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(sample(text, "vllm:num_requests_running"), 0);
    assert.equal(sample(text, "vllm:num_requests_waiting"), 0);
    assert.equal(sample(text, "vllm:kv_cache_usage_perc"), 0);
    const aborted = (sample(text, "vllm:request_success_total", 'finished_reason="abort"') ?? 0) - before;
    assert.ok(aborted >= 12, `aborted ${aborted}`);
    const next = await complete({ prompt: "Once upon a time", max_tokens: 5, temperature: 0 });
    assert.equal(next.response.status, 200);
  });

  it("exports vLLM's metric names and types, labelled by model_name", async () => {
    const text = await metrics();
    const types: Record<string, string> = {
      "vllm:num_requests_running": "gauge",
      "vllm:num_requests_waiting": "gauge",
      "vllm:kv_cache_usage_perc": "gauge",
      "vllm:prompt_tokens_total": "counter",
      "vllm:generation_tokens_total": "counter",
      "vllm:request_success_total": "counter",
      "vllm:time_to_first_token_seconds": "histogram",
      "vllm:inter_token_latency_seconds": "histogram",
      "vllm:e2e_request_latency_seconds": "histogram",
      "vllm:prefix_cache_queries_total": "counter",
      "vllm:prefix_cache_hits_total": "counter",
      "vllm:iteration_tokens_total": "histogram",
    };
    for (const [name, type] of Object.entries(types)) {
      assert.ok(text.includes(`# TYPE ${name} ${type}`), `${name} ${type}`);
    }
    assert.ok((sample(text, "vllm:generation_tokens_total", `model_name="${TEST_MODEL}"`) ?? 0) > 0);
    assert.ok(
      (sample(text, "vllm:time_to_first_token_seconds_count", `model_name="${TEST_MODEL}"`) ?? 0) > 0,
    );
    assert.ok((sample(text, "vllm:inter_token_latency_seconds_count") ?? 0) > 0);
    assert.ok((sample(text, "vllm:request_success_total", 'finished_reason="length"') ?? 0) > 0);
  });
});

describe("continuous batching", () => {
  const server = useTestServer(["--max-num-seqs", "4"]);

  it("decodes concurrent streams together: their tokens share decode steps (vllm:iteration_tokens_total)", async (t) => {
    const chunks = await streamAll(server, ["Once", "The dog", "A little bird", "Tom and Sue"], 48);
    assert.ok(chunks.every((count) => count > 0));
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const steps = sample(text, "vllm:iteration_tokens_total_count") ?? 0;
    const tokens = sample(text, "vllm:iteration_tokens_total_sum") ?? 0;
    const single = sample(text, "vllm:iteration_tokens_total_bucket", 'le="1"') ?? 0;
    t.diagnostic(`${steps} steps, ${tokens} tokens, ${single} steps of one token`);
    assert.equal(sample(text, "vllm:generation_tokens_total"), 4 * 48);
    // One step per token of each request would be 4 x 48 steps of 1 token; batched, about 48 steps of 4
    // (50 measured on a quiet machine). The bound leaves room for a loaded CI machine.
    assert.ok(steps > 0 && steps < 128, `${steps} decode steps for 4 x 48 tokens`);
    assert.ok(single < steps / 2, `${single} of ${steps} steps held one token`);
    assert.ok(tokens >= 4 * 48, `${tokens} tokens evaluated`);
  });
});

describe("the step loop with 8 slots", () => {
  const server = useTestServer(["--max-num-seqs", "8"]);

  it("8 concurrent streams share their steps: one step per token of all of them", async (t) => {
    const prompts = ["Once", "The dog", "A little bird", "Tom and Sue", "One day", "Lily", "The sun", "Max"];
    const chunks = await streamAll(server, prompts, 32);
    assert.ok(chunks.every((count) => count > 0));
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const steps = sample(text, "vllm:iteration_tokens_total_count") ?? 0;
    const small = sample(text, "vllm:iteration_tokens_total_bucket", 'le="4"') ?? 0;
    t.diagnostic(`${steps} steps for 8 x 32 tokens, ${small} of them with at most 4 tokens`);
    assert.equal(sample(text, "vllm:generation_tokens_total"), 8 * 32);
    // 32 tokens each: 32 steps when all 8 run together, a few more while requests arrive one by one.
    assert.ok(steps >= 32 && steps <= 48, `${steps} steps`);
    assert.ok(small <= 12, `${small} of ${steps} steps held 4 tokens or fewer`);
    // Each step's time is split into decode and sampling (for benchmarks' breakdowns).
    assert.ok((sample(text, "lmserve:step_seconds_count", 'phase="decode"') ?? 0) >= steps);
    assert.ok((sample(text, "lmserve:step_seconds_count", 'phase="sample"') ?? 0) >= steps);
  });

  it("vllm:cache_config_info gives the gateway block_size (one cell) and num_gpu_blocks (every slot's cells)", async () => {
    const { labels, maxModelLen } = await cacheConfig(server);
    assert.ok(maxModelLen > 0);
    assert.deepEqual(labels, {
      model_name: TEST_MODEL,
      block_size: "1",
      num_gpu_blocks: String(8 * maxModelLen),
      num_cpu_blocks: "None",
      cache_dtype: "f16",
      enable_prefix_caching: "True",
    });
  });
});

describe("scheduler with one slot", () => {
  const server = useTestServer(["--max-num-seqs", "1", "--no-prefix-caching"]);

  it("vllm:cache_config_info says prefix caching is off", async () => {
    const { labels, maxModelLen } = await cacheConfig(server);
    assert.equal(labels.enable_prefix_caching, "False");
    assert.equal(labels.num_gpu_blocks, String(maxModelLen));
  });

  it("runs waiting requests by priority (lower first), then in arrival order", async () => {
    const finished: string[] = [];
    const send = (name: string, priority: number, maxTokens: number) =>
      server
        .post("/v1/completions", {
          model: TEST_MODEL,
          prompt: "Once",
          max_tokens: maxTokens,
          ignore_eos: true,
          priority,
        })
        .then(async (response) => {
          assert.equal(response.status, 200);
          await response.json();
          finished.push(name);
        });
    const blocker = send("blocker", 0, 400);
    await new Promise((resolve) => setTimeout(resolve, 30));
    const waiting = [send("low-a", 5, 2)];
    await new Promise((resolve) => setTimeout(resolve, 20));
    waiting.push(send("high", -1, 2));
    await new Promise((resolve) => setTimeout(resolve, 20));
    waiting.push(send("low-b", 5, 2));
    await new Promise((resolve) => setTimeout(resolve, 20));
    waiting.push(send("mid", 0, 2));
    await Promise.all([blocker, ...waiting]);
    assert.deepEqual(finished, ["blocker", "high", "mid", "low-a", "low-b"]);
  });

  it("with --no-prefix-caching a repeated prompt reuses nothing", async () => {
    const body = { model: TEST_MODEL, prompt: LONG_PROMPT, max_tokens: 2 };
    await server.post("/v1/completions", body);
    const response = await server.post("/v1/completions", body);
    const json = (await response.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
    assert.equal(json.usage.prompt_tokens_details.cached_tokens, 0);
  });
});

describe("request timeout", () => {
  const server = useTestServer(["--request-timeout", "0.3"]);

  it("a generation past --request-timeout is a 504, and a stream ends with an error event", async () => {
    const body = { model: TEST_MODEL, prompt: "Once", max_tokens: null, ignore_eos: true };
    const response = await server.post("/v1/completions", body);
    assert.equal(response.status, 504);
    const error = (await response.json()) as { error: { code: string } };
    assert.equal(error.error.code, "request_timeout");
    const stream = await server.post("/v1/completions", { ...body, stream: true });
    assert.equal(stream.status, 200);
    const text = await stream.text();
    assert.match(text, /"code":504/);
    assert.ok(text.trimEnd().endsWith("data: [DONE]"));
    const quick = await server.post("/v1/completions", { model: TEST_MODEL, prompt: "Once", max_tokens: 3 });
    assert.equal(quick.status, 200);
  });
});

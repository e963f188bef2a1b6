import assert from "node:assert/strict";
import { describe, it } from "node:test";
import OpenAI from "openai";
import { readSse, TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const GREEDY_START = ", there was a little girl named Lily";

/** Usage without `prompt_tokens_details`: the cached count legitimately differs between two runs. */
function tokenCounts(usage: OpenAI.CompletionUsage | null | undefined) {
  return { prompt: usage?.prompt_tokens, completion: usage?.completion_tokens, total: usage?.total_tokens };
}

describe("serving stories260K end to end", () => {
  const server = useTestServer(["--max-num-seqs", "4"]);

  describe("completions", () => {
    it("continues 'Once upon a time' greedily with the known text", async () => {
      const completion = await server.client.completions.create({
        model: TEST_MODEL,
        prompt: "Once upon a time",
        max_tokens: 32,
        temperature: 0,
      });
      assert.equal(completion.object, "text_completion");
      assert.match(completion.id, /^cmpl-/);
      assert.equal(completion.model, TEST_MODEL);
      const choice = completion.choices[0];
      assert.ok(choice);
      assert.ok(choice.text.startsWith(GREEDY_START), choice.text);
      assert.equal(choice.index, 0);
      assert.equal(choice.logprobs, null);
      assert.equal(choice.finish_reason, "length");
      assert.equal(completion.usage?.completion_tokens, 32);
      assert.equal(completion.usage?.total_tokens, (completion.usage?.prompt_tokens ?? 0) + 32);
    });

    it("gives the same text for the same greedy request twice", async () => {
      const request = { model: TEST_MODEL, prompt: "The little dog", max_tokens: 40, temperature: 0 };
      const first = await server.client.completions.create(request);
      const second = await server.client.completions.create(request);
      assert.equal(first.choices[0]?.text, second.choices[0]?.text);
    });

    it("defaults max_tokens to 16", async () => {
      const completion = await server.client.completions.create({
        model: TEST_MODEL,
        prompt: "Once",
        temperature: 0,
      });
      assert.equal(completion.usage?.completion_tokens, 16);
    });

    it("stops before a stop string with finish_reason stop and stop_reason set", async () => {
      const completion = await server.client.completions.create({
        model: TEST_MODEL,
        prompt: "Once upon a time",
        max_tokens: 64,
        temperature: 0,
        stop: ["Lily", "zzz"],
      });
      const choice = completion.choices[0] as unknown as {
        text: string;
        finish_reason: string;
        stop_reason: string;
      };
      assert.equal(choice.text, ", there was a little girl named ");
      assert.equal(choice.finish_reason, "stop");
      assert.equal(choice.stop_reason, "Lily");
    });

    it("max_tokens 5 gives 5 completion tokens and finish_reason length", async () => {
      const completion = await server.client.completions.create({
        model: TEST_MODEL,
        prompt: "Once upon a time",
        max_tokens: 5,
        temperature: 0,
      });
      assert.equal(completion.usage?.completion_tokens, 5);
      assert.equal(completion.choices[0]?.finish_reason, "length");
    });

    it("streams the same text and usage as the non-streamed request", async () => {
      const request = {
        model: TEST_MODEL,
        prompt: "Once upon a time",
        max_tokens: 48,
        temperature: 0,
        stop: "park",
      };
      const whole = await server.client.completions.create(request);
      const stream = await server.client.completions.create({
        ...request,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = "";
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        for (const choice of chunk.choices) {
          text += choice.text;
          if (choice.finish_reason) finish = choice.finish_reason;
        }
        if (chunk.usage) usage = chunk.usage;
      }
      assert.equal(text, whole.choices[0]?.text);
      assert.equal(finish, whole.choices[0]?.finish_reason);
      assert.deepEqual(tokenCounts(usage), tokenCounts(whole.usage));
    });

    it("takes a list of prompts and token-id prompts, one choice each in prompt order", async () => {
      const ids = (
        await server.client.completions.create({
          model: TEST_MODEL,
          prompt: [[1, 403, 407, 261, 378]],
          max_tokens: 8,
          temperature: 0,
        })
      ).choices;
      assert.ok(ids[0]?.text.startsWith(", there was"), ids[0]?.text);
      const completion = await server.client.completions.create({
        model: TEST_MODEL,
        prompt: ["Once upon a time", "The cat"],
        max_tokens: 8,
        temperature: 0,
      });
      assert.equal(completion.choices.length, 2);
      assert.deepEqual(
        completion.choices.map((choice) => choice.index),
        [0, 1],
      );
      assert.equal(completion.choices[0]?.text, ids[0]?.text);
    });

    it("serves 4 concurrent requests", async () => {
      const results = await Promise.all(
        [0, 1, 2, 3].map((index) =>
          server.client.completions.create({
            model: TEST_MODEL,
            prompt: `Story ${index}:`,
            max_tokens: 30,
            seed: index,
          }),
        ),
      );
      for (const result of results)
        assert.equal(
          result.usage?.completion_tokens,
          result.choices[0]?.finish_reason === "length" ? 30 : result.usage?.completion_tokens,
        );
      assert.equal(results.length, 4);
    });
  });

  describe("chat completions", () => {
    it("answers a chat through the ChatML fallback template", async () => {
      const completion = await server.client.chat.completions.create({
        model: TEST_MODEL,
        messages: [
          { role: "system", content: "You tell stories." },
          {
            role: "user",
            content: [
              { type: "text", text: "Tell me" },
              { type: "text", text: "a story" },
            ],
          },
        ],
        max_tokens: 20,
        temperature: 0,
      });
      assert.equal(completion.object, "chat.completion");
      assert.match(completion.id, /^chatcmpl-/);
      const choice = completion.choices[0];
      assert.equal(choice?.message.role, "assistant");
      assert.ok((choice?.message.content ?? "").length > 0);
      assert.equal(choice?.finish_reason, "length");
      assert.equal(completion.usage?.completion_tokens, 20);
    });

    it("streams role first, then content, then finish_reason and usage equal to the non-streamed request", async () => {
      const request = {
        model: TEST_MODEL,
        messages: [{ role: "user" as const, content: "Once upon a time" }],
        max_tokens: 24,
        temperature: 0,
      };
      const whole = await server.client.chat.completions.create(request);
      const response = await server.post("/v1/chat/completions", {
        ...request,
        stream: true,
        stream_options: { include_usage: true },
      });
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
      const events = await readSse(response);
      assert.equal(events.at(-1), "[DONE]");
      const chunks = events.slice(0, -1) as OpenAI.ChatCompletionChunk[];
      assert.deepEqual(chunks[0]?.choices[0]?.delta, { role: "assistant", content: "" });
      const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
      assert.equal(text, whole.choices[0]?.message.content);
      const last = chunks.at(-2)?.choices[0];
      assert.equal(last?.finish_reason, "length");
      const usageChunk = chunks.at(-1);
      assert.deepEqual(usageChunk?.choices, []);
      assert.deepEqual(tokenCounts(usageChunk?.usage), tokenCounts(whole.usage));
      for (const chunk of chunks) assert.equal(chunk.object, "chat.completion.chunk");
    });

    it("the openai stream helper sees the whole message", async () => {
      const stream = server.client.chat.completions.stream({
        model: TEST_MODEL,
        messages: [{ role: "user", content: "Hello" }],
        max_tokens: 10,
        temperature: 0,
      });
      const final = await stream.finalChatCompletion();
      assert.equal(final.choices[0]?.message.role, "assistant");
      assert.ok((final.choices[0]?.message.content ?? "").length > 0);
    });
  });

  describe("models and health", () => {
    it("lists the model with max_model_len", async () => {
      const models = await server.client.models.list();
      const model = models.data[0] as OpenAI.Model & { max_model_len: number };
      assert.equal(model.id, TEST_MODEL);
      assert.equal(model.object, "model");
      assert.ok(model.max_model_len > 0);
      const one = await server.client.models.retrieve(TEST_MODEL);
      assert.equal(one.id, TEST_MODEL);
    });

    it("answers health, liveness and readiness", async () => {
      for (const path of ["/health", "/v1/health/live", "/v1/health/ready"]) {
        const response = await fetch(`${server.url}${path}`);
        assert.equal(response.status, 200, path);
      }
    });
  });

  describe("errors", () => {
    const expectError = async (response: Response, status: number) => {
      assert.equal(response.status, status);
      const body = (await response.json()) as Record<string, unknown> & { error: Record<string, unknown> };
      assert.equal(body.object, "error");
      assert.equal(body.code, status);
      assert.equal(typeof body.message, "string");
      assert.equal(body.error.message, body.message);
      assert.equal(typeof body.error.type, "string");
      assert.ok(response.headers.get("x-request-id"));
      return body;
    };

    it("400 for out-of-range values, through the SDK's BadRequestError with our message", async () => {
      await assert.rejects(
        server.client.completions.create({ model: TEST_MODEL, prompt: "a", temperature: 5 }),
        (error: unknown) => error instanceof OpenAI.BadRequestError && /temperature/.test(error.message),
      );
      const body = await expectError(
        await server.post("/v1/completions", { model: TEST_MODEL, prompt: "a", max_tokens: 0 }),
        400,
      );
      assert.equal(body.param, "max_tokens");
    });

    it("400 naming the limit when prompt + max_tokens exceed the context", async () => {
      const body = await expectError(
        await server.post("/v1/completions", {
          model: TEST_MODEL,
          prompt: "Once upon a time",
          max_tokens: 100000,
        }),
        400,
      );
      assert.match(String(body.message), /maximum context length is 2048 tokens/);
    });

    it("400 for malformed JSON and for echo with stream", async () => {
      await expectError(await server.post("/v1/completions", '{"model": "stories260K",'), 400);
      await expectError(
        await server.post("/v1/completions", { model: TEST_MODEL, prompt: "a", echo: true, stream: true }),
        400,
      );
    });

    it("404 for an unknown model, through the SDK's NotFoundError", async () => {
      await assert.rejects(
        server.client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "hi" }] }),
        (error: unknown) => error instanceof OpenAI.NotFoundError && /nope/.test(error.message),
      );
      await expectError(await fetch(`${server.url}/v1/models/nope`), 404);
    });

    it("415 for a non-JSON Content-Type", async () => {
      await expectError(
        await server.post("/v1/completions", "prompt=hi", { "content-type": "text/plain" }),
        415,
      );
    });

    it("422 with detail for schema violations, through the SDK's UnprocessableEntityError", async () => {
      await assert.rejects(
        server.client.completions.create({ model: TEST_MODEL, prompt: 5 as unknown as string }),
        (error: unknown) => error instanceof OpenAI.UnprocessableEntityError && /prompt/.test(error.message),
      );
      const body = await expectError(await server.post("/v1/chat/completions", { model: TEST_MODEL }), 422);
      const detail = body.detail as { loc: unknown[]; msg: string; type: string }[];
      assert.deepEqual(detail[0]?.loc, ["body", "messages"]);
    });

    it("400 for a request chat_template unless --trust-request-chat-template", async () => {
      const body = await expectError(
        await server.post("/v1/chat/completions", {
          model: TEST_MODEL,
          messages: [{ role: "user", content: "hi" }],
          chat_template: "{% for i in range(100000000) %}x{% endfor %}",
        }),
        400,
      );
      assert.equal(body.param, "chat_template");
      assert.match(String(body.message), /--trust-request-chat-template/);
    });

    it("400, not 500, for a schema nested deeper than the compiler follows", async () => {
      let schema: Record<string, unknown> = { type: "integer" };
      for (let depth = 0; depth < 3000; depth++) schema = { type: "array", maxItems: 1, items: schema };
      await expectError(
        await server.post("/v1/completions", { model: TEST_MODEL, prompt: "a", guided_json: schema }),
        400,
      );
    });

    it("400 naming the position of a prompt token id outside the vocabulary", async () => {
      const single = await expectError(
        await server.post("/v1/completions", { model: TEST_MODEL, prompt: [1, 99999], max_tokens: 1 }),
        400,
      );
      assert.equal((single.error as { param: string }).param, "prompt[1]");
      const batched = await expectError(
        await server.post("/v1/completions", {
          model: TEST_MODEL,
          prompt: [[1], [1, 2, 99999]],
          max_tokens: 1,
        }),
        400,
      );
      assert.equal((batched.error as { param: string }).param, "prompt[1][2]");
    });

    it("400 for stream_options without stream, as the OpenAI API", async () => {
      for (const [path, body] of [
        ["/v1/completions", { prompt: "a" }],
        ["/v1/chat/completions", { messages: [{ role: "user", content: "a" }] }],
      ] as const) {
        const error = await expectError(
          await server.post(path, {
            model: TEST_MODEL,
            max_tokens: 1,
            stream_options: { include_usage: true },
            ...body,
          }),
          400,
        );
        assert.equal((error.error as { param: string }).param, "stream_options");
      }
    });

    it("405 with Allow for a method a path does not take, also for paths with a model id", async () => {
      const response = await fetch(`${server.url}/v1/models/${TEST_MODEL}`, { method: "DELETE" });
      const body = await expectError(response, 405);
      assert.equal(response.headers.get("allow"), "GET, HEAD");
      assert.equal((body.error as { code: string }).code, "method_not_allowed");
      // A JSON Content-Type with an empty or broken body does not turn the 405/404 into a 400.
      for (const [method, path, status] of [
        ["DELETE", "/v1/completions", 405],
        ["PUT", "/v1/nope", 404],
      ] as const) {
        for (const payload of [undefined, "{x"]) {
          const answer = await fetch(`${server.url}${path}`, {
            method,
            headers: { "content-type": "application/json" },
            ...(payload === undefined ? {} : { body: payload }),
          });
          await expectError(answer, status);
        }
      }
    });

    it("400 for min_tokens above max_tokens", async () => {
      const body = await expectError(
        await server.post("/v1/completions", {
          model: TEST_MODEL,
          prompt: "a",
          max_tokens: 3,
          min_tokens: 5,
        }),
        400,
      );
      assert.equal(body.param, "min_tokens");
    });

    it("400 naming the message for image content on a text-only model", async () => {
      const body = await expectError(
        await server.post("/v1/chat/completions", {
          model: TEST_MODEL,
          messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }],
        }),
        400,
      );
      assert.equal(body.param, "messages[0].content[0]");
    });
  });
});

describe("a disconnected stream frees its sequence", () => {
  const server = useTestServer(["--max-num-seqs", "1"]);

  it("aborting a stream mid-way lets the next request run on the only slot", async () => {
    const controller = new AbortController();
    const response = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: TEST_MODEL,
        prompt: "Once",
        max_tokens: 2000,
        stream: true,
        ignore_eos: false,
      }),
      signal: controller.signal,
    });
    const reader = response.body?.getReader();
    await reader?.read();
    controller.abort();
    const next = await server.client.completions.create({
      model: TEST_MODEL,
      prompt: "Once upon a time",
      max_tokens: 8,
      temperature: 0,
    });
    assert.ok(next.choices[0]?.text.startsWith(", there was"));
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type OpenAI from "openai";
import { readSse, startTestServer, TEST_MODEL } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

/** A completions response as the server sends it (vLLM fields included). */
type Completion = {
  id: string;
  choices: {
    index: number;
    text: string;
    finish_reason: string;
    stop_reason: string | number | null;
    logprobs: {
      tokens: string[];
      token_logprobs: (number | null)[];
      top_logprobs: (Record<string, number> | null)[];
      text_offset: number[];
    } | null;
    prompt_logprobs?: (Record<string, { logprob: number; rank: number; decoded_token: string }> | null)[];
  }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
};

const PROMPT = "Once upon a time";

describe("generation controls and logprobs", () => {
  const complete = async (body: Record<string, unknown>): Promise<Completion> => {
    const response = await server.post("/v1/completions", { model: TEST_MODEL, prompt: PROMPT, ...body });
    const json = (await response.json()) as Completion & { message?: string };
    assert.equal(response.status, 200, json.message);
    return json;
  };
  const status = async (path: string, body: Record<string, unknown>) =>
    (await server.post(path, { model: TEST_MODEL, ...body })).status;
  /** Generated token ids, read through `return_tokens_as_token_ids`. */
  const tokenIds = async (body: Record<string, unknown>) => {
    const completion = await complete({ logprobs: 0, return_tokens_as_token_ids: true, ...body });
    return (completion.choices[0]?.logprobs?.tokens ?? []).map((token) =>
      Number(token.replace("token_id:", "")),
    );
  };
  const repeats = (ids: number[]) => ids.length - new Set(ids).size;

  const server = useTestServer(["--max-num-seqs", "4"]);

  it("logit_bias +100 on one token makes the output that token repeated", async () => {
    const ids = await tokenIds({ max_tokens: 8, temperature: 1, seed: 3, logit_bias: { "300": 100 } });
    assert.deepEqual(ids, Array(8).fill(300));
  });

  it("logit_bias -100 on the greedy first token changes the first token", async () => {
    const [first] = await tokenIds({ max_tokens: 1, temperature: 0 });
    assert.ok(first !== undefined);
    const [biased] = await tokenIds({ max_tokens: 1, temperature: 0, logit_bias: { [String(first)]: -100 } });
    assert.notEqual(biased, first);
    // The native sampler path (no logprobs) honours it too.
    const plain = await complete({ max_tokens: 3, temperature: 0 });
    const banned = await complete({ max_tokens: 3, temperature: 0, logit_bias: { [String(first)]: -100 } });
    assert.notEqual(banned.choices[0]?.text, plain.choices[0]?.text);
  });

  it("logit_bias with a token id outside the vocabulary is a 400", async () => {
    assert.equal(await status("/v1/completions", { prompt: PROMPT, logit_bias: { "999999": 5 } }), 400);
    assert.equal(await status("/v1/completions", { prompt: PROMPT, logit_bias: { abc: 5 } }), 400);
  });

  it("top_k 1 (and nvext.top_k 1) equals greedy at temperature 1", async () => {
    const greedy = await complete({ max_tokens: 40, temperature: 0 });
    const topK = await complete({ max_tokens: 40, temperature: 1, top_k: 1, seed: 11 });
    const nvext = await complete({ max_tokens: 40, temperature: 1, nvext: { top_k: 1 }, seed: 12 });
    assert.equal(topK.choices[0]?.text, greedy.choices[0]?.text);
    assert.equal(nvext.choices[0]?.text, greedy.choices[0]?.text);
  });

  it("the same seed gives the same text at temperature 1, another seed a different one", async () => {
    const body = { max_tokens: 60, temperature: 1 };
    const a = await complete({ ...body, seed: 42 });
    const b = await complete({ ...body, seed: 42 });
    const c = await complete({ ...body, seed: 43 });
    assert.equal(a.choices[0]?.text, b.choices[0]?.text);
    assert.notEqual(a.choices[0]?.text, c.choices[0]?.text);
  });

  it("asking for logprobs does not change a seeded request's text", async () => {
    const body = { prompt: "The", max_tokens: 16, temperature: 1.5, seed: 10 };
    const plain = await complete(body);
    const withLogprobs = await complete({ ...body, logprobs: 1 });
    const echoed = await complete({ ...body, prompt_logprobs: 1 });
    assert.equal(withLogprobs.choices[0]?.text, plain.choices[0]?.text);
    assert.equal(echoed.choices[0]?.text, plain.choices[0]?.text);
  });

  it("with --batch-invariant-seeds a seeded request gives the same text alone and while 3 other requests generate", async () => {
    // By default a seeded request shares batches (OpenAI's seed is best effort); the guarantee is opt-in.
    const invariant = await startTestServer(["--max-num-seqs", "4", "--batch-invariant-seeds"]);
    try {
      const post = async (body: Record<string, unknown>): Promise<Completion> => {
        const response = await invariant.post("/v1/completions", {
          model: TEST_MODEL,
          prompt: PROMPT,
          ...body,
        });
        assert.equal(response.status, 200);
        return (await response.json()) as Completion;
      };
      for (const seed of [1000, 1001, 1002]) {
        const body = { max_tokens: 120, temperature: 1, seed };
        const alone = await post(body);
        const [loaded] = await Promise.all([
          post(body),
          post({ prompt: "The dog", max_tokens: 150, temperature: 1 }),
          post({ prompt: "A big red ball was", max_tokens: 100, temperature: 1 }),
          post({ prompt: "Tom and Sue", max_tokens: 130, temperature: 1 }),
        ]);
        assert.equal(loaded.choices[0]?.text, alone.choices[0]?.text, `seed ${seed}`);
      }
    } finally {
      await invariant.stop();
    }
  });

  it("frequency, presence and repetition penalties lower repetition on a long greedy generation", async () => {
    const base = repeats(await tokenIds({ max_tokens: 150, temperature: 0 }));
    const frequency = repeats(await tokenIds({ max_tokens: 150, temperature: 0, frequency_penalty: 2 }));
    const presence = repeats(await tokenIds({ max_tokens: 150, temperature: 0, presence_penalty: 2 }));
    const repetition = repeats(await tokenIds({ max_tokens: 150, temperature: 0, repetition_penalty: 1.8 }));
    assert.ok(frequency < base, `frequency ${frequency} vs ${base}`);
    assert.ok(presence < base, `presence ${presence} vs ${base}`);
    assert.ok(repetition < base, `repetition ${repetition} vs ${base}`);
    // Without logprobs the native sampler applies them too.
    const plain = await complete({ max_tokens: 150, temperature: 0 });
    const penalised = await complete({ max_tokens: 150, temperature: 0, frequency_penalty: 2 });
    assert.notEqual(penalised.choices[0]?.text, plain.choices[0]?.text);
  });

  it("min_tokens 20 with a stop string that would fire earlier still gives >= 20 tokens", async () => {
    const early = await complete({ max_tokens: 60, temperature: 0, stop: ["Lily"] });
    assert.ok(early.usage.completion_tokens < 20);
    const held = await complete({ max_tokens: 60, temperature: 0, stop: ["Lily"], min_tokens: 20 });
    assert.ok(held.usage.completion_tokens >= 20, String(held.usage.completion_tokens));
  });

  it("ignore_eos keeps generating past EOS up to max_tokens", async () => {
    // stories260K almost never samples EOS (id 2; logprob about -28 here): a bias makes it certain.
    const likelyEos = { max_tokens: 200, temperature: 1, seed: 4, logit_bias: { "2": 40 } };
    const natural = await complete(likelyEos);
    assert.equal(natural.choices[0]?.finish_reason, "stop");
    assert.equal(natural.choices[0]?.stop_reason, null);
    assert.ok(natural.usage.completion_tokens < 200);
    const ignoring = await complete({ ...likelyEos, ignore_eos: true });
    assert.equal(ignoring.usage.completion_tokens, 200);
    assert.equal(ignoring.choices[0]?.finish_reason, "length");
    const nvext = await complete({ ...likelyEos, nvext: { ignore_eos: true } });
    assert.equal(nvext.usage.completion_tokens, 200);
    // The exact (logprobs) sampler bans EOS too.
    const exact = await complete({ ...likelyEos, ignore_eos: true, logprobs: 1 });
    assert.equal(exact.usage.completion_tokens, 200);
  });

  it("max_tokens null generates until the context ends", async () => {
    const completion = await complete({ max_tokens: null, temperature: 0, ignore_eos: true });
    assert.equal(completion.usage.prompt_tokens + completion.usage.completion_tokens, 2048);
    assert.equal(completion.choices[0]?.finish_reason, "length");
  });

  it("stop_token_ids end the generation with the id as stop_reason", async () => {
    const ids = await tokenIds({ max_tokens: 10, temperature: 0 });
    const third = ids[2] as number;
    const stopped = await complete({ max_tokens: 10, temperature: 0, stop_token_ids: [third] });
    assert.equal(stopped.choices[0]?.finish_reason, "stop");
    assert.equal(stopped.choices[0]?.stop_reason, third);
    assert.equal(stopped.usage.completion_tokens, 3);
    const kept = await complete({
      max_tokens: 10,
      temperature: 0,
      stop_token_ids: [third],
      include_stop_str_in_output: true,
    });
    assert.ok(kept.choices[0]?.text.startsWith(stopped.choices[0]?.text ?? "?"));
    assert.ok((kept.choices[0]?.text.length ?? 0) > (stopped.choices[0]?.text.length ?? 0));
  });

  it("include_stop_str_in_output keeps the stop string", async () => {
    const completion = await complete({
      max_tokens: 40,
      temperature: 0,
      stop: "Lily",
      include_stop_str_in_output: true,
    });
    assert.ok(completion.choices[0]?.text.endsWith("named Lily"), completion.choices[0]?.text);
  });

  it("greedy logprobs 5: the chosen token ranks first and the top probabilities sum to <= 1", async () => {
    const completion = await complete({ max_tokens: 20, temperature: 0, logprobs: 5 });
    const logprobs = completion.choices[0]?.logprobs;
    assert.ok(logprobs);
    assert.equal(logprobs.tokens.length, 20);
    assert.equal(logprobs.tokens.join(""), completion.choices[0]?.text);
    logprobs.top_logprobs.forEach((top, index) => {
      assert.ok(top);
      const values = Object.values(top);
      assert.ok(values.length >= 5 && values.length <= 6);
      assert.equal(Math.max(...values), logprobs.token_logprobs[index]);
      const mass = values.reduce((sum, value) => sum + Math.exp(value), 0);
      assert.ok(mass <= 1 + 1e-6, `mass ${mass}`);
    });
    for (let index = 1; index < logprobs.text_offset.length; index++) {
      assert.equal(
        logprobs.text_offset[index],
        (logprobs.text_offset[index - 1] as number) + (logprobs.tokens[index - 1] as string).length,
      );
    }
  });

  it("text_offset indexes the returned text, also where the text drops a token's leading space", async () => {
    // After an empty prompt (BOS only) the first token " Once" is decoded as "Once".
    for (const echo of [false, true]) {
      const completion = await complete({ prompt: "", max_tokens: 12, temperature: 0, logprobs: 0, echo });
      const choice = completion.choices[0];
      const logprobs = choice?.logprobs;
      assert.ok(choice && logprobs);
      const offsets = logprobs.text_offset;
      const generated = offsets.length - 12;
      assert.equal(offsets[generated], 0); // the echoed prompt is empty text
      for (let index = generated + 1; index < offsets.length; index++) {
        const start = offsets[index] as number;
        const end: number = offsets[index + 1] ?? choice.text.length;
        assert.equal(choice.text.slice(start, end), logprobs.tokens[index], `token ${index}`);
      }
      assert.ok((offsets.at(-1) as number) <= choice.text.length);
    }
  });

  it("sampled tokens are always reported, even outside top_logprobs, with raw (untruncated) logprobs", async () => {
    const completion = await complete({ max_tokens: 30, temperature: 1.5, top_k: 40, seed: 5, logprobs: 1 });
    const logprobs = completion.choices[0]?.logprobs;
    assert.ok(logprobs);
    logprobs.top_logprobs.forEach((top, index) => {
      assert.ok(top && Object.keys(top).length >= 1 && Object.keys(top).length <= 2);
      assert.ok(Object.hasOwn(top, logprobs.tokens[index] as string));
    });
  });

  it("chat logprobs with top_logprobs give content entries with bytes, sorted", async () => {
    const response = await server.client.chat.completions.create({
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 10,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = response.choices[0]?.logprobs?.content ?? [];
    assert.equal(content.length, 10);
    for (const entry of content) {
      assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, "utf8")].length ? entry.bytes : []);
      assert.equal(entry.top_logprobs.length, 3);
      const values = entry.top_logprobs.map((top) => top.logprob);
      assert.deepEqual(
        values,
        [...values].sort((a, b) => b - a),
      );
      assert.equal(entry.top_logprobs[0]?.logprob, entry.logprob);
    }
    const bytes = content.flatMap((entry) => entry.bytes ?? []);
    assert.equal(Buffer.from(bytes).toString("utf8"), response.choices[0]?.message.content);
  });

  it("top_logprobs without logprobs is a 400", async () => {
    const body = { messages: [{ role: "user", content: "Hi" }], top_logprobs: 2 };
    assert.equal(await status("/v1/chat/completions", body), 400);
  });

  it("echo returns the prompt byte for byte, with the prompt's logprobs first (the first null)", async () => {
    const prompt = "Once upon a time, Zoë";
    const echoed = await complete({ prompt, max_tokens: 5, temperature: 0, echo: true });
    const plain = await complete({ prompt, max_tokens: 5, temperature: 0 });
    assert.equal(echoed.choices[0]?.text, prompt + plain.choices[0]?.text);
    const withLogprobs = await complete({ prompt, max_tokens: 5, temperature: 0, echo: true, logprobs: 2 });
    const logprobs = withLogprobs.choices[0]?.logprobs;
    assert.ok(logprobs);
    assert.equal(logprobs.token_logprobs[0], null);
    const promptTokens = withLogprobs.usage.prompt_tokens;
    assert.equal(logprobs.tokens.length, promptTokens + 5);
    assert.ok(logprobs.token_logprobs.slice(1).every((value) => typeof value === "number"));
  });

  it("echo with stream is a 400, suffix on a model without FIM tokens is a 400", async () => {
    assert.equal(await status("/v1/completions", { prompt: PROMPT, echo: true, stream: true }), 400);
    const response = await server.post("/v1/completions", {
      model: TEST_MODEL,
      prompt: PROMPT,
      suffix: "The end.",
    });
    assert.equal(response.status, 400);
    assert.match(((await response.json()) as { message: string }).message, /fill-in-the-middle/);
  });

  it("prompt_logprobs gives vLLM's shape: one entry per prompt token, the first null", async () => {
    const completion = await complete({ max_tokens: 2, temperature: 0, prompt_logprobs: 3 });
    const entries = completion.choices[0]?.prompt_logprobs;
    assert.ok(entries);
    assert.equal(entries.length, completion.usage.prompt_tokens);
    assert.equal(entries[0], null);
    for (const entry of entries.slice(1)) {
      assert.ok(entry);
      const values = Object.values(entry);
      assert.ok(values.length >= 3 && values.length <= 4);
      for (const value of values) {
        assert.equal(typeof value.decoded_token, "string");
        assert.ok(value.rank >= 1 && value.logprob <= 0);
      }
    }
  });

  it("n 3 gives 3 choices with indexes 0..2, streamed and not", async () => {
    const completion = await complete({ prompt: "The", max_tokens: 20, temperature: 1.5, n: 3, seed: 9 });
    assert.deepEqual(
      completion.choices.map((choice) => choice.index),
      [0, 1, 2],
    );
    assert.equal(new Set(completion.choices.map((choice) => choice.text)).size, 3);
    const events = await readSse(
      await server.post("/v1/completions", {
        model: TEST_MODEL,
        prompt: "The",
        max_tokens: 20,
        temperature: 1.5,
        n: 3,
        seed: 9,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const chunks = events.filter((event) => event !== "[DONE]") as Completion[];
    const texts = ["", "", ""];
    for (const chunk of chunks) for (const choice of chunk.choices) texts[choice.index] += choice.text;
    assert.deepEqual(
      texts,
      completion.choices.map((choice) => choice.text),
    );
    assert.equal(chunks.at(-1)?.usage.completion_tokens, completion.usage.completion_tokens);
    assert.equal(chunks.at(-1)?.usage.completion_tokens, 60);
  });

  it("best_of returns the n best by cumulative logprob; best_of < n is a 400", async () => {
    const completion = await complete({ max_tokens: 12, temperature: 1, n: 1, best_of: 4, seed: 21 });
    assert.equal(completion.choices.length, 1);
    const candidates = await complete({ max_tokens: 12, temperature: 1, n: 4, seed: 21, logprobs: 0 });
    const scores = candidates.choices.map((choice) =>
      (choice.logprobs?.token_logprobs ?? []).reduce((sum: number, value) => sum + (value ?? 0), 0),
    );
    const best = candidates.choices[scores.indexOf(Math.max(...scores))];
    assert.equal(completion.choices[0]?.text, best?.text);
    assert.equal(await status("/v1/completions", { prompt: PROMPT, n: 3, best_of: 2 }), 400);
  });

  it("stream and non-stream give the same text, logprobs and usage for a greedy request", async () => {
    const body = { max_tokens: 24, temperature: 0, logprobs: 2 };
    const whole = await complete(body);
    const events = await readSse(
      await server.post("/v1/completions", {
        model: TEST_MODEL,
        prompt: PROMPT,
        ...body,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    );
    const chunks = events.filter((event) => event !== "[DONE]") as Completion[];
    for (const chunk of chunks) assert.ok(chunk.usage, "continuous usage on every chunk");
    let text = "";
    const tokens: string[] = [];
    const values: (number | null)[] = [];
    const offsets: number[] = [];
    for (const chunk of chunks) {
      for (const choice of chunk.choices) {
        text += choice.text;
        tokens.push(...(choice.logprobs?.tokens ?? []));
        values.push(...(choice.logprobs?.token_logprobs ?? []));
        offsets.push(...(choice.logprobs?.text_offset ?? []));
      }
    }
    assert.equal(text, whole.choices[0]?.text);
    assert.deepEqual(tokens, whole.choices[0]?.logprobs?.tokens);
    assert.deepEqual(values, whole.choices[0]?.logprobs?.token_logprobs);
    assert.deepEqual(offsets, whole.choices[0]?.logprobs?.text_offset);
    const usage = chunks.at(-1)?.usage;
    assert.equal(usage?.completion_tokens, whole.usage.completion_tokens);
    assert.equal(usage?.prompt_tokens, whole.usage.prompt_tokens);
  });

  it("chat streams carry each chunk's own logprobs", async () => {
    const body = {
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 12,
      temperature: 0,
      logprobs: true,
      top_logprobs: 1,
    };
    const whole = (await (await server.post("/v1/chat/completions", body)).json()) as OpenAI.ChatCompletion;
    const events = await readSse(await server.post("/v1/chat/completions", { ...body, stream: true }));
    const chunks = events.filter((event) => event !== "[DONE]") as OpenAI.ChatCompletionChunk[];
    const streamed = chunks.flatMap((chunk) => chunk.choices[0]?.logprobs?.content ?? []);
    const expected = whole.choices[0]?.logprobs?.content ?? [];
    assert.equal(streamed.length, expected.length);
    // The second request reuses the first one's KV cache (prefix caching), so its prompt is evaluated in
    // a different batch shape: llama.cpp's float rounding differs in the 7th digit, no more.
    streamed.forEach((entry, index) => {
      const other = expected[index];
      assert.equal(entry.token, other?.token);
      assert.deepEqual(entry.bytes, other?.bytes);
      assert.ok(Math.abs(entry.logprob - (other?.logprob ?? 0)) < 1e-5);
    });
  });

  it("request_id becomes the response id; user and response_format text are accepted", async () => {
    const completion = await complete({
      max_tokens: 2,
      request_id: "my-request-1",
      user: "u1",
      response_format: { type: "text" },
    });
    assert.equal(completion.id, "my-request-1");
  });

  it("add_special_tokens false leaves out BOS", async () => {
    const withBos = await complete({ max_tokens: 1 });
    const without = await complete({ max_tokens: 1, add_special_tokens: false });
    assert.equal(without.usage.prompt_tokens, withBos.usage.prompt_tokens - 1);
  });
});

/**
 * Image input end to end (issue #16): stories260K with a tiny random-weight projector written by
 * `bench/make-model.ts --mmproj-for` is a working (random) vision-language model. Driven through the
 * official `openai` client where a client would, and raw HTTP for the error bodies.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type OpenAI from "openai";
import { projectRoot, sharedModelsDir } from "../../src/paths.ts";
import { dataUrl, encodeBmp, encodePng } from "../helpers/images.ts";
import { TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const STORIES = join(sharedModelsDir, "stories260K.gguf");
/** Image tokens of the test projector (32 px, patch 8). */
const IMAGE_TOKENS = 16;

const red = dataUrl(
  encodePng(32, 32, () => [220, 30, 30]),
  "image/png",
);
const stripes = dataUrl(
  encodePng(32, 32, (x) => (x % 8 < 4 ? [0, 0, 0] : [255, 255, 255])),
  "image/png",
);
const bmp = dataUrl(encodeBmp(24, 16), "image/bmp");

type Part = OpenAI.ChatCompletionContentPart;
const image = (url: string): Part => ({ type: "image_url", image_url: { url } });
const text = (value: string): Part => ({ type: "text", text: value });

describe("image input (--mmproj)", () => {
  let dir: string;
  let projector: string;
  let imageHost: Server;
  let hostUrl: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "lmserve-images-"));
    projector = join(dir, "mmproj.gguf");
    const made = spawnSync(
      process.execPath,
      ["--import", "tsx", "bench/make-model.ts", "--mmproj-for", STORIES, "--out", projector, "--quiet"],
      { cwd: projectRoot, encoding: "utf8" },
    );
    assert.equal(made.status, 0, made.stderr);
  });
  const server = useTestServer(() => [
    "--mmproj",
    projector,
    "--max-num-seqs",
    "4",
    "--max-image-bytes",
    "100000",
  ]);
  const open = useTestServer(() => [
    "--mmproj",
    projector,
    "--allow-private-image-urls",
    "--max-num-seqs",
    "2",
  ]);
  before(async () => {
    const png = encodePng(32, 32, (x, y) => [x * 8, y * 8, 128]);
    imageHost = createServer((request, response) => {
      if (request.url === "/cat.png") {
        response.writeHead(200, { "content-type": "image/png" }).end(png);
      } else response.writeHead(404).end("no");
    });
    await new Promise<void>((resolve) => imageHost.listen(0, "127.0.0.1", resolve));
    hostUrl = `http://127.0.0.1:${(imageHost.address() as AddressInfo).port}`;
  });

  after(() => {
    imageHost?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const chat = (target: TestServer, content: Part[] | string, extra: Record<string, unknown> = {}) =>
    target.client.chat.completions.create({
      model: TEST_MODEL,
      messages: [{ role: "user", content }],
      max_tokens: 12,
      temperature: 0,
      ...extra,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);

  it("/v1/models says the model takes images", async () => {
    const models = await server.client.models.list();
    const entry = models.data[0] as unknown as { capabilities?: { vision?: boolean } };
    assert.equal(entry.capabilities?.vision, true);
  });

  it("an image part gives 200 and counts the image's tokens in prompt_tokens", async () => {
    const plain = await chat(server, [text("What is in the picture?")]);
    const withImage = await chat(server, [text("What is in the picture?"), image(red)]);
    assert.ok(withImage.choices[0]?.message.content);
    const extra = (withImage.usage?.prompt_tokens ?? 0) - (plain.usage?.prompt_tokens ?? 0);
    // The image's tokens, plus the newline that joins the parts (one or two tokens).
    assert.ok(extra >= IMAGE_TOKENS && extra <= IMAGE_TOKENS + 2, `${extra} more prompt tokens`);
  });

  it("two different images give different outputs at temperature 0; the same image the same", async () => {
    const a = await chat(server, [text("Describe it."), image(red)], { max_tokens: 24 });
    const b = await chat(server, [text("Describe it."), image(stripes)], { max_tokens: 24 });
    const again = await chat(server, [text("Describe it."), image(red)], { max_tokens: 24 });
    assert.notEqual(a.choices[0]?.message.content, b.choices[0]?.message.content);
    assert.equal(again.choices[0]?.message.content, a.choices[0]?.message.content);
  });

  it("prefix caching never reuses one image's tokens for another", async () => {
    await chat(server, [text("Look at this one please."), image(red)]);
    const other = await chat(server, [text("Look at this one please."), image(stripes)]);
    const same = await chat(server, [text("Look at this one please."), image(stripes)]);
    const prompt = other.usage?.prompt_tokens ?? 0;
    const cachedOther = other.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    // The other image's cells are not reused: the cache stops before the image (its last 16+ tokens).
    assert.ok(cachedOther <= prompt - IMAGE_TOKENS, `${cachedOther} of ${prompt} cached`);
    // The same image again reuses it (everything but the tail after it).
    assert.ok((same.usage?.prompt_tokens_details?.cached_tokens ?? 0) > prompt - IMAGE_TOKENS);
  });

  it("streamed equals non-streamed; several images and earlier turns work", async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "user", content: [text("First:"), image(red), text("and second:"), image(bmp)] },
      { role: "assistant", content: "Two pictures." },
      { role: "user", content: [text("And this?"), image(stripes)] },
    ];
    const whole = await server.client.chat.completions.create({
      model: TEST_MODEL,
      messages,
      max_tokens: 16,
      temperature: 0,
    });
    const stream = await server.client.chat.completions.create({
      model: TEST_MODEL,
      messages,
      max_tokens: 16,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamed = "";
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(streamed, whole.choices[0]?.message.content);
    assert.equal(usage?.prompt_tokens, whole.usage?.prompt_tokens);
    assert.ok((whole.usage?.prompt_tokens ?? 0) > 3 * IMAGE_TOKENS);
  });

  it("an image with tools and a json_schema response format together", async () => {
    const result = await chat(server, [text("Give me a verdict."), image(red)], {
      tools: [
        {
          type: "function",
          function: { name: "noop", parameters: { type: "object", properties: {} } },
        },
      ],
      tool_choice: "none",
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "verdict",
          schema: {
            type: "object",
            properties: { ok: { type: "boolean" } },
            required: ["ok"],
            additionalProperties: false,
          },
        },
      },
      max_tokens: 40,
    });
    const choice = result.choices[0];
    assert.ok(choice);
    if (choice.finish_reason === "stop") {
      const parsed = JSON.parse(choice.message.content ?? "") as { ok: unknown };
      assert.equal(typeof parsed.ok, "boolean");
    }
  });

  it("every bad image is a 400 naming messages[i].content[j]", async () => {
    const cases: [string, string][] = [
      ["data:image/png;base64,AAAAAAAA", "does not hold an image"],
      [`data:image/png;base64,${Buffer.from("GIF89a-but-broken").toString("base64")}`, "decoded"],
      ["data:text/plain;base64,aGVsbG8=", "image"],
      ["file:///etc/passwd", "file"],
      ["ftp://example.com/a.png", "ftp"],
      [
        dataUrl(
          encodePng(300, 300, (x, y) => [x % 256, y % 256, (x * y) % 256]),
          "image/png",
        ),
        "large",
      ],
      [`${hostUrl}/cat.png`, "loopback"],
    ];
    for (const [url, hint] of cases) {
      const response = await server.post("/v1/chat/completions", {
        model: TEST_MODEL,
        messages: [
          { role: "system", content: "You look at pictures." },
          { role: "user", content: [text("See:"), image(url)] },
        ],
        max_tokens: 4,
      });
      const body = (await response.json()) as { error: { message: string; param: string } };
      assert.equal(response.status, 400, `${url.slice(0, 40)}: ${body.error?.message}`);
      assert.equal(body.error.param, "messages[1].content[1]", url.slice(0, 40));
      assert.match(body.error.message.toLowerCase(), new RegExp(hint), url.slice(0, 40));
    }
    // Too many images for the context: a 400 with the numbers, not a crash.
    const many = Array.from({ length: 140 }, () => image(red));
    const response = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages: [{ role: "user", content: many }],
      max_tokens: 4,
    });
    assert.equal(response.status, 400);
    // The server still serves.
    assert.ok((await chat(server, [text("Still there?"), image(red)])).choices[0]);
  });

  it("an image URL on a local server works with --allow-private-image-urls; a 404 is a 400", async () => {
    const result = await chat(open, [text("What is it?"), image(`${hostUrl}/cat.png`)]);
    assert.ok(result.choices[0]?.message.content !== undefined);
    const missing = await open.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages: [{ role: "user", content: [image(`${hostUrl}/none.png`)] }],
    });
    assert.equal(missing.status, 400);
    assert.match(((await missing.json()) as { error: { message: string } }).error.message, /404/);
  });

  it("20 concurrent image requests, half aborted, leave no busy slot", async () => {
    const requests = Array.from({ length: 20 }, async (_, index) => {
      const controller = new AbortController();
      const pending = server.client.chat.completions
        .create(
          {
            model: TEST_MODEL,
            messages: [
              { role: "user", content: [text(`Picture ${index}`), image(index % 2 ? red : stripes)] },
            ],
            max_tokens: 64,
            stream: true,
          },
          { signal: controller.signal },
        )
        .then(async (stream) => {
          for await (const _ of stream) if (index % 2 === 0) controller.abort();
        })
        .catch(() => undefined);
      return pending;
    });
    await Promise.all(requests);
    let running = Number.NaN;
    for (let attempt = 0; attempt < 50; attempt++) {
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      running = Number(/^vllm:num_requests_running\{[^}]*\} (\S+)/m.exec(metrics)?.[1]);
      if (running === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(running, 0);
    assert.ok((await chat(server, [text("After the storm"), image(red)])).choices[0]);
  });
});

describe("a model without a projector", () => {
  const server = useTestServer([]);

  it("keeps the 400 naming the image part, and /v1/models says no vision", async () => {
    const response = await server.post("/v1/chat/completions", {
      model: TEST_MODEL,
      messages: [{ role: "user", content: [text("See:"), image(red)] }],
    });
    assert.equal(response.status, 400);
    const body = (await response.json()) as { error: { param: string; message: string } };
    assert.equal(body.error.param, "messages[0].content[1]");
    assert.match(body.error.message, /does not accept images/);
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {
      data: { capabilities: { vision: boolean } }[];
    };
    assert.equal(models.data[0]?.capabilities.vision, false);
  });
});

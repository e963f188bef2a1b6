/**
 * The web UI in a real browser (system Chromium driven by playwright-core) against the real server on
 * stories260K. Skips with "chromium not installed" when there is no browser. The UI is built first
 * when `ui/dist` is missing (`npm test` builds it before the tests).
 */
import assert from "node:assert/strict";
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { defaultModelPath } from "../../src/paths.ts";
import { ensureUiBuilt, findChromium, launchChromium } from "../helpers/browser.ts";
import { TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { useTestServer } from "../helpers/useTestServer.ts";

const chromiumPath = findChromium();
const SKIP_REASON = "chromium not installed";

type ChatBody = { messages: { role: string; content: string }[] } & Record<string, unknown>;

/** The value of one sample of /metrics (0 when absent), e.g. `name{label="x"}`. */
async function metricValue(server: TestServer, sample: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
  return line === undefined ? 0 : Number(line.slice(sample.length + 1));
}

/** Re-reads /metrics until the sample reaches `atLeast`; fails after 600 reads. */
async function waitForMetric(server: TestServer, sample: string, atLeast: number): Promise<void> {
  for (let read = 0; read < 600; read++) {
    if ((await metricValue(server, sample)) >= atLeast) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`${sample} never reached ${atLeast}`);
}

describe("web UI in Chromium", { skip: chromiumPath ? false : SKIP_REASON }, () => {
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const foreignRequests: string[] = [];

  before(() => ensureUiBuilt());
  // The browser closes before the server stops (after hooks run in the order they are registered).
  after(async () => {
    await browser?.close();
  });
  const server = useTestServer(["--seed", "1", "--max-num-seqs", "2"]);
  before(async () => {
    browser = await launchChromium(chromiumPath!);
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(60_000);
    page.on("pageerror", (error) => pageErrors.push(error.message));
    page.on("request", (request) => {
      const url = request.url();
      if (!url.startsWith(`${server.url}/`) && !url.startsWith("data:")) foreignRequests.push(url);
    });
    await page.goto(`${server.url}/`);
    await page.locator('select[name="model"] option[value="stories260K"]').waitFor({ state: "attached" });
  });

  /** Sets a sampling field of the settings panel. */
  const setNumber = (label: string, value: string) => page.getByLabel(label, { exact: true }).fill(value);
  const assistantBodies = () => page.locator(".message.assistant .body");
  const lastStat = (name: string) => page.locator(`.message.assistant [data-stat="${name}"]`).last();

  /** Sends the composer's text and returns the JSON body of the request the page made. */
  async function send(text: string): Promise<ChatBody> {
    await page.getByLabel("Message", { exact: true }).fill(text);
    const [request] = await Promise.all([
      page.waitForRequest((r) => r.url().endsWith("/v1/chat/completions") && r.method() === "POST"),
      page.getByRole("button", { name: "Send" }).click(),
    ]);
    return request.postDataJSON() as ChatBody;
  }

  /**
   * Waits until the reply (after a Clear, the only one) has finished or the request was refused;
   * returns "done" or the error alert's text.
   */
  async function replyOutcome(): Promise<string> {
    const alert = page.locator(".work > .alert");
    await page
      .locator('.message.assistant [data-stat="finish"], .work > .alert:not([hidden])')
      .first()
      .waitFor();
    return (await alert.isVisible()) ? ((await alert.textContent()) ?? "") : "done";
  }

  it("loads from this server only, with the served models to pick from", async () => {
    assert.equal(await page.title(), "Playground · lmserve");
    assert.deepEqual(await page.locator('select[name="model"] option').allTextContents(), [TEST_MODEL]);
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(pageErrors, []);
  });

  it("streams a chat reply piece by piece, with the API's text and its stats, and keeps the conversation", async () => {
    await setNumber("Temperature", "0");
    await setNumber("Max tokens", "24");
    // Record the reply's text each time it changes while the request is still running.
    await page.evaluate(() => {
      const w = window as unknown as { partialReplies: string[] };
      w.partialReplies = [];
      new MutationObserver(() => {
        const body = document.querySelector('.message.assistant .body[aria-busy="true"]');
        const text = body?.textContent ?? "";
        if (text !== "" && text !== w.partialReplies.at(-1)) w.partialReplies.push(text);
      }).observe(document.querySelector(".transcript")!, {
        childList: true,
        subtree: true,
        characterData: true,
      });
    });
    const body = await send("Tell me a story");
    assert.deepEqual(body.messages, [{ role: "user", content: "Tell me a story" }]);
    assert.equal(body.stream, true);
    assert.deepEqual(body.stream_options, { include_usage: true });
    await lastStat("finish").filter({ hasText: "length" }).waitFor();

    const expected = await server.client.chat.completions.create({
      model: TEST_MODEL,
      messages: [{ role: "user", content: "Tell me a story" }],
      temperature: 0,
      max_tokens: 24,
    });
    const replyText = await assistantBodies().last().textContent();
    assert.equal(replyText, expected.choices[0]?.message.content);
    const partials = await page.evaluate(
      () => (window as unknown as { partialReplies: string[] }).partialReplies,
    );
    assert.ok(partials.length >= 2, `the reply was shown growing: ${JSON.stringify(partials)}`);
    for (const partial of partials) assert.ok(replyText?.startsWith(partial), partial);

    assert.match((await lastStat("ttft").textContent()) ?? "", /^\d+ ms$/);
    assert.match((await lastStat("speed").textContent()) ?? "", /^\d+(\.\d)? tok\/s$/);
    assert.equal(await lastStat("prompt").textContent(), String(expected.usage?.prompt_tokens));
    assert.match((await lastStat("cached").textContent()) ?? "", /^\d+$/);
    assert.equal(await lastStat("completion").textContent(), "24");

    // Second turn: the whole conversation goes with it, and the shared prefix is served from cache.
    const second = await send("What happened next?");
    assert.deepEqual(
      second.messages.map((m) => [m.role, m.content]),
      [
        ["user", "Tell me a story"],
        ["assistant", replyText],
        ["user", "What happened next?"],
      ],
    );
    await page.locator('.message.assistant [data-stat="finish"]').nth(1).waitFor();
    assert.equal(await assistantBodies().count(), 2);
    assert.ok(
      Number(await lastStat("cached").textContent()) > 0,
      "the second turn reuses the first's KV cache",
    );
    assert.deepEqual(pageErrors, []);
  });

  it("shows the current request as curl, OpenAI and AI SDK code", async () => {
    await page.getByLabel("Message", { exact: true }).fill("One more");
    await page.getByText("Code for this request").click();
    const code = page.locator(".code-panel pre");
    const curl = (await code.textContent()) ?? "";
    assert.match(curl, new RegExp(`^curl -N ${server.url}/v1/chat/completions`));
    const sent = JSON.parse(curl.slice(curl.indexOf("-d '") + 4, -1).replaceAll("'\\''", "'")) as ChatBody;
    assert.equal(sent.messages.length, 5);
    assert.deepEqual(sent.messages.at(-1), { role: "user", content: "One more" });
    assert.equal(sent.temperature, 0);
    await page.getByLabel("Language").selectOption("python");
    assert.match(
      (await code.textContent()) ?? "",
      /client\.chat\.completions\.create\(\n {4}model="stories260K",/,
    );
    await page.getByLabel("Language").selectOption("aisdk");
    assert.match(
      (await code.textContent()) ?? "",
      /streamText\(\{\n {2}model: lmserve\.chatModel\("stories260K"\),/,
    );
    assert.equal(await page.getByRole("button", { name: "Copy as AI SDK" }).count(), 1);
    await page.getByText("Code for this request").click();
    await page.getByLabel("Message", { exact: true }).fill("");
  });

  it("stop cancels a long generation mid-stream", async () => {
    await page.getByRole("button", { name: "Clear" }).click();
    await setNumber("Temperature", "1");
    await setNumber("Max tokens", "1900");
    await setNumber("Seed", "7");
    assert.equal(
      await metricValue(
        server,
        'vllm:request_success_total{model_name="stories260K",finished_reason="abort"}',
      ),
      0,
    );
    await send("Tell me a very long story");
    await page.waitForFunction(
      () => (document.querySelector(".message.assistant .body")?.textContent ?? "").length > 20,
    );
    await page.getByRole("button", { name: "Stop" }).click();
    await lastStat("finish").filter({ hasText: "stopped by you" }).waitFor();
    const shown = (await lastStat("completion").textContent()) ?? "";
    const received = Number(shown.replace("≈", ""));
    assert.ok(received > 0 && received < 1900, `stopped after ${shown} of 1900 tokens`);
    assert.equal(await page.getByRole("button", { name: "Send" }).isEnabled(), true);
    assert.equal(await page.getByRole("button", { name: "Stop" }).isEnabled(), false);
    // The server saw the cancellation: the request is counted as finished with reason "abort".
    await waitForMetric(
      server,
      'vllm:request_success_total{model_name="stories260K",finished_reason="abort"}',
      1,
    );
    await setNumber("Seed", "");
  });

  it("colours tokens by probability and shows the alternatives on hover", async () => {
    await page.getByRole("button", { name: "Clear" }).click();
    await setNumber("Temperature", "0");
    await setNumber("Max tokens", "8");
    await page.getByLabel("Show logprobs").check();
    const body = await send("Tell me a story");
    assert.equal(body.logprobs, true);
    assert.equal(body.top_logprobs, 5);
    const outcome = await replyOutcome();
    assert.equal(outcome, "done");
    const tokens = page.locator(".message.assistant .body .tok");
    assert.equal(await tokens.count(), 8);
    for (const className of await tokens.evaluateAll((spans) => spans.map((span) => span.className))) {
      assert.match(className, /^tok p[1-5]$/);
    }
    await tokens.first().hover();
    const tip = page.getByRole("tooltip");
    await tip.waitFor();
    assert.equal(await tip.locator("tr").count(), 5);
    assert.match((await tip.locator(".tip-head").textContent()) ?? "", /%$/);
    await page.getByLabel("Show logprobs").uncheck();
  });

  it("constrains a reply to a JSON schema and shows it validated", async (t) => {
    await page.getByRole("button", { name: "Clear" }).click();
    await setNumber("Temperature", "0.7");
    await setNumber("Max tokens", "200");
    await page.getByLabel("Constrain the reply to").selectOption("json_schema");
    const schema = JSON.parse(await page.getByRole("textbox", { name: "JSON schema" }).inputValue()) as {
      required: string[];
    };
    const body = await send("Describe a cat as JSON");
    assert.deepEqual((body.response_format as { type: string }).type, "json_schema");
    const outcome = await replyOutcome();
    await page.getByLabel("Constrain the reply to").selectOption("none");
    if (outcome !== "done") {
      const alert = outcome;
      assert.match(alert, /Not supported by this server yet \(HTTP 400\)/);
      assert.match(alert, /response_format/);
      t.skip(`guided decoding not available yet; the UI shows the server's 400 instead: ${alert}`);
      return;
    }
    await page.locator('[data-check="valid"]').waitFor();
    const value = JSON.parse((await assistantBodies().last().textContent()) ?? "") as Record<string, unknown>;
    for (const key of schema.required) assert.ok(key in value, `reply has "${key}"`);
  });

  it("dashboard: live counters from /metrics move as requests finish", async (t) => {
    const metrics = await fetch(`${server.url}/metrics`);
    await page.getByRole("link", { name: "Dashboard" }).click();
    // The page switches on the hashchange event, which follows the click asynchronously.
    await page.waitForFunction(() => document.title === "Dashboard · lmserve", undefined, { timeout: 5000 });
    assert.equal(await page.title(), "Dashboard · lmserve");
    if (metrics.status === 404) {
      await page.getByText("Metrics unavailable.").waitFor();
      t.skip("/metrics is not served yet: the dashboard shows 'metrics unavailable'");
      return;
    }
    const finished = page.locator(
      `[data-model="${TEST_MODEL}"] [data-metric="requests-finished"] .card-value`,
    );
    const generated = page.locator(
      `[data-model="${TEST_MODEL}"] [data-metric="generation-tokens"] .card-value`,
    );
    await finished.waitFor();
    const count = (text: string | null) => Number((text ?? "").replaceAll(",", ""));
    const before = {
      finished: count(await finished.textContent()),
      generated: count(await generated.textContent()),
    };
    await server.client.completions.create({ model: TEST_MODEL, prompt: "Once upon a time", max_tokens: 5 });
    await page.waitForFunction(
      ([selector, was]) => Number(document.querySelector(selector)?.textContent?.replaceAll(",", "")) > was,
      [
        `[data-model="${TEST_MODEL}"] [data-metric="requests-finished"] .card-value`,
        before.finished,
      ] as const,
    );
    assert.equal(count(await finished.textContent()), before.finished + 1);
    assert.equal(count(await generated.textContent()), before.generated + 5);
    assert.ok((await page.locator(`[data-model="${TEST_MODEL}"] figure.chart svg`).count()) >= 5);
    await page.getByRole("link", { name: "Playground" }).click();
  });

  it("made no request outside this server and raised no page error", () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(pageErrors, []);
  });
});

describe("web UI with --api-key --protect-metrics", { skip: chromiumPath ? false : SKIP_REASON }, () => {
  const KEY = "ui-test-key";
  let browser: Browser;

  before(() => ensureUiBuilt());
  after(async () => {
    await browser?.close();
  });
  const server = useTestServer(["--api-key", KEY, "--protect-metrics"]);
  before(async () => {
    browser = await launchChromium(chromiumPath!);
  });

  it("asks for the key on a 401, retries with it and keeps it in sessionStorage only", async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(60_000);
    const page401s: string[] = [];
    page.on("response", (response) => {
      if (response.status() === 401) page401s.push(new URL(response.url()).pathname);
    });
    const response = await page.goto(`${server.url}/`);
    assert.equal(response?.status(), 200, "the UI's own files need no key");
    const dialog = page.getByRole("dialog", { name: "API key required" });
    await dialog.waitFor();
    assert.deepEqual(page401s, ["/v1/models"]);

    // A wrong key is refused and asked for again.
    await dialog.getByLabel("API key").fill("wrong-key");
    await dialog.getByRole("button", { name: "Use key" }).click();
    await page.getByText("The server refused the key").waitFor();
    assert.deepEqual(page401s, ["/v1/models", "/v1/models"]);

    await page.getByRole("dialog", { name: "API key required" }).getByLabel("API key").fill(KEY);
    await page
      .getByRole("dialog", { name: "API key required" })
      .getByRole("button", { name: "Use key" })
      .click();
    await page.locator('select[name="model"] option[value="stories260K"]').waitFor({ state: "attached" });
    const storage = await page.evaluate(() => ({
      session: sessionStorage.getItem("lmserve.apiKey"),
      local: localStorage.length,
      cookie: document.cookie,
    }));
    assert.deepEqual(storage, { session: KEY, local: 0, cookie: "" });

    // Requests now carry the key: a chat goes through.
    await page.getByLabel("Max tokens", { exact: true }).fill("4");
    await page.getByLabel("Message", { exact: true }).fill("Hi");
    const [request] = await Promise.all([
      page.waitForRequest((r) => r.url().endsWith("/v1/chat/completions")),
      page.getByRole("button", { name: "Send" }).click(),
    ]);
    assert.equal(request.headers().authorization, `Bearer ${KEY}`);
    await page.locator('.message.assistant [data-stat="finish"]').waitFor();
    assert.equal(await page.locator('.message.assistant [data-stat="completion"]').textContent(), "4");

    // The dashboard sends it too (/metrics is protected here).
    assert.equal((await fetch(`${server.url}/metrics`)).status, 401);
    await page.getByRole("link", { name: "Dashboard" }).click();
    await page.locator(`[data-model="${TEST_MODEL}"] [data-metric="requests-finished"]`).waitFor();
    assert.equal(page401s.length, 2, "no 401 once the key is known");

    // "Forget API key" removes it from the tab.
    await page.getByRole("button", { name: "Forget API key" }).click();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("lmserve.apiKey")), null);
    await page.close();
  });
});

describe("web UI with --models-dir", { skip: chromiumPath ? false : SKIP_REASON }, () => {
  let dir: string;
  let browser: Browser;

  before(async () => {
    ensureUiBuilt();
    dir = await mkdtemp(join(tmpdir(), "lmserve-ui-models-"));
    await copyFile(defaultModelPath, join(dir, "tiny.gguf"));
  });
  const server = useTestServer(() => ["--models-dir", dir, "--idle-unload", "600"]);
  before(async () => {
    browser = await launchChromium(chromiumPath!);
  });
  after(async () => {
    await browser?.close();
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("the dashboard shows which models are loaded, their memory and expiry; the playground loads an unloaded one", async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(`${server.url}/`);
    const option = page.locator('select[name="model"] option[value="tiny"]');
    await option.waitFor({ state: "attached" });
    assert.equal(await option.textContent(), "tiny (unloaded: loads on first use)");

    await page.getByRole("link", { name: "Dashboard" }).click();
    const cell = (model: string, field: string) =>
      page.locator(`[data-model-row="${model}"] [data-field="${field}"]`);
    await cell("tiny", "state").filter({ hasText: "unloaded" }).waitFor();
    assert.equal(await cell(TEST_MODEL, "state").textContent(), "loaded");
    assert.match((await cell(TEST_MODEL, "memory").textContent()) ?? "", /^\d+(\.\d+)? (KiB|MiB|GiB)$/);
    assert.match((await cell(TEST_MODEL, "expires").textContent()) ?? "", /^in \d+ min \d+ s$/);
    assert.equal(await cell("tiny", "memory").textContent(), "–");

    await page.getByRole("link", { name: "Playground" }).click();
    await page.locator('select[name="model"]').selectOption("tiny");
    await page.getByLabel("Max tokens", { exact: true }).fill("4");
    await page.getByLabel("Message", { exact: true }).fill("Hi");
    const [request] = await Promise.all([
      page.waitForRequest((r) => r.url().endsWith("/v1/chat/completions")),
      page.getByRole("button", { name: "Send" }).click(),
    ]);
    assert.equal((request.postDataJSON() as { model: string }).model, "tiny");
    await page.locator('.message.assistant [data-stat="finish"]').waitFor();

    await page.getByRole("link", { name: "Dashboard" }).click();
    await cell("tiny", "state")
      .filter({ hasText: /^loaded$/ })
      .waitFor();
    assert.match((await cell("tiny", "memory").textContent()) ?? "", /^\d+(\.\d+)? (KiB|MiB|GiB)$/);
    await page.close();
  });
});

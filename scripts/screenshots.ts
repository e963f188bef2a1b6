// Takes the README's screenshots of the web UI (docs/screenshot-playground.png,
// docs/screenshot-dashboard.png) in headless Chromium against a real server on stories260K.
// Usage: npx tsx scripts/screenshots.ts   (needs /usr/bin/chromium; builds the UI when ui/dist is missing)
import { resolve } from "node:path";
import { projectRoot } from "../src/paths.ts";
import { ensureUiBuilt, findChromium, launchChromium } from "../test/helpers/browser.ts";
import { startTestServer, TEST_MODEL } from "../test/helpers/testServer.ts";

const chromiumPath = findChromium();
if (!chromiumPath) throw new Error("chromium is not installed (apt-get install chromium)");
ensureUiBuilt();
const server = await startTestServer(["--seed", "1", "--max-num-seqs", "4"]);
const browser = await launchChromium(chromiumPath);
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 940 }, colorScheme: "light" });
  page.setDefaultTimeout(60_000);
  await page.goto(`${server.url}/`);
  await page.locator(`select[name="model"] option[value="${TEST_MODEL}"]`).waitFor({ state: "attached" });

  // Playground: a two-turn chat, the second reply with logprobs and a token's alternatives shown.
  await page.getByLabel("System prompt").fill("You are a storyteller for small children.");
  await page.getByLabel("Max tokens", { exact: true }).fill("48");
  await page.getByLabel("Seed", { exact: true }).fill("4");
  const chat = async (text: string, replies: number) => {
    await page.getByLabel("Message", { exact: true }).fill(text);
    await page.getByRole("button", { name: "Send" }).click();
    await page
      .locator('.message.assistant [data-stat="finish"]')
      .nth(replies - 1)
      .waitFor();
  };
  await chat("Tell me a story about a cat.", 1);
  await page.getByLabel("Show logprobs").check();
  await chat("What did the cat do next?", 2);
  await page.locator(".message.assistant").last().locator(".tok").nth(5).hover();
  await page.screenshot({ path: resolve(projectRoot, "docs/screenshot-playground.png") });

  // Dashboard: 40 s of steady, overlapping load, captured while it runs.
  await page.getByRole("link", { name: "Dashboard" }).click();
  let load = true;
  const worker = async (index: number) => {
    for (let i = 0; load; i++) {
      await server.client.completions.create({
        model: TEST_MODEL,
        prompt: `Once upon a time ${index}`,
        max_tokens: 40 + ((i * 37 + index * 11) % 160),
        temperature: 0.9,
      });
    }
  };
  // More clients than slots (--max-num-seqs 4), so some requests wait.
  const workers = [0, 1, 2, 3, 4, 5].map(worker);
  await new Promise((done) => setTimeout(done, 40_000));
  await page.screenshot({ path: resolve(projectRoot, "docs/screenshot-dashboard.png"), fullPage: true });
  load = false;
  await Promise.all(workers);
  console.log("wrote docs/screenshot-playground.png and docs/screenshot-dashboard.png");
} finally {
  await browser.close();
  await server.stop();
}

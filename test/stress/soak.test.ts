/**
 * Soak (full form only, `npm run test:stress`): the server kept at saturation (every slot busy, the
 * queue full) for LMSERVE_SOAK_SECONDS (default 600). Passes when RSS grows less than 10% between the
 * end of the warm-up (a tenth of the run) and the end, no answer is a 5xx or malformed, and no slot is
 * left busy. Prints requests, p50/p99 latency and RSS.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { startTestServer, TEST_MODEL } from "../helpers/testServer.ts";
import { checkAnswer, leakedSlots, percentile, rssBytes } from "./reliabilityChecks.ts";

const SLOTS = 2;
const QUEUE = 4;
const MB = 1024 * 1024;

if (process.env.LMSERVE_STRESS !== "full") {
  describe.skip("soak: set LMSERVE_STRESS=full, or run npm run test:stress", () => {});
} else {
  const seconds = Number(process.env.LMSERVE_SOAK_SECONDS ?? "600");
  describe("soak at saturation", () => {
    it(`keeps RSS within 10% over ${seconds} s with every slot and queue place busy`, {
      timeout: (seconds + 120) * 1000,
    }, async (t) => {
      const server = await startTestServer([
        "--max-num-seqs",
        String(SLOTS),
        "--max-waiting",
        String(QUEUE),
        "--max-model-len",
        "512",
      ]);
      const pid = server.process.pid as number;
      const latencies: number[] = [];
      const byStatus: Record<number, number> = {};
      const problems: string[] = [];
      const started = performance.now();
      const deadline = started + seconds * 1000;
      let rssWarm = 0;
      let peakRss = 0;
      const sampler = setInterval(() => {
        const rss = rssBytes(pid);
        peakRss = Math.max(peakRss, rss);
        if (rssWarm === 0 && performance.now() - started >= seconds * 100) rssWarm = rss;
      }, 1000);
      const client = async (index: number) => {
        for (let request = 0; performance.now() < deadline; request++) {
          const stream = (index + request) % 2 === 0;
          const path = request % 3 === 0 ? "/v1/chat/completions" : "/v1/completions";
          const body =
            path === "/v1/completions"
              ? {
                  model: TEST_MODEL,
                  prompt: `Story ${request}: Once upon a time`,
                  max_tokens: 16 + (request % 48),
                  stream,
                }
              : {
                  model: TEST_MODEL,
                  messages: [{ role: "user", content: `Hello ${request}` }],
                  max_tokens: 32,
                  stream,
                };
          const sent = performance.now();
          const response = await fetch(`${server.url}${path}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(body),
          });
          const problem = await checkAnswer({ method: "POST", path }, response);
          byStatus[response.status] = (byStatus[response.status] ?? 0) + 1;
          if (response.status === 200) latencies.push(performance.now() - sent);
          if (problem || response.status >= 500) problems.push(`${response.status}: ${problem}`);
        }
      };
      await Promise.all(Array.from({ length: SLOTS + QUEUE }, (_, index) => client(index)));
      clearInterval(sampler);
      const leaked = await leakedSlots(server.url);
      const rssEnd = rssBytes(pid);
      const figures = {
        seconds,
        requests: Object.values(byStatus).reduce((a, b) => a + b, 0),
        byStatus,
        p50Ms: Math.round(percentile(latencies, 50)),
        p99Ms: Math.round(percentile(latencies, 99)),
        rssWarmMB: (rssWarm / MB).toFixed(1),
        rssEndMB: (rssEnd / MB).toFixed(1),
        rssPeakMB: (peakRss / MB).toFixed(1),
        rssGrowthPercent: (((rssEnd - rssWarm) / rssWarm) * 100).toFixed(2),
        leakedSlots: leaked,
      };
      t.diagnostic(`soak: ${JSON.stringify(figures)}`);
      process.stdout.write(`soak figures: ${JSON.stringify(figures)}\n`);
      assert.equal(await server.stop(), 0);
      assert.deepEqual(problems.slice(0, 20), []);
      assert.equal(leaked, 0);
      assert.ok(rssWarm > 0, "the run was too short to sample RSS after warm-up");
      assert.ok(rssEnd < rssWarm * 1.1, `RSS grew ${figures.rssGrowthPercent}%`);
    });
  });
}

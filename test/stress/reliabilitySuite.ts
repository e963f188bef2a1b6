/**
 * The reliability suite against one real server (`--api-key`, `--max-num-seqs 2 --max-waiting 4`):
 * fuzzing, API keys, client disconnects, overload. Sizes come from the caller: a short form runs in
 * `npm test` (`test/e2e/reliability.test.ts`), the full one in `npm run test:stress`
 * (`test/stress/reliability.test.ts`). Prints its figures as test diagnostics.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startTestServer, TEST_MODEL, type TestServer } from "../helpers/testServer.ts";
import { fuzzCases, seededRandom } from "./fuzzCases.ts";
import {
  leakedSlots,
  percentile,
  RAW_HTTP_CASES,
  rssBytes,
  runDisconnects,
  runFuzz,
  runMidStreamAborts,
  runOverload,
  runRawHttpCases,
  serverAborts,
  wrongAuthorizations,
} from "./reliabilityChecks.ts";

/** How much the suite does. */
export type SuiteSize = {
  /** Label of the form (`short`, `full`). */
  form: string;
  /** Fuzz cases (at least 5,000 in the full form). */
  fuzz: number;
  /** Streams dropped at random points. */
  disconnects: number;
  /** Overload bursts of 10x (slots + queue) requests. */
  overloadBursts: number;
  seed: number;
};

const KEY = "reliability-key";
const SLOTS = 2;
const QUEUE = 4;
const MB = 1024 * 1024;

/** Defines the suite (a `describe` block) with the given sizes. */
export function reliabilitySuite(size: SuiteSize): void {
  describe(`reliability (${size.form} form)`, () => {
    let server: TestServer;
    const auth = { authorization: `Bearer ${KEY}` };
    const figures: Record<string, unknown> = {};
    let rssBefore = 0;

    before(async () => {
      server = await startTestServer([
        "--api-key",
        KEY,
        "--max-num-seqs",
        String(SLOTS),
        "--max-waiting",
        String(QUEUE),
        "--max-model-len",
        "512",
      ]);
      rssBefore = rssBytes(server.process.pid as number);
    });

    after(async () => {
      const alive = server.process.exitCode === null;
      figures.rssBeforeMB = (rssBefore / MB).toFixed(1);
      if (alive) figures.rssAfterMB = (rssBytes(server.process.pid as number) / MB).toFixed(1);
      figures.crashes = alive ? 0 : 1;
      const code = await server.stop();
      process.stdout.write(`reliability figures (${size.form}): ${JSON.stringify(figures)}\n`);
      assert.equal(code, 0, "the server exits 0 on SIGTERM");
    });

    it(`fuzz: ${size.fuzz} bad or edge requests get a 4xx error body or a valid response, never a 5xx`, async (t) => {
      const cases = fuzzCases(size.seed, size.fuzz, { model: TEST_MODEL, apiKey: KEY });
      const stats = await runFuzz(server.url, cases, QUEUE);
      figures.fuzzTried = stats.tried;
      figures.fuzzByStatus = stats.byStatus;
      figures.fuzz5xx = stats.serverErrors.length;
      figures.fuzzMalformed = stats.malformed.length;
      t.diagnostic(`fuzz: ${stats.tried} tried, by status ${JSON.stringify(stats.byStatus)}`);
      assert.equal(server.process.exitCode, null, "the server crashed");
      assert.deepEqual(stats.serverErrors.slice(0, 20), [], "5xx answers");
      assert.deepEqual(
        stats.malformed.slice(0, 20),
        [],
        "answers that are neither an error body nor a valid response",
      );
      assert.ok(
        Object.keys(stats.byStatus).some((status) => status === "200"),
        "some edge requests are valid",
      );
      assert.equal(await leakedSlots(server.url, auth), 0, "slots left busy after the fuzz");
    });

    it("raw HTTP a client library would not send gets a 4xx error body too", async () => {
      const problems = await runRawHttpCases(server.url);
      figures.rawHttpCases = RAW_HTTP_CASES.length;
      assert.deepEqual(problems, []);
      assert.equal(server.process.exitCode, null);
    });

    it("keys: every /v1/* route refuses a missing or wrong key", async () => {
      const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
        paths: Record<string, Record<string, { security?: unknown[] }>>;
      };
      let refused = 0;
      for (const [path, operations] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          if (!path.startsWith("/v1/") || (operation.security ?? []).length === 0) continue;
          for (const authorization of wrongAuthorizations(KEY)) {
            const response = await fetch(`${server.url}${path.replace("{model}", TEST_MODEL)}`, {
              method: method.toUpperCase(),
              headers: {
                "content-type": "application/json",
                ...(authorization !== undefined ? { authorization } : {}),
              },
              ...(method === "post"
                ? { body: JSON.stringify({ model: TEST_MODEL, prompt: "x", max_tokens: 1 }) }
                : {}),
            });
            await response.arrayBuffer();
            assert.equal(
              response.status,
              401,
              `${method} ${path} with ${String(authorization).slice(0, 40)}`,
            );
            refused++;
          }
        }
      }
      figures.keysRefused = refused;
      assert.ok(refused >= 5 * wrongAuthorizations(KEY).length);
    });

    it(`disconnects: ${size.disconnects} requests dropped at random points leave every slot free`, async (t) => {
      const pid = server.process.pid as number;
      const rssStart = rssBytes(pid);
      const abortsBefore = await serverAborts(server.url, auth);
      const stats = await runDisconnects(
        server.url,
        auth,
        TEST_MODEL,
        size.disconnects,
        seededRandom(size.seed + 1),
      );
      const leaked = await leakedSlots(server.url, auth);
      // Issue 4's target (RSS within 5% of before) is a measurement, reported here, not asserted.
      const rssEnd = rssBytes(pid);
      figures.disconnectRssMB = {
        before: (rssStart / MB).toFixed(1),
        after: (rssEnd / MB).toFixed(1),
        changePercent: (((rssEnd - rssStart) / rssStart) * 100).toFixed(1),
      };
      figures.disconnects = {
        ...stats,
        abortedOnServer: (await serverAborts(server.url, auth)) - abortsBefore,
      };
      figures.leakedSlots = leaked;
      t.diagnostic(
        `disconnects: ${JSON.stringify(figures.disconnects)}, leaked slots ${leaked}, RSS ${JSON.stringify(figures.disconnectRssMB)}`,
      );
      assert.equal(leaked, 0, "requests still running or waiting after every client left");
      // Every slot takes a request again.
      const results = await Promise.all(
        Array.from({ length: SLOTS }, () =>
          fetch(`${server.url}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json", ...auth },
            body: JSON.stringify({ model: TEST_MODEL, prompt: "Once", max_tokens: 4 }),
          }).then((response) => response.status),
        ),
      );
      assert.deepEqual(results, Array(SLOTS).fill(200));
      assert.doesNotMatch(server.stderr(), /unhandled|uncaught/i);
    });

    it(`aborts: ${size.disconnects} streams dropped after their first chunk leave every slot free`, async (t) => {
      const pid = server.process.pid as number;
      const rssStart = rssBytes(pid);
      const abortsBefore = await serverAborts(server.url, auth);
      const stats = await runMidStreamAborts(server.url, auth, TEST_MODEL, size.disconnects, SLOTS);
      const leaked = await leakedSlots(server.url, auth);
      const rssEnd = rssBytes(pid);
      // Issue 4's target (every slot free, RSS within 5% of before) is a measurement, reported here.
      figures.midStreamAborts = {
        ...stats,
        abortedOnServer: (await serverAborts(server.url, auth)) - abortsBefore,
        leakedSlots: leaked,
        rssBeforeMB: (rssStart / MB).toFixed(1),
        rssAfterMB: (rssEnd / MB).toFixed(1),
        rssChangePercent: (((rssEnd - rssStart) / rssStart) * 100).toFixed(1),
      };
      t.diagnostic(`mid-stream aborts: ${JSON.stringify(figures.midStreamAborts)}`);
      assert.equal(leaked, 0, "requests still running or waiting after every client left");
      assert.equal(stats.refused, 0);
      assert.equal(stats.abortedMidStream + stats.completed, size.disconnects);
    });

    it("overload: 10x more concurrent requests than slots + queue: the excess gets 503 first, the rest complete", async (t) => {
      const count = 10 * (SLOTS + QUEUE);
      for (let burst = 0; burst < size.overloadBursts; burst++) {
        const rssStart = rssBytes(server.process.pid as number);
        const stats = await runOverload(server.url, auth, TEST_MODEL, count);
        const rssEnd = rssBytes(server.process.pid as number);
        const refused = stats.latencyMs[503] ?? [];
        const served = stats.latencyMs[200] ?? [];
        figures[`overload${burst}`] = {
          byStatus: stats.byStatus,
          p50RefusedMs: Math.round(percentile(refused, 50)),
          p50ServedMs: Math.round(percentile(served, 50)),
          rssGrowthMB: ((rssEnd - rssStart) / MB).toFixed(1),
        };
        t.diagnostic(`overload burst ${burst}: ${JSON.stringify(figures[`overload${burst}`])}`);
        assert.deepEqual(stats.problems, []);
        assert.deepEqual(
          Object.keys(stats.byStatus).filter((status) => !["200", "429", "503"].includes(status)),
          [],
        );
        assert.ok(served.length >= SLOTS + QUEUE, `only ${served.length} served`);
        assert.ok(refused.length > 0, "nothing was refused");
        assert.ok(
          percentile(refused, 50) < percentile(served, 50),
          "refusals are answered before the served requests finish",
        );
        assert.ok(rssEnd - rssStart < 100 * MB, `RSS grew by ${(rssEnd - rssStart) / MB} MB in one burst`);
      }
      assert.equal(await leakedSlots(server.url, auth), 0);
    });

    it("the process never crashed and logged no unhandled rejection", () => {
      assert.equal(server.process.exitCode, null);
      assert.doesNotMatch(server.stderr(), /unhandled|uncaught|RangeError|TypeError/i);
    });
  });
}

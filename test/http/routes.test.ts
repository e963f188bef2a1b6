/**
 * Every route the app registers (with metrics and the web UI on) is requested by an in-process test:
 * its path appears as a string in a file of the HTTP tier (`test/http/`, or `test/unit/server/` for the
 * app-level ones such as `/docs`). A route added without an in-process test fails here; the recipe
 * "an endpoint" in CONTRIBUTING.md says where its test goes.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { projectRoot } from "../../src/paths.ts";
import { buildApp } from "../../src/server/app.ts";
import { ServerMetrics } from "../../src/server/metrics.ts";
import { registeredRoutes } from "../../src/server/openapi.ts";
import { fakeContext } from "../helpers/fakeEngine.ts";

/** The text of the in-process test files. */
function inProcessTests(): string {
  return ["test/http", "test/unit/server"]
    .flatMap((folder) =>
      readdirSync(join(projectRoot, folder))
        .filter((name) => name.endsWith(".test.ts") && name !== "routes.test.ts")
        .map((name) => readFileSync(join(projectRoot, folder, name), "utf8")),
    )
    .join("\n");
}

/** A string literal of the route's path: exact, or for `/prefix/*` the prefix and more. */
function pathLiteral(pattern: string): RegExp {
  const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  return pattern.endsWith("*")
    ? new RegExp(`["'\`]${literal(pattern.slice(0, -1))}[^"'\`\\s]+`)
    : new RegExp(`["'\`]${literal(pattern)}["'\`?]`);
}

describe("the HTTP tier covers every route", () => {
  it("requests each registered route in an in-process test", async () => {
    const context = fakeContext();
    context.metrics = new ServerMetrics();
    const app = buildApp(context, { logger: false, ui: { distDir: join(projectRoot, "ui/dist") } });
    try {
      await app.ready();
      const routes = registeredRoutes(app);
      assert.ok(routes.length > 20, routes.join(", "));
      const tests = inProcessTests();
      const untested = routes.filter((route) => !pathLiteral(route.split(" ")[1] as string).test(tests));
      assert.deepEqual(untested, []);
    } finally {
      await app.close();
    }
  });
});

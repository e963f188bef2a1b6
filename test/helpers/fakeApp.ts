/**
 * The in-process app of the HTTP tier (`test/http`): `buildApp` over fake engines
 * (`test/helpers/fakeEngine.ts`), driven by Fastify's `inject` (no port, no process, no model), and the
 * SSE events of an injected stream read by the web UI's parser (`ui/src/sse.ts`).
 */
import { after, before } from "node:test";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { buildApp } from "../../src/server/app.ts";
import type { AppContext } from "../../src/server/appContext.ts";
import { type SseEvent, sseEvents } from "../../ui/src/sse.ts";
import { FakeEngine, type FakeEngineOptions, fakeContext } from "./fakeEngine.ts";

/** The app of {@link useFakeApp}, with shortcuts to inject requests into it. */
export type FakeApp = {
  /** The app (after the suite's `before`). */
  readonly app: FastifyInstance;
  /** The first fake engine served (its `submitted` requests are what serving built). */
  readonly engine: FakeEngine;
  /** The app's context (its registry holds the fake engines). */
  readonly context: AppContext;
  /** POSTs `payload` as JSON to `url`. */
  post(url: string, payload: object, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  /** GETs `url`. */
  get(url: string, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
};

/** Options of {@link useFakeApp}. */
export type FakeAppOptions = {
  /** The fake engines served, in order. Defaults to one `new FakeEngine()`. */
  engines?: readonly FakeEngine[];
  /** Changes the context before the app is built (e.g. sets `metrics` or `isReady`). */
  configure?: (context: AppContext) => void;
};

/**
 * Builds the app over fake engines in the calling suite's `before` and closes it in its `after`:
 * call it at the top of a `describe` and use the returned object in the tests.
 */
export function useFakeApp(options: FakeAppOptions = {}): FakeApp {
  let built: { app: FastifyInstance; context: AppContext; engine: FakeEngine } | undefined;
  const current = () => {
    if (!built) throw new Error("useFakeApp: the app is built in before(); use it inside a test");
    return built;
  };
  before(async () => {
    const engines = options.engines ?? [new FakeEngine()];
    const context = fakeContext(...engines);
    options.configure?.(context);
    const app = buildApp(context, { logger: false });
    await app.ready();
    built = { app, context, engine: engines[0] as FakeEngine };
  });
  after(() => built?.app.close());
  return {
    get app() {
      return current().app;
    },
    get engine() {
      return current().engine;
    },
    get context() {
      return current().context;
    },
    post: (url, payload, headers = {}) => current().app.inject({ method: "POST", url, payload, headers }),
    get: (url, headers = {}) => current().app.inject({ method: "GET", url, headers }),
  };
}

/**
 * Runs `run` on an app built over `context` (or over one fake engine scripted by the options), then
 * closes it: for a test that needs an app of its own (a failing engine, a full queue, another template).
 */
export async function withFakeApp<T>(
  context: AppContext | FakeEngineOptions,
  run: (app: FastifyInstance) => Promise<T>,
): Promise<T> {
  const own = "registry" in context ? context : fakeContext(new FakeEngine(context));
  const app = buildApp(own, { logger: false });
  try {
    return await run(app);
  } finally {
    await app.close();
  }
}

/** The SSE events of a body delivered in `chunks` (the bytes split anywhere), read by the web UI's parser. */
export async function sseEventsOf(chunks: readonly Uint8Array[]): Promise<SseEvent[]> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  const events: SseEvent[] = [];
  for await (const event of sseEvents(body)) events.push(event);
  return events;
}

/** The SSE events of an injected stream response, whole. */
export function injectedEvents(response: LightMyRequestResponse): Promise<SseEvent[]> {
  return sseEventsOf([response.rawPayload]);
}

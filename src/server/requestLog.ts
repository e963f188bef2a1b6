/**
 * One structured (pino JSON) log line per request, when its response ends or its connection closes:
 * request id, method, route, status, latency, model and token counts. Prompts and outputs are logged
 * only with `--log-requests`.
 *
 * Token counts come from the response itself: the `usage` of a JSON response body, or of a stream's
 * usage chunk (`streamReply.ts` passes every chunk to {@link observeStreamChunk}). Code that knows a
 * request's usage otherwise reports it with {@link setRequestUsage}; the serving layer can do so for a
 * stream sent without `stream_options.include_usage` through its sink's `reportUsage`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

/** Token counts of one request, as OpenAI's `usage`. */
export type RequestUsage = { prompt_tokens: number; completion_tokens: number };

type RequestRecord = {
  started: bigint;
  usage?: RequestUsage;
  /** Output text per choice index, kept only with `--log-requests`. */
  output?: string[];
};

const records = new WeakMap<FastifyRequest, RequestRecord>();

/** Routes probed every few seconds: their lines go to debug, not info. */
const QUIET_ROUTES = new Set(["/health", "/v1/health/live", "/v1/health/ready", "/metrics"]);

/** Records the token counts of a request for its log line (the last report wins). */
export function setRequestUsage(request: FastifyRequest, usage: RequestUsage): void {
  const record = records.get(request);
  if (record) record.usage = usage;
}

/**
 * Looks at one SSE chunk of a streamed response: keeps its `usage` and, with `--log-requests`, its
 * text (`choices[].text` or `choices[].delta.content`).
 */
export function observeStreamChunk(request: FastifyRequest, payload: unknown): void {
  const record = records.get(request);
  if (!record || typeof payload !== "object" || payload === null) return;
  const chunk = payload as { usage?: unknown; choices?: unknown };
  if (isUsage(chunk.usage)) record.usage = chunk.usage;
  if (record.output && Array.isArray(chunk.choices)) {
    for (const choice of chunk.choices as {
      index?: unknown;
      text?: unknown;
      delta?: { content?: unknown };
    }[]) {
      const text = typeof choice.text === "string" ? choice.text : choice.delta?.content;
      if (typeof text === "string" && typeof choice.index === "number") {
        record.output[choice.index] = (record.output[choice.index] ?? "") + text;
      }
    }
  }
}

/**
 * Adds the request log: replaces Fastify's own two lines per request (its `disableRequestLogging`
 * must be set) with one line at the end.
 * @param logRequests also log request bodies and outputs (`--log-requests`).
 */
export function registerRequestLog(app: FastifyInstance, options: { logRequests: boolean }): void {
  app.addHook("onRequest", async (request, reply) => {
    const record: RequestRecord = {
      started: process.hrtime.bigint(),
      ...(options.logRequests ? { output: [] } : {}),
    };
    records.set(request, record);
    reply.raw.once("close", () => logLine(request, reply, record));
  });
  app.addHook("onSend", async (request, reply, payload) => {
    const record = records.get(request);
    if (!record || typeof payload !== "string" || payload.length > 1_000_000) return payload;
    if (!String(reply.getHeader("content-type") ?? "").includes("json") || !payload.includes('"usage"')) {
      return payload;
    }
    try {
      const body = JSON.parse(payload) as { usage?: unknown; choices?: unknown };
      if (isUsage(body.usage)) record.usage = body.usage;
      if (record.output && Array.isArray(body.choices)) {
        record.output = (body.choices as { text?: unknown; message?: { content?: unknown } }[]).map(
          (choice) => String(choice.text ?? choice.message?.content ?? ""),
        );
      }
    } catch {
      // not JSON after all: nothing to record
    }
    return payload;
  });
}

function logLine(request: FastifyRequest, reply: FastifyReply, record: RequestRecord): void {
  const route = request.routeOptions.url;
  const body = request.body as { model?: unknown } | undefined;
  const line: Record<string, unknown> = {
    method: request.method,
    route: route ?? null,
    status: reply.raw.statusCode,
    latencyMs: Number(process.hrtime.bigint() - record.started) / 1e6,
    ...(typeof body?.model === "string" ? { model: body.model } : {}),
    ...(record.usage
      ? { promptTokens: record.usage.prompt_tokens, completionTokens: record.usage.completion_tokens }
      : {}),
    ...(reply.raw.writableFinished ? {} : { aborted: true }),
  };
  if (record.output) {
    line.request = request.body ?? null;
    line.output = record.output ?? null;
  }
  if (route !== undefined && QUIET_ROUTES.has(route)) request.log.debug(line, "request completed");
  else request.log.info(line, "request completed");
}

function isUsage(value: unknown): value is RequestUsage {
  const usage = value as RequestUsage | null | undefined;
  return (
    typeof usage === "object" &&
    usage !== null &&
    typeof usage.prompt_tokens === "number" &&
    typeof usage.completion_tokens === "number"
  );
}

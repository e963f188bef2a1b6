/**
 * `--log-format pretty`: pino's JSON lines rewritten as one human-readable line each, for a person
 * watching a terminal (`HH:MM:SS LEVEL message key=value …`). The startup lines read as sentences:
 * "listening on http://127.0.0.1:8000 (UI at /)", "model loaded: stories260K (2048-token context, …)".
 * JSON stays the default when stdout is not a terminal (log collectors parse it).
 */

/** How log lines are written: pino's JSON lines, or one readable line each. */
export type LogFormat = "json" | "pretty";

/**
 * The log format to use: the one asked for (`--log-format`), else pretty when `isTTY`, else JSON.
 * Defaults to pretty on a terminal, JSON elsewhere.
 */
export function chooseLogFormat(asked: LogFormat | undefined, isTTY: boolean | undefined): LogFormat {
  return asked ?? (isTTY === true ? "pretty" : "json");
}

const LEVEL_NAMES: Record<number, string> = {
  10: "TRACE",
  20: "DEBUG",
  30: "INFO",
  40: "WARN",
  50: "ERROR",
  60: "FATAL",
};

/** Fields every line carries that a person does not need to read. */
const HIDDEN = new Set(["level", "time", "pid", "hostname", "service", "msg"]);

/**
 * Formats one pino JSON line (without its newline) as a readable line. A line that is not a JSON
 * object is returned as it is.
 * @param line pino's output line.
 * @returns `HH:MM:SS LEVEL message key=value …` (UTC time).
 */
export function formatLogLine(line: string): string {
  let record: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return line;
    record = parsed as Record<string, unknown>;
  } catch {
    return line;
  }
  const time =
    typeof record.time === "number" ? new Date(record.time).toISOString().slice(11, 19) : "--:--:--";
  const level = (LEVEL_NAMES[record.level as number] ?? String(record.level)).padEnd(5);
  const { text, shown } = describe(record);
  const rest = Object.entries(record)
    .filter(([key, value]) => !HIDDEN.has(key) && !shown.has(key) && value !== undefined)
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`);
  return [time, level, text, ...rest].join(" ");
}

/** The sentence for a known message, and the fields it already shows. */
function describe(record: Record<string, unknown>): { text: string; shown: Set<string> } {
  const msg = String(record.msg ?? "");
  if (msg === "listening" && typeof record.url === "string") {
    const cap =
      typeof record.defaultMaxTokens === "number"
        ? `; replies without max_tokens stop at ${record.defaultMaxTokens} tokens (--max-tokens-cap to change)`
        : "";
    return {
      text: `listening on ${record.url} (API at ${record.url}/v1${record.ui !== undefined ? ", UI at /" : ""})${cap}`,
      shown: new Set(["url", "api", "ui", "defaultMaxTokens"]),
    };
  }
  if (msg === "model loaded" && typeof record.model === "string") {
    const parts = [
      `${record.contextSize}-token context`,
      `${record.slots} slots`,
      `${record.backend}${record.backend !== "CPU" ? ` ${record.offloadedLayers} layers` : ""}`,
      ...(typeof record.gpu === "string" ? [`GPU: ${record.gpu}`] : []),
    ];
    return {
      text: `model loaded: ${record.model} (${parts.join(", ")}) from ${record.path}`,
      shown: new Set([
        "model",
        "contextSize",
        "slots",
        "backend",
        "offloadedLayers",
        "gpu",
        "path",
        "source",
      ]),
    };
  }
  return { text: msg, shown: new Set() };
}

/**
 * pino `hooks` that drop Fastify's own "Server listening at URL" line: the server logs one `listening`
 * record of its own with the URL, the UI and the output cap, so the fact is said once.
 */
export const LOG_HOOKS = {
  logMethod(this: unknown, args: unknown[], method: (...args: unknown[]) => void): void {
    if (typeof args[0] === "string" && args[0].startsWith("Server listening at ")) return;
    method.apply(this, args);
  },
};

/**
 * A pino destination that writes each line through {@link formatLogLine} to `out`.
 * @param out Where the readable lines go; usually `process.stdout`.
 */
export function prettyLogStream(out: { write(text: string): unknown }): { write(chunk: string): void } {
  return {
    write(chunk: string) {
      for (const line of chunk.split("\n")) if (line !== "") out.write(`${formatLogLine(line)}\n`);
    },
  };
}

/**
 * Test helper for guided decoding over HTTP (`test/e2e/guidedDecoding.test.ts`): output checks (ajv,
 * full-match regex, JSON object, whitespace runs) and a small client that sends the same request to
 * `/v1/completions` or `/v1/chat/completions`, streamed or not, and reads back each choice's text and
 * `finish_reason`.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../src/paths.ts";
import { ajvValidator } from "./structuredAjv.ts";
import { readSse, TEST_MODEL, type TestServer } from "./testServer.ts";

/** The two generation endpoints. */
export type Endpoint = "completions" | "chat";
/** Both endpoints, completions first. */
export const ENDPOINTS: readonly Endpoint[] = ["completions", "chat"];
/** One choice of a response: its index, full text and `finish_reason`. */
export type Choice = { index: number; text: string; finish: string };
/** Whether an output satisfies its constraint. */
export type Check = (text: string) => boolean;
/** A JSON request body (or part of one). */
export type Body = Record<string, unknown>;

/** The text of a file under `test/fixtures/`. */
export const fixture = (path: string): string =>
  readFileSync(join(projectRoot, "test/fixtures", path), "utf8");

/** The schema of `test/fixtures/schemas/NAME.json`. */
export const schemaFixture = (name: string): Record<string, unknown> =>
  (JSON.parse(fixture(`schemas/${name}.json`)) as { schema: Record<string, unknown> }).schema;

/** Parses the text as JSON and validates it with ajv. */
export function jsonCheck(schema: unknown): Check {
  const validate = ajvValidator(schema);
  return (text) => {
    try {
      return validate(JSON.parse(text)) === true;
    } catch {
      return false;
    }
  };
}

/** The whole text matches the (ECMA-262) pattern. */
export function fullMatch(pattern: string): Check {
  const re = new RegExp(`^(?:${pattern})$`);
  return (text) => re.test(text);
}

/** The text is a JSON object. */
export const isObject: Check = (text) => {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
};

/** The whitespace runs of JSON text outside its strings (the text may be cut short). */
export function whitespaceRuns(text: string): string[] {
  const runs: string[] = [];
  let inString = false;
  let run = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (/[ \t\n\r]/.test(c)) {
      run += c;
      continue;
    }
    if (run) runs.push(run);
    run = "";
    if (c === '"') inString = true;
  }
  if (run) runs.push(run);
  return runs;
}

/** Asserts that every choice that finished with `stop` passes `check`; returns how many did. */
export function assertStoppedValid(label: string, choices: Choice[], check: Check): number {
  const stopped = choices.filter((choice) => choice.finish === "stop");
  for (const choice of stopped) assert.ok(check(choice.text), `${label}: ${JSON.stringify(choice.text)}`);
  return stopped.length;
}

/** Sends generation requests to a test server with a fixed prompt ("Once upon a time"). */
export class GuidedClient {
  readonly prompt = "Once upon a time";

  constructor(private readonly server: TestServer) {}

  /** The full body for `endpoint`: model, prompt or one user message, `max_tokens` 200, then `body`. */
  request(endpoint: Endpoint, body: Body): Body {
    return {
      model: TEST_MODEL,
      ...(endpoint === "chat"
        ? { messages: [{ role: "user", content: this.prompt }] }
        : { prompt: this.prompt }),
      max_tokens: 200,
      ...body,
    };
  }

  /** POSTs and returns the status and the JSON body. */
  async post(endpoint: Endpoint, body: Body): Promise<{ status: number; json: Body & { message?: string } }> {
    const response = await this.server.post(path(endpoint), this.request(endpoint, body));
    return { status: response.status, json: (await response.json()) as Body & { message?: string } };
  }

  /** The choices of a request that must succeed (non-streamed). */
  async generate(endpoint: Endpoint, body: Body): Promise<Choice[]> {
    const { status, json } = await this.post(endpoint, body);
    assert.equal(status, 200, json.message);
    return (json.choices as Body[]).map((choice) => ({
      index: choice.index as number,
      text: endpoint === "chat" ? ((choice.message as Body).content as string) : (choice.text as string),
      finish: choice.finish_reason as string,
    }));
  }

  /** The choices of the same request streamed, each choice's deltas concatenated; no error event allowed. */
  async stream(endpoint: Endpoint, body: Body): Promise<Choice[]> {
    const response = await this.server.post(
      path(endpoint),
      this.request(endpoint, { ...body, stream: true }),
    );
    assert.equal(response.status, 200);
    const choices: Choice[] = [];
    for (const event of await readSse(response)) {
      if (event === "[DONE]") continue;
      assert.ok(!(event as Body).error, JSON.stringify(event));
      for (const part of (event as { choices: Body[] }).choices) {
        const index = part.index as number;
        const choice = choices[index] ?? { index, text: "", finish: "" };
        choices[index] = choice;
        const delta = endpoint === "chat" ? (part.delta as Body).content : part.text;
        choice.text += (delta as string | undefined) ?? "";
        if (part.finish_reason) choice.finish = part.finish_reason as string;
      }
    }
    return choices;
  }

  /** Asserts a 400 whose `param` is `param` and whose message matches `message`; returns the message. */
  async refused(endpoint: Endpoint, body: Body, param: string, message?: RegExp): Promise<string> {
    const { status, json } = await this.post(endpoint, body);
    assert.equal(status, 400, `${JSON.stringify(body).slice(0, 200)}: ${json.message}`);
    assert.equal((json.error as Body).param, param, json.message);
    if (message) assert.match(json.message ?? "", message);
    return json.message ?? "";
  }
}

function path(endpoint: Endpoint): string {
  return endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions";
}

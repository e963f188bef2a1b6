import type { ApiRequest } from "./request.ts";

/** The languages the "copy as code" panel offers. */
export const SNIPPET_KINDS = {
  curl: "curl",
  python: "OpenAI Python",
  node: "OpenAI Node",
  aisdk: "AI SDK",
} as const;

/** One of {@link SNIPPET_KINDS}. */
export type SnippetKind = keyof typeof SNIPPET_KINDS;

/** Where the request goes and whether it needs the API key (then read from `$LMSERVE_API_KEY`). */
export type SnippetTarget = { origin: string; withKey: boolean };

/** Source code that sends `request` to this server, in the chosen language. */
export function codeSnippet(kind: SnippetKind, request: ApiRequest, target: SnippetTarget): string {
  switch (kind) {
    case "curl":
      return curlSnippet(request, target);
    case "python":
      return pythonSnippet(request, target);
    case "node":
      return nodeSnippet(request, target);
    case "aisdk":
      return aiSdkSnippet(request, target);
  }
}

function curlSnippet(request: ApiRequest, target: SnippetTarget): string {
  const body = JSON.stringify(request.body, null, 2).replaceAll("'", "'\\''");
  return [
    `curl -N ${target.origin}/${request.path} \\`,
    `  -H "Content-Type: application/json" \\`,
    ...(target.withKey ? [`  -H "Authorization: Bearer $LMSERVE_API_KEY" \\`] : []),
    `  -d '${body}'`,
  ].join("\n");
}

/** Parameters the official SDKs accept by name; anything else goes through `extra_body`. */
const SDK_PARAMS = new Set([
  "model",
  "messages",
  "prompt",
  "max_tokens",
  "temperature",
  "top_p",
  "seed",
  "stop",
  "logprobs",
  "top_logprobs",
  "response_format",
  "stream",
  "stream_options",
]);

function pythonSnippet(request: ApiRequest, target: SnippetTarget): string {
  const known = Object.entries(request.body).filter(([name]) => SDK_PARAMS.has(name));
  const extra = Object.fromEntries(Object.entries(request.body).filter(([name]) => !SDK_PARAMS.has(name)));
  const args = known.map(([name, value]) => `    ${name}=${python(value, "    ")},`);
  if (Object.keys(extra).length > 0) args.push(`    extra_body=${python(extra, "    ")},`);
  const chat = request.path === "v1/chat/completions";
  return [
    "import os",
    "from openai import OpenAI",
    "",
    `client = OpenAI(base_url="${target.origin}/v1", api_key=os.environ.get("LMSERVE_API_KEY", "none"))`,
    `stream = client.${chat ? "chat.completions" : "completions"}.create(`,
    ...args,
    ")",
    "for chunk in stream:",
    chat
      ? '    if chunk.choices and chunk.choices[0].delta.content:\n        print(chunk.choices[0].delta.content, end="", flush=True)'
      : '    if chunk.choices:\n        print(chunk.choices[0].text, end="", flush=True)',
    "    if chunk.usage:",
    '        print("\\n", chunk.usage)',
  ].join("\n");
}

/** A Python literal for a JSON value (True/False/None; JSON string escapes are valid Python). */
function python(value: unknown, indent: string): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number" || typeof value === "string") return JSON.stringify(value);
  const inner = `${indent}    `;
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return `[\n${value.map((item) => `${inner}${python(item, inner)},`).join("\n")}\n${indent}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return "{}";
  return `{\n${entries.map(([key, item]) => `${inner}${JSON.stringify(key)}: ${python(item, inner)},`).join("\n")}\n${indent}}`;
}

function nodeSnippet(request: ApiRequest, target: SnippetTarget): string {
  const chat = request.path === "v1/chat/completions";
  return [
    'import OpenAI from "openai";',
    "",
    `const client = new OpenAI({ baseURL: "${target.origin}/v1", apiKey: process.env.LMSERVE_API_KEY ?? "none" });`,
    "// Fields the SDK does not know (top_k, min_p, guided_*) are sent as they are.",
    `const stream = await client.${chat ? "chat.completions" : "completions"}.create(${JSON.stringify(request.body, null, 2)});`,
    "for await (const chunk of stream) {",
    chat
      ? '  process.stdout.write(chunk.choices[0]?.delta?.content ?? "");'
      : '  process.stdout.write(chunk.choices[0]?.text ?? "");',
    '  if (chunk.usage) console.log("\\n", chunk.usage);',
    "}",
  ].join("\n");
}

/** AI SDK options with their own names; the rest goes through `providerOptions.lmserve`. */
const AI_SDK_OPTIONS: Record<string, string> = {
  max_tokens: "maxOutputTokens",
  temperature: "temperature",
  top_p: "topP",
  seed: "seed",
  stop: "stopSequences",
};

function aiSdkSnippet(request: ApiRequest, target: SnippetTarget): string {
  const chat = request.path === "v1/chat/completions";
  const options: string[] = [];
  const provider: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(request.body)) {
    if (["model", "stream", "stream_options"].includes(name)) continue;
    if (name === "messages" || name === "prompt") options.push(`  ${name}: ${indentJson(value)},`);
    else if (AI_SDK_OPTIONS[name]) options.push(`  ${AI_SDK_OPTIONS[name]}: ${indentJson(value)},`);
    else provider[name] = value;
  }
  if (Object.keys(provider).length > 0)
    options.push(`  providerOptions: { lmserve: ${indentJson(provider)} },`);
  return [
    ...(chat
      ? []
      : [
          '// Note: the AI SDK sends a completion prompt as "user:\\n<prompt>\\n\\nassistant:"; for the raw',
          "// prompt as typed, use the curl or OpenAI SDK code.",
        ]),
    'import { createOpenAICompatible } from "@ai-sdk/openai-compatible";',
    'import { streamText } from "ai";',
    "",
    "const lmserve = createOpenAICompatible({",
    '  name: "lmserve",',
    `  baseURL: "${target.origin}/v1",`,
    "  includeUsage: true,",
    ...(target.withKey ? ["  apiKey: process.env.LMSERVE_API_KEY,"] : []),
    "});",
    "const result = streamText({",
    `  model: lmserve.${chat ? "chatModel" : "completionModel"}(${JSON.stringify(request.body.model)}),`,
    ...options,
    "});",
    "for await (const text of result.textStream) process.stdout.write(text);",
    "console.log(await result.usage);",
  ].join("\n");
}

function indentJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replaceAll("\n", "\n  ");
}

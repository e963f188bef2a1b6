import type OpenAI from "openai";
import type { TestServer } from "./testServer.ts";

/**
 * The `get_forecast` tool's parameters the tool-call e2e tests share: a city of at most 6 characters
 * and 1..9 days, both required, nothing else (small enough for a random-weight model to fill under a
 * grammar).
 */
export const FORECAST_PARAMETERS = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 6 },
    days: { type: "integer", minimum: 1, maximum: 9 },
  },
  required: ["city", "days"],
  additionalProperties: false,
};

/** One function call as a client assembles it: the name and the arguments' JSON text. */
export type AssembledCall = { name: string; arguments: string };

/**
 * Runs one chat request twice through the official client, whole and streamed: the whole response's
 * first choice and its function calls, and the stream's calls (fragments joined per `index`), content
 * and `reasoning_content`, for tests that check a stream assembles to the whole message.
 */
export async function chatWholeAndStreamed(server: TestServer, body: Record<string, unknown>) {
  const plain = await server.client.chat.completions.create(
    body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming,
  );
  const choice = plain.choices[0];
  const calls: AssembledCall[] = (choice?.message.tool_calls ?? [])
    .filter((call) => call.type === "function")
    .map((call) => ({ name: call.function.name, arguments: call.function.arguments }));
  const streamed: AssembledCall[] = [];
  let content = "";
  let reasoning = "";
  const stream = await server.client.chat.completions.create({
    ...(body as unknown as OpenAI.ChatCompletionCreateParamsStreaming),
    stream: true,
  });
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta as
      | (OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string })
      | undefined;
    content += delta?.content ?? "";
    reasoning += delta?.reasoning_content ?? "";
    for (const fragment of delta?.tool_calls ?? []) {
      streamed[fragment.index] ??= { name: "", arguments: "" };
      const entry = streamed[fragment.index] as AssembledCall;
      entry.name += fragment.function?.name ?? "";
      entry.arguments += fragment.function?.arguments ?? "";
    }
  }
  return { choice, calls, streamed, content, reasoning };
}

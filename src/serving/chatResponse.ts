/**
 * Runs a planned chat completion (`chat.ts` `planChat`) and builds its `chat.completion` response or its
 * `chat.completion.chunk` stream. Both feed each choice's text through the same {@link ChoiceOutput}
 * in the same order, so a streamed response assembles to the non-streamed one.
 */
import type { TokenLogprob } from "../engine/types.ts";
import type { ChatChoice, ChatChunkChoice, ChatCompletionResponse } from "../protocol/chat.ts";
import type { ChatPlan } from "./chat.ts";
import type { ChatDeltaOut, ChoiceOutput } from "./output/chatOutput.ts";
import { chatLogprobs, promptLogprobs } from "./output/logprobs.ts";
import { type ChunkSink, StreamAssembler, sumUsage } from "./output/streaming.ts";
import { systemFingerprint } from "./output/systemFingerprint.ts";
import { runChoices } from "./runChoices.ts";

function outputOf(plan: ChatPlan, choice: number): ChoiceOutput {
  const output = plan.outputs[choice];
  if (!output) throw new Error(`chat plan has no output for choice ${choice}`);
  return output;
}

/**
 * Runs a planned chat completion to the end and builds the response: per choice the parsed message
 * (content, `tool_calls`, reasoning; see `ChoiceOutput.message`) and `finish_reason` (`tool_calls`
 * when calls were returned). Resolves with null when the client went away before it finished.
 */
export async function completeChat(
  plan: ChatPlan,
  signal: AbortSignal,
): Promise<ChatCompletionResponse | null> {
  const logprobs: TokenLogprob[][] = plan.requests.map(() => []);
  const results = await runChoices(
    plan.scheduler,
    plan.requests,
    (choice, delta) => {
      outputOf(plan, choice).feed(delta.text);
      if (delta.logprobs) logprobs[choice]?.push(...delta.logprobs);
    },
    signal,
  );
  if (results.some((result) => result.finishReason === "abort")) return null;
  return {
    id: plan.id,
    object: "chat.completion",
    created: plan.created,
    model: plan.model,
    choices: results.map((result, index): ChatChoice => {
      const output = outputOf(plan, index);
      output.end();
      return {
        index,
        message: output.message(),
        logprobs: plan.body.logprobs ? { content: chatLogprobs(logprobs[index] ?? [], plan.naming) } : null,
        finish_reason: output.finishReason(result),
        stop_reason: result.stopReason,
      };
    }),
    usage: sumUsage(results, plan.requests.length),
    system_fingerprint: systemFingerprint(plan.scheduler.host),
    ...(plan.body.prompt_logprobs !== undefined &&
    plan.body.prompt_logprobs !== null &&
    results[0]?.promptLogprobs
      ? { prompt_logprobs: promptLogprobs(results[0].promptLogprobs, plan.naming) }
      : {}),
  };
}

/**
 * Runs a planned chat completion as a stream: per choice a first chunk `{role: "assistant",
 * content: ""}`, then one chunk per piece the output parsers decide (reasoning as `reasoning_content` and
 * `reasoning`, content, tool-call fragments; a token's logprobs ride on the first chunk of its piece),
 * what the parsers held back once the generation ended, a last chunk with `finish_reason`; then (with
 * `stream_options.include_usage`) a usage chunk with `choices: []`. Ends the sink.
 * @throws ApiError 503 synchronously (before anything is written) when the queue is full.
 */
export function streamChat(plan: ChatPlan, sink: ChunkSink, signal: AbortSignal): Promise<void> {
  const stream = new StreamAssembler<"chat.completion.chunk", ChatChunkChoice>(
    sink,
    {
      id: plan.id,
      object: "chat.completion.chunk",
      created: plan.created,
      model: plan.model,
      systemFingerprint: systemFingerprint(plan.scheduler.host),
    },
    {
      streamOptions: plan.body.stream_options,
      promptTokens: plan.requests[0]?.promptTokens.length ?? 0,
      choicesPerPrompt: plan.requests.length,
    },
  );
  const send = (index: number, deltas: ChatDeltaOut[], logprobs: ChatChunkChoice["logprobs"]) => {
    deltas.forEach((delta, position) => {
      stream.send([{ index, delta, logprobs: position === 0 ? logprobs : null, finish_reason: null }]);
    });
  };
  const run = runChoices(
    plan.scheduler,
    plan.requests,
    (choice, delta) => {
      stream.count(delta);
      const output = outputOf(plan, choice);
      const deltas = output.streamDeltas(output.feed(delta.text));
      const logprobs = delta.logprobs ? { content: chatLogprobs(delta.logprobs, plan.naming) } : null;
      if (deltas.length === 0) {
        // Nothing decided yet (text held back by a parser): a token's logprobs still go out at once.
        if (!delta.logprobs?.length) return;
        deltas.push({ content: "" });
      }
      send(choice, deltas, logprobs);
    },
    signal,
  );
  plan.requests.forEach((_, index) => {
    stream.send([{ index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }]);
  });
  return stream.finish(run, (result, index) => {
    const output = outputOf(plan, index);
    send(index, output.streamDeltas(output.end()), null);
    stream.send([
      {
        index,
        delta: {},
        logprobs: null,
        finish_reason: output.finishReason(result),
        stop_reason: result.stopReason,
      },
    ]);
  });
}

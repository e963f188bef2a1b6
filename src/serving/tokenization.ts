/**
 * vLLM's `/tokenize` and `/detokenize` (`entrypoints/openai/serving_tokenization.py`): a text prompt
 * or chat messages (rendered exactly as a chat completion would render them) to token ids, and token
 * ids back to text.
 */
import { badRequest } from "../errors.ts";
import type {
  DetokenizeRequest,
  DetokenizeResponse,
  TokenizeChatRequest,
  TokenizeCompletionRequest,
  TokenizeResponse,
} from "../protocol/tokenize.ts";
import { renderPrompt } from "./chat.ts";
import type { ModelRegistry } from "./ModelRegistry.ts";

/**
 * Tokenizes a prompt, or chat messages through the model's chat template.
 * @throws ApiError 404 for an unknown model; 400 when `add_generation_prompt` and
 *   `continue_final_message` are both true (as vLLM), for unsupported message content or a template
 *   that fails to render.
 */
export async function tokenize(
  registry: ModelRegistry,
  body: TokenizeCompletionRequest | TokenizeChatRequest,
): Promise<TokenizeResponse> {
  const { scheduler, chat } = registry.resolve(body.model);
  const host = scheduler.host;
  let tokens: number[];
  if ("messages" in body) {
    if (body.add_generation_prompt && body.continue_final_message) {
      throw badRequest(
        "Cannot set both `continue_final_message` and `add_generation_prompt` to true.",
        "continue_final_message",
      );
    }
    tokens = host.tokenize(
      ...(await renderPrompt(host, chat, {
        ...body,
        add_generation_prompt: body.add_generation_prompt ?? !body.continue_final_message,
      })),
    );
  } else {
    tokens = host.tokenize(body.prompt, body.add_special_tokens ?? true);
  }
  return {
    count: tokens.length,
    max_model_len: host.contextSize,
    tokens,
    ...(body.return_token_strs ? { token_strs: tokens.map((token) => host.vocabulary.piece(token)) } : {}),
  };
}

/**
 * Turns token ids back into text, special tokens rendered (as Hugging Face's `decode`, which vLLM
 * uses).
 * @throws ApiError 404 for an unknown model; 400 naming the first id outside the vocabulary.
 */
export function detokenize(registry: ModelRegistry, body: DetokenizeRequest): DetokenizeResponse {
  const host = registry.resolve(body.model).scheduler.host;
  const size = host.vocabularySize;
  const index = body.tokens.findIndex((token) => token >= size);
  if (index !== -1) {
    throw badRequest(
      `Token id ${body.tokens[index]} is outside the vocabulary (0..${size - 1}).`,
      `tokens[${index}]`,
    );
  }
  return { prompt: host.detokenize(body.tokens, [], true) };
}

/** The named model's host, or the first served model's when no name is given (as vLLM). */

import { resolve as resolvePath } from "node:path";
import type { FastifyInstance } from "fastify";
import { badRequest } from "../../errors.ts";
import { LoadLoraAdapterRequestSchema, UnloadLoraAdapterRequestSchema } from "../../protocol/loraAdapters.ts";
import type { AppContext } from "../appContext.ts";
import { parseBody } from "../validation.ts";

/** The longest `lora_name` a run-time load accepts, in UTF-16 code units. */
const MAX_LORA_NAME_LENGTH = 256;

/**
 * vLLM's run-time LoRA routes (behind the API key, as every `/v1` route): `POST /v1/load_lora_adapter`
 * `{lora_name, lora_path}` loads an adapter GGUF onto the first model (or `base_model_name`) and serves it
 * as `lora_name`; `POST /v1/unload_lora_adapter` `{lora_name}` stops serving it (requests already queued
 * or running under it finish first, then it is freed). Both answer 200 with vLLM's plain-text sentence;
 * 400 for a missing name or path, a name longer than 256 characters, a name already served, a file that is not an adapter for the model;
 * 404 for an unknown adapter or a path with no file.
 */
export function registerLoraAdapterRoutes(app: FastifyInstance, context: AppContext): void {
  app.post("/v1/load_lora_adapter", async (request, reply) => {
    const body = parseBody(LoadLoraAdapterRequestSchema, request.body);
    if (!body.lora_name || !body.lora_path) {
      throw badRequest(
        "Both 'lora_name' and 'lora_path' must be provided.",
        body.lora_name ? "lora_path" : "lora_name",
      );
    }
    // A served name is a `model` value and a metric label: bounded as model ids are in practice.
    if (body.lora_name.length > MAX_LORA_NAME_LENGTH) {
      throw badRequest(`'lora_name' is longer than ${MAX_LORA_NAME_LENGTH} characters.`, "lora_name");
    }
    await context.registry.loadAdapter(
      body.lora_name,
      resolvePath(body.lora_path),
      body.base_model_name ?? undefined,
    );
    context.metrics?.enableLora();
    request.log.info({ lora_name: body.lora_name, lora_path: body.lora_path }, "LoRA adapter loaded");
    reply.type("text/plain; charset=utf-8");
    return `Success: LoRA adapter '${body.lora_name}' added successfully.`;
  });
  app.post("/v1/unload_lora_adapter", async (request, reply) => {
    const body = parseBody(UnloadLoraAdapterRequestSchema, request.body);
    if (!body.lora_name) {
      throw badRequest("'lora_name' needs to be provided to unload a LoRA adapter.", "lora_name");
    }
    const name = body.lora_name;
    const freed = context.registry.unloadAdapter(name);
    freed.then(
      () => request.log.info({ lora_name: name }, "LoRA adapter freed"),
      () => undefined,
    );
    reply.type("text/plain; charset=utf-8");
    return `Success: LoRA adapter '${name}' removed successfully.`;
  });
}

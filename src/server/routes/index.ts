import type { FastifyInstance } from "fastify";
import type { AppContext } from "../appContext.ts";
import { registerMetricsRoute } from "../metrics.ts";
import { MetricsSampler, registerMetricsHistoryRoute } from "../metricsHistory.ts";
import { registerModelResidency } from "../modelResidency.ts";
import type { DocumentOptions } from "../openapi.ts";
import { registerUi, type UiOptions } from "../ui.ts";
import { registerMessagesRoutes } from "./anthropicMessages.ts";
import { registerChatRoutes } from "./chat.ts";
import { registerCompletionRoutes } from "./completions.ts";
import { registerEmbeddingRoutes } from "./embeddings.ts";
import { registerHealthRoutes } from "./health.ts";
import { registerLoraAdapterRoutes } from "./loraAdapters.ts";
import { registerMetaRoutes } from "./meta.ts";
import { registerModelRoutes } from "./models.ts";
import { registerResponsesRoutes } from "./openaiResponses.ts";
import { registerRerankRoutes } from "./rerank.ts";
import { registerTokenizeRoutes } from "./tokenize.ts";

/** Options of {@link registerRoutes}: the OpenAPI document's security, and the web UI. */
export type RouteOptions = Required<DocumentOptions> & {
  /** The web UI at `/` (a catch-all, so registered last), or off. */
  ui: UiOptions | false;
};

/** Registers every route of the server, in one place (after the hooks of `operations.ts`). */
export function registerRoutes(app: FastifyInstance, context: AppContext, options: RouteOptions): void {
  registerModelResidency(app, context.registry);
  registerTokenizeRoutes(app, context);
  registerMetaRoutes(app, { keyed: options.keyed, protectMetrics: options.protectMetrics });
  registerHealthRoutes(app, context);
  if (context.metrics) {
    registerMetricsRoute(app, context.metrics);
    registerMetricsHistoryRoute(app, new MetricsSampler(context.metrics));
  }
  registerModelRoutes(app, context);
  registerLoraAdapterRoutes(app, context);
  registerCompletionRoutes(app, context);
  registerEmbeddingRoutes(app, context);
  registerRerankRoutes(app, context);
  registerChatRoutes(app, context);
  registerResponsesRoutes(app, context);
  registerMessagesRoutes(app, context);
  if (options.ui) registerUi(app, options.ui);
}

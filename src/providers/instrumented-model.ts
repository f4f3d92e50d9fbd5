/** A ChatModel that reports each call's time and outcome (metrics), by the model's `provider/model`. */
import type { Metrics } from "../metrics.js";
import type { ChatModel } from "./chat-model.js";

export function instrumentModel(model: ChatModel, metrics: Pick<Metrics, "modelCall">, now: () => number = Date.now): ChatModel {
  return {
    id: model.id,
    async *stream(request) {
      const startedAt = now();
      let outcome: "ok" | "error" = "error";
      try {
        // Errors are thrown by the stream (after its retries and fallbacks): what is left is a failed call.
        yield* model.stream(request);
        outcome = "ok";
      } finally {
        metrics.modelCall(model.id, (now() - startedAt) / 1000, outcome);
      }
    },
  };
}

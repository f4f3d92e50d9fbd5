/**
 * A zero-latency in-process ChatModel that plays a script, one step per model call. For loop
 * tests and the loop benchmark; the wire-level fakes live in fake-*-server.ts.
 */
import type { ChatMessage, ChatModel, ChatRequest, StreamPart } from "../../src/providers/chat-model.js";

export interface ScriptStep {
  text?: string | string[];
  reasoning?: string;
  toolCalls?: Array<{ id?: string; name: string; arguments: string | Record<string, unknown> }>;
  /** Thrown before anything is yielded (or after `text` when `errorAfterText`). */
  error?: Error;
  errorAfterText?: boolean;
  /** Never finishes until the request is aborted. */
  hang?: boolean;
  usage?: { inputTokens: number; outputTokens: number };
}

export type Script = ScriptStep[] | ((request: Omit<ChatRequest, "model">, call: number) => ScriptStep);

export interface ScriptedModel extends ChatModel {
  requests: Array<Omit<ChatRequest, "model" | "signal"> & { messages: ChatMessage[] }>;
}

export function scriptedModel(script: Script, id = "scripted/model"): ScriptedModel {
  const requests: ScriptedModel["requests"] = [];
  let call = 0;
  return {
    id,
    requests,
    async *stream(request): AsyncIterable<StreamPart> {
      const index = call++;
      requests.push({ ...request, messages: structuredClone(request.messages) });
      const step = typeof script === "function" ? script(request, index) : script[index];
      if (!step) throw new Error(`scripted model: no step for call ${index + 1}`);
      if (step.error && !step.errorAfterText) throw step.error;
      if (step.reasoning) yield { type: "reasoning-delta", text: step.reasoning };
      const chunks = step.text === undefined ? [] : Array.isArray(step.text) ? step.text : [step.text];
      for (const chunk of chunks) yield { type: "text-delta", text: chunk };
      if (step.error) throw step.error;
      if (step.hang) {
        await new Promise<void>((_, reject) => {
          const fail = () => reject(request.signal?.reason ?? new Error("aborted"));
          if (request.signal?.aborted) fail();
          request.signal?.addEventListener("abort", fail, { once: true });
        });
      }
      for (const [position, toolCall] of (step.toolCalls ?? []).entries()) {
        yield {
          type: "tool-call",
          call: {
            id: toolCall.id ?? `call_${index}_${position}`,
            name: toolCall.name,
            arguments: typeof toolCall.arguments === "string" ? toolCall.arguments : JSON.stringify(toolCall.arguments),
          },
        };
      }
      yield {
        type: "finish",
        reason: step.toolCalls?.length ? "tool-calls" : "stop",
        usage: step.usage ?? { inputTokens: 10, outputTokens: 5 },
        model: id,
      };
    },
  };
}

/** Helpers for reading a provider's part stream in tests. */
import { ProviderError } from "../../../src/errors.js";
import type { StreamPart } from "../../../src/providers/chat-model.js";

/** Every part of a stream that must succeed. */
export async function collect(stream: AsyncIterable<StreamPart>): Promise<StreamPart[]> {
  const parts: StreamPart[] = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

/** The parts yielded before the stream failed, and the ProviderError it failed with. */
export async function collectFailure(stream: AsyncIterable<StreamPart>): Promise<{ parts: StreamPart[]; error: ProviderError }> {
  const parts: StreamPart[] = [];
  try {
    for await (const part of stream) parts.push(part);
  } catch (error) {
    if (error instanceof ProviderError) return { parts, error };
    throw error;
  }
  throw new Error(`expected the stream to fail; it yielded ${JSON.stringify(parts)}`);
}

export function textOf(parts: StreamPart[]): string {
  return parts.map((part) => (part.type === "text-delta" ? part.text : "")).join("");
}

/** A sleep that records what it was asked to wait and returns at once. */
export function recordingSleep(): { sleep: (milliseconds: number, signal?: AbortSignal) => Promise<void>; waits: number[] } {
  const waits: number[] = [];
  return {
    waits,
    sleep: async (milliseconds) => {
      waits.push(milliseconds);
    },
  };
}
